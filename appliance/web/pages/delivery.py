"""``/dashboard`` and ``/messages``: how delivery goes, and what happened to messages.

The dashboard shows the same figures as ``GET /api/stats`` (one read unit,
``appliance.ops.observability.summary.summary``, for the signed-in account): coverage beside
delivery rate over the settled window, the same for the live hours after it,
still-open vs total by hour of creation as a server-drawn chart, inbox health,
overdue messages, the alerts that hold and each SMPP session (bound or not, since
when, its window in use, the rate in force, throttled answers). Its figures are also served alone
(``/dashboard/figures``) for the page's script to swap in while reports arrive.

``/messages`` lists the account's messages, newest first, filtered by state,
campaign, provider and time of creation (UTC); ``?q=`` looks one up by our ref or by
phone number and shows its report timeline.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from appliance.console_sessions import ConsoleSession
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.ops.observability.summary import summary
from appliance.providers.registry import Providers
from appliance.sending import messages as msgs
from appliance.sending import resolution
from appliance.sending.checks import MAX_MSISDN_CHARS
from appliance.sending.credit import credits
from appliance.sending.message_search import MessageFilter, campaign_choices, search_messages
from appliance.sending.provider_health import lowered
from appliance.sending.provider_holds import held
from appliance.sending.refs import looks_like_ref
from appliance.store.connection import Connection
from appliance.web.errors import ascii_int
from appliance.web.pages.chart import HourBar, merge_hours, open_by_hour_svg
from appliance.web.pages.guard import console_page
from appliance.web.pages.render import page
from appliance.web.pages.sending import STATE_ORDER
from appliance.web.pages.timeline import message_timeline
from appliance.web.parts import parts_of

ALERT_TITLES = {
    "coverage_low": "Coverage below the minimum",
    "inbox_stale": "Old unmatched reports in the inbox",
    "overdue": "Messages past the delivery window without a final report",
    "backup_stale": "Scheduled backups late or failing",
    "import_stuck": "An import job has stopped moving",
    "provider_blocked": "A provider refuses every message until its operator acts",
}
# The live figures poll quickly while reports are still due, slowly otherwise.
BUSY_POLL_S = 3
IDLE_POLL_S = 15


def _ms(text: str | None) -> int:
    if not text:
        return 0
    return int(datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)


async def _dashboard_context(request: Request, session: ConsoleSession) -> dict[str, Any]:
    appliance = parts_of(request).runtime
    settings = appliance.settings
    now = appliance.now_ms()
    account_id = session.account_id
    stats: dict[str, Any] = await appliance.store.readers.run(
        lambda c: summary(c, settings, now, account_id))
    window = stats["window"]
    start, end = _ms(window["from"]), _ms(window["to"])
    settled = [HourBar(_ms(h["hour"]), int(h["still_open"]), int(h["total"]))
               for h in stats["open_by_hour"]]
    live = [HourBar(_ms(h["hour"]), int(h["still_open"]), int(h["total"]))
            for h in stats["live_by_hour"]]
    bars = merge_hours(settled, live)
    alerts = [{**a, "title": ALERT_TITLES.get(a["name"], a["name"].replace("_", " "))}
              for a in stats["alerts"]]
    busy = stats["live"]["still_due"] > 0 or stats["inbox"]["waiting"] > 0
    accounts = await appliance.store.readers.run(
        lambda c: accounts_panel(c, parts_of(request).providers))
    return {"stats": stats, "sessions": sessions_panel(parts_of(request).providers),
            "provider_accounts": accounts,
            "window_start": start,
            "window_end": end, "now": now,
            "chart": open_by_hour_svg(bars, start, now, settling_from_ms=end),
            "hours": sorted(bars, key=lambda b: b.hour_ms, reverse=True),
            "settling_from": end, "alerts": alerts,
            "holding": [a for a in alerts if a["firing"]], "settings": settings,
            "poll_s": BUSY_POLL_S if busy else IDLE_POLL_S}


def accounts_panel(conn: Connection, providers: Providers) -> list[dict[str, Any]]:
    """Each provider whose kind tells its credit, whose lane is held, or that is lowered
    for its live delivery (ROUTE-3): the last credit read and when, the query's last
    error, the hold's reason, and the figures that lowered it (a read unit)."""
    known = credits(conn)
    holds = held(conn)
    low = lowered(conn)
    out = []
    for name, provider in sorted(providers.all().items()):
        if provider.credit is None and name not in holds and name not in low:
            continue
        kept = known.get(name)
        hold = holds.get(name)
        out.append({"name": name, "credit": kept.credit if kept else None,
                    "at": kept.at_ms if kept else None,
                    "error": kept.error if kept else None,
                    "held": hold.reason if hold else None,
                    "held_error": hold.error if hold else None,
                    "lowered": low.get(name)})
    return out


def sessions_panel(providers: Providers) -> list[dict[str, Any]]:
    """Each provider session (SMPP's, or any session kind's) as the dashboard shows it
    (empty: no provider speaks over a session)."""
    out = []
    for name, (_, t) in sorted(providers.sessions().items()):
        st = t.state()
        errors = [f"{ls.mode}: {ls.last_error}" for ls in st.links if ls.last_error]
        out.append({"name": name, "bound": st.bound, "since": st.bound_since_ms,
                    "window": st.window, "in_use": st.window_in_use,
                    "rate": st.rate_per_s, "configured_rate": t.configured_rate_per_s,
                    "throttled": st.throttled, "reconnects": st.reconnects,
                    "accepted": st.accepted, "uncertain": st.uncertain,
                    "delivers": st.delivers, "temp_errors": st.deliver_temp_errors,
                    "error": "; ".join(errors)})
    return out


async def dashboard(request: Request, session: ConsoleSession, form: FormData) -> Response:
    context = await _dashboard_context(request, session)
    return page(request, "dashboard.html", session, title="Delivery dashboard", **context)


async def dashboard_figures(request: Request, session: ConsoleSession,
                            form: FormData) -> Response:
    """The dashboard's figures alone: what its script swaps in while reports arrive."""
    context = await _dashboard_context(request, session)
    return page(request, "dashboard_figures.html", session, title="Delivery dashboard",
                **context)


MESSAGE_STATES = (*STATE_ORDER, "CANCELLED")
PAGE_SIZE = 100


def _utc_ms(text: str) -> int | None:
    """A ``datetime-local`` (``2026-12-01T08:30``) or a date, read as UTC; None if not one."""
    text = text.strip()[:32]
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return int(parsed.timestamp() * 1000)


def _filters(request: Request) -> tuple[MessageFilter, dict[str, str], list[str]]:
    q = request.query_params
    values = {k: q.get(k, "").strip()[:100] for k in ("state", "campaign", "provider", "from",
                                                      "to")}
    problems: list[str] = []
    state = values["state"].upper() or None
    if state is not None and state not in MESSAGE_STATES:
        problems.append(f"{values['state']!r} is not a message state")
        state = None
    campaign = None
    if values["campaign"]:
        campaign = ascii_int(values["campaign"].lstrip("#"))
        if campaign is None:
            problems.append(f"{values['campaign']!r} is not a campaign number")
    bounds: list[int | None] = []
    for name in ("from", "to"):
        ms = _utc_ms(values[name])
        if values[name] and ms is None:
            problems.append(f"{values[name]!r} is not a date and time (YYYY-MM-DDTHH:MM)")
        bounds.append(ms)
    return (MessageFilter(state, campaign, values["provider"] or None, bounds[0], bounds[1]),
            values, problems)


async def messages_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    query = request.query_params.get("q", "").strip()[:MAX_MSISDN_CHARS]
    account_id = session.account_id
    chosen, values, problems = _filters(request)
    before = ascii_int(request.query_params.get("before", ""))
    context: dict[str, Any] = {"query": query, "message": None, "timeline": [],
                               "found": [], "error": "", "msisdn": "",
                               "sent": request.query_params.get("sent") == "1",
                               "filters": values, "problems": problems, "listed": [],
                               "next_before": None, "states": MESSAGE_STATES,
                               "providers": list(appliance.settings.providers),
                               "campaigns": [], "filtered": not chosen.empty,
                               "resolved": request.query_params.get("resolved", "")}
    status = 200
    if not query:
        def listing(c: Connection) -> tuple[list[msgs.Message], list[tuple[int, str]]]:
            return (search_messages(c, account_id, chosen, before, PAGE_SIZE + 1),
                    campaign_choices(c, account_id))

        listed, campaigns = await appliance.store.readers.run(listing)
        context["listed"] = listed[:PAGE_SIZE]
        context["campaigns"] = campaigns
        if len(listed) > PAGE_SIZE:
            context["next_before"] = listed[PAGE_SIZE - 1].id
        return page(request, "messages.html", session, status=422 if problems else 200,
                    title="Messages", **context)
    if query and looks_like_ref(query.upper()):
        ref = query.upper()

        def read(c: Connection) -> tuple[msgs.Message, list[msgs.HistoryEntry],
                                               list[msgs.Action]] | None:
            m = msgs.get_message(c, ref, account_id)
            return None if m is None else (m, msgs.message_history(c, m),
                                           msgs.message_actions(c, m.id))

        got = await appliance.store.readers.run(read)
        if got is None:
            context["error"] = f"No message with the ref {ref}."
            status = 404
        else:
            context["message"] = got[0]
            context["timeline"] = message_timeline(*got)
            context["resend_warning"] = resolution.RESEND_WARNING
    elif query:
        number = normalise_msisdn(query, appliance.settings.imports.default_region)
        if isinstance(number, Invalid):
            context["error"] = (f"{query!r} is neither one of our refs (26 characters) nor a"
                                f" phone number: {number.reason}.")
            status = 422
        else:
            msisdn = number.msisdn
            context["msisdn"] = msisdn
            context["found"] = await appliance.store.readers.run(
                lambda c: msgs.messages_for_msisdn(c, account_id, msisdn))
            if not context["found"]:
                context["error"] = f"No messages to {msisdn}."
                status = 404
    return page(request, "messages.html", session, status=status, title="Message lookup",
                **context)


def routes() -> list[BaseRoute]:
    return [
        Route("/dashboard", console_page(dashboard), methods=["GET"]),
        Route("/dashboard/figures", console_page(dashboard_figures), methods=["GET"]),
        Route("/messages", console_page(messages_page), methods=["GET"]),
    ]
