"""``/send`` and ``/campaigns/{id}``: one message, or a campaign to a list, and its progress.

The checks and the use cases are the API's own, from the domain
(:mod:`appliance.sending.checks`, :mod:`appliance.sending.message_requests`,
:mod:`appliance.sending.campaign_requests`); a refusal is shown on the form. Every send
form carries a key made when the form was shown, so posting it twice (a double click,
a reload) gives back the first message or campaign instead of sending again. A
campaign is sent only from a confirmation page that states how many messages and SMS
parts will go out (and why the text is UCS-2 if it is); if the list changed in between,
it is not sent and the confirmation is shown again with the new count.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.clock import iso
from appliance.config import Settings
from appliance.console_sessions import ConsoleSession
from appliance.disk import below_reserve
from appliance.imports.import_job import list_jobs, list_lists, list_summary
from appliance.provider_kinds import validity_range_s
from appliance.refusals import Malformed, Refused
from appliance.reports.states import FINAL_STATES
from appliance.sending import campaigns as camp
from appliance.sending.accept import NewMessage
from appliance.sending.campaign_requests import (
    campaign_rate,
    plan_campaign,
    read_progress,
    start_campaign,
)
from appliance.sending.checks import (
    check_body,
    check_longest,
    check_provider,
    check_send_at,
    check_template,
    check_to,
    check_window,
)
from appliance.sending.commercial import (
    check_content,
    check_type,
    default_window,
    gated,
)
from appliance.sending.dry_run import DryRun, dry_run
from appliance.sending.duplicates import DayKeys, dup_key
from appliance.sending.message_requests import queue_message
from appliance.sending.routes import route_of
from appliance.sending.validity import check_validity
from appliance.store.connection import Connection
from appliance.web.errors import STORAGE_RETRY_AFTER_S, refusal_status
from appliance.web.pages.chart import state_bar_svg, state_groups
from appliance.web.pages.guard import console_page, refusal
from appliance.web.pages.render import page
from appliance.web.parts import parts_of
from appliance.web.sending_json import campaign_json

MAX_ID = 2**62
KEY_PREFIX = "console:"


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _form_key(form: FormData) -> str:
    """The form's send key: made when the form was shown, checked for shape here."""
    key = _field(form, "send_key")
    if not (16 <= len(key) <= 64) or not key.replace("-", "").replace("_", "").isalnum():
        raise Malformed("invalid_form", "This form is incomplete. Reload the page.")
    return KEY_PREFIX + key


async def _send_page(request: Request, session: ConsoleSession, status: int = 200,
                     error: str = "", values: dict[str, str] | None = None) -> Response:
    appliance = parts_of(request).runtime
    account_id = session.account_id
    lists, recent = await appliance.store.readers.run(
        lambda c: (list_lists(c, account_id), camp.list_campaigns(c, account_id, limit=20)))
    settings = appliance.settings
    chosen = dict(values or {})
    chosen.setdefault("list", request.query_params.get("list", ""))
    return page(request, "send.html", session, status=status, title="Send", error=error,
                lists=lists, providers=list(settings.providers),
                default_provider=settings.default_provider, values=chosen,
                routed=bool(settings.routes),
                max_body=settings.sending.max_body_chars,
                typed=settings.compliance.turkey,
                campaigns=[campaign_json(p) for p in recent],
                message_key=secrets.token_urlsafe(18), campaign_key=secrets.token_urlsafe(18))


async def send_form(request: Request, session: ConsoleSession, form: FormData) -> Response:
    return await _send_page(request, session)


def _checked(request: Request, form: FormData, *, need_to: bool) -> dict[str, Any]:
    settings = parts_of(request).runtime.settings
    named = _field(form, "provider") or None
    provider = check_provider(settings, named)
    # IYS-1: with [compliance] country = "TR" the console says commercial or
    # transactional as the API does, and a commercial text passes the same checks.
    message_type = check_type(settings, _field(form, "type") or None)
    out: dict[str, Any] = {
        "body": check_body(settings, _field(form, "body"), provider),
        "provider": provider,
        "type": message_type,
        # ROUTE-3: no provider chosen, with [[routes]]: each message follows its route.
        "routed": bool(settings.routes) and named is None,
    }
    check_content(settings, message_type, out["body"])
    if need_to:
        out["to"] = check_to(settings, _field(form, "to"))
    else:
        check_template(out["body"])
        out["send_at"] = _send_at(_field(form, "send_at"))
        tz = _field(form, "window_tz").strip()
        start, end = _field(form, "window_from"), _field(form, "window_to")
        out["window"] = default_window(settings, message_type, check_window(
            {"from": start, "to": end, "tz": tz}) if (start or end or tz) else None)
    return out


def _send_at(text: str) -> int | None:
    """The form's ``datetime-local`` (UTC) as epoch ms; an empty field: send now."""
    text = text.strip()
    if not text:
        return None
    if len(text) == 16:  # 2027-01-15T09:00
        text += ":00"
    return check_send_at(text + "Z" if not text.endswith("Z") else text)


SCHEDULE_FIELDS = ("send_at", "window_from", "window_to", "window_tz")


def _values(form: FormData) -> dict[str, str]:
    return {k: _field(form, k)
            for k in ("to", "body", "provider", "list", "type", *SCHEDULE_FIELDS)}


def _default_validity(settings: Settings, provider: str) -> int:
    """``[sending] validity_s`` for a console send (ROUTE-4), refused as the API refuses
    it when the provider's kind cannot carry it."""
    return check_validity(None, settings.sending.validity_s, provider,
                          validity_range_s(settings, provider))


async def send_message(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    try:
        key = _form_key(form)
        checked = _checked(request, form, need_to=True)
        settings = appliance.settings
        choice = route_of(settings, parts_of(request).sender.health.lowered,
                          None if checked["routed"] else checked["provider"], checked["to"],
                          checked["type"])
        checked["provider"] = choice.provider
        provider = settings.provider(choice.provider)
        new = NewMessage(account_id=session.account_id, msisdn=checked["to"],
                         body=checked["body"], provider=checked["provider"],
                         route=choice.route,
                         idempotency_key=key, counting=provider.counting_to(checked["to"]),
                         message_type=checked["type"],
                         consent_required=gated(settings, checked["type"]),
                         dup_key=dup_key(session.account_id, checked["to"], provider.sender,
                                         appliance.now_ms(), checked["body"])
                         if settings.compliance.turkey else None,
                         validity_s=_default_validity(settings, checked["provider"]))
        accepted = await queue_message(appliance, new,
                                       wake_sender=parts_of(request).sender.wake)
    except Refused as exc:
        if exc.error == "idempotency_key_reused":
            return await _send_page(request, session, 409, "This form was already used for"
                                    " another message. Nothing was sent twice; check the"
                                    " message below.", _values(form))
        return await _send_page(request, session, refusal_status(exc), exc.message,
                                _values(form))
    return RedirectResponse(f"/messages?q={accepted.ref}&sent=1", status_code=303)


async def confirm_campaign(request: Request, session: ConsoleSession,
                           form: FormData) -> Response:
    appliance = parts_of(request).runtime
    name = _field(form, "list").strip()
    try:
        key = _form_key(form)
        checked = _checked(request, form, need_to=False)
    except Refused as exc:
        return await _send_page(request, session, refusal_status(exc), exc.message,
                                _values(form))
    account_id = session.account_id

    body, provider = checked["body"], checked["provider"]
    prefixes = appliance.settings.provider(provider).turkish_prefixes
    day_keys = DayKeys(account_id, appliance.settings.provider(provider).sender,
                       max(appliance.now_ms(), checked["send_at"] or 0)) \
        if appliance.settings.compliance.turkey else None

    def read(c: Connection) -> tuple[dict[str, Any] | None, int, DryRun | None]:
        found = list_summary(c, account_id, name) if name else None
        running = 0
        plan = None
        if found is not None:
            running = sum(1 for j in list_jobs(c, account_id, limit=200)
                          if j.list_id == found["id"] and j.state in ("DRAFT", "RUNNING"))
            plan = dry_run(c, account_id, name, provider, body, turkish_prefixes=prefixes,
                           counting=appliance.settings.provider(provider).counting,
                           consent_gate=gated(appliance.settings, checked["type"]),
                           day_keys=day_keys)
        return found, running, plan

    found, running_imports, plan = await appliance.store.readers.run(read)
    if found is None:
        return await _send_page(request, session, 422, "Choose one of your lists.", _values(form))
    if found["contacts"] == 0:
        return await _send_page(request, session, 422,
                                f"The list {name!r} has no contacts: nothing to send.",
                                _values(form))
    assert plan is not None
    try:
        check_longest(appliance.settings, plan, provider)
    except Refused as exc:
        return await _send_page(request, session, refusal_status(exc), exc.message,
                                _values(form))
    return page(request, "confirm.html", session, title="Confirm the campaign", list=found,
                body=body, provider=provider, send_key=key[len(KEY_PREFIX):],
                running_imports=running_imports, changed_from=None, plan=plan,
                suppressed=plan.suppressed, schedule=_schedule(checked),
                message_type=checked["type"], routed=checked["routed"],
                schedule_values={k: _field(form, k) for k in SCHEDULE_FIELDS})


def _schedule(checked: dict[str, Any]) -> dict[str, Any]:
    window = checked.get("window")
    return {"send_at": iso(checked.get("send_at")),
            "window": window.as_json() if window is not None else None}


async def create_campaign(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    name = _field(form, "list").strip()
    expected_raw = _field(form, "expected")
    try:
        key = _form_key(form)
        checked = _checked(request, form, need_to=False)
        if not expected_raw.isascii() or not expected_raw.isdigit() or len(expected_raw) > 12:
            raise Malformed("invalid_form", "This form is incomplete. Reload the page.")
    except Refused as exc:
        return await _send_page(request, session, refusal_status(exc), exc.message,
                                _values(form))
    expected = int(expected_raw)
    reserve = below_reserve(appliance.settings)
    if reserve is not None:
        answer = refusal(request, session, 503, "storage_full", reserve)
        answer.headers["Retry-After"] = str(STORAGE_RETRY_AFTER_S)
        return answer
    try:
        plan = await plan_campaign(appliance, session.account_id, name, checked["provider"],
                                   checked["body"], checked["type"], checked["send_at"])
        new = camp.NewCampaign(account_id=session.account_id, list_name=name,
                               provider=checked["provider"], body=checked["body"],
                               idempotency_key=key, send_at=checked["send_at"],
                               window=checked["window"], planned_parts=plan.parts,
                               message_type=checked["type"],
                               validity_s=_default_validity(appliance.settings,
                                                            checked["provider"]),
                               routed=checked["routed"])
        campaign, _ = await start_campaign(appliance, new, expected_contacts=expected,
                                           wake_expansion=parts_of(request).campaigns.wake)
    except Refused as exc:
        if exc.error == "list_changed":
            summary = {"name": name, "contacts": exc.extra["contacts"]}
            plan = await plan_campaign(appliance, new.account_id, name, new.provider, new.body,
                                       new.message_type, new.send_at)
            return page(request, "confirm.html", session, status=409,
                        title="Confirm the campaign", list=summary, body=checked["body"],
                        provider=checked["provider"], send_key=key[len(KEY_PREFIX):],
                        running_imports=0, changed_from=expected, plan=plan,
                        suppressed=plan.suppressed, schedule=_schedule(checked),
                        message_type=checked["type"], routed=checked["routed"],
                        schedule_values={k: _field(form, k) for k in SCHEDULE_FIELDS})
        if exc.error == "idempotency_key_reused":
            return refusal(request, session, 409, "already_used",
                           "This confirmation was already used for another campaign.")
        return await _send_page(request, session, refusal_status(exc), exc.message,
                                _values(form))
    return RedirectResponse(f"/campaigns/{campaign.id}", status_code=303)


async def campaign_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    campaign_id: int = request.path_params["campaign_id"]
    appliance = parts_of(request).runtime
    progress = await read_progress(appliance, campaign_id, session.account_id) \
        if campaign_id <= MAX_ID else None
    if progress is None:
        return refusal(request, session, 404, "not_found", "There is no such campaign.")
    data = campaign_json(progress, campaign_rate(parts_of(request).sender, campaign_id))
    phase, refresh_s = campaign_phase(data)
    groups = state_groups(data["counts"], data["total"])
    return page(request, "campaign.html", session, title=f"Campaign {campaign_id}",
                campaign=data, phase=phase, refresh_s=refresh_s,
                done=request.query_params.get("done", ""),
                awaiting=dict((cls, n) for cls, _, n in groups)["sent"],
                unsent=dict((cls, n) for cls, _, n in groups)["waiting"],
                states=_ordered_states(data["counts"]), bar=state_bar_svg(data["counts"],
                                                                         data["total"]),
                groups=groups)


# How often the campaign page reloads itself: quickly while messages go out, slowly
# while only reports are awaited, not at all once nothing can change.
SENDING_REFRESH_S = 2
AWAITING_REFRESH_S = 10


def campaign_phase(data: dict[str, Any]) -> tuple[str, int | None]:
    """What the campaign page says the campaign is doing, and its refresh interval.

    The campaign's state is ``DONE`` as soon as nothing is left to send; the page says
    "sending finished, N awaiting reports" until every message has a final state, and
    stops refreshing only then (or when a cancelled campaign has nothing in flight).
    """
    unfinished = data["total"] - data["finalised"]
    if data["state"] == "CANCELLED":
        in_flight = sum(n for s, n in data["counts"].items() if s not in FINAL_STATES
                        and s not in ("QUEUED", "RETRY", "CANCELLED"))
        return "CANCELLED", AWAITING_REFRESH_S if in_flight else None
    if data["state"] in ("PAUSED", "SCHEDULED"):
        return data["state"], AWAITING_REFRESH_S
    if data["state"] != "DONE" and not data.get("unsent", 1) and data.get("uncertain"):
        return "NEEDS A DECISION", AWAITING_REFRESH_S  # only UNCERTAIN ones are left
    if data["state"] != "DONE":
        return "SENDING", SENDING_REFRESH_S
    if unfinished > 0:
        return "AWAITING REPORTS", AWAITING_REFRESH_S
    return "DONE", None


STATE_ORDER = ("QUEUED", "SENDING", "RETRY", "SUBMITTED", "UNCERTAIN", "ACCEPTED", "ENROUTE",
               "DELIVERED", "FAILED", "EXPIRED", "REJECTED", "UNKNOWN", "CANCELLED")


def _ordered_states(counts: dict[str, int]) -> list[tuple[str, int]]:
    known = [(s, counts[s]) for s in STATE_ORDER if s in counts]
    return known + sorted((s, n) for s, n in counts.items() if s not in STATE_ORDER)


def routes() -> list[BaseRoute]:
    return [
        Route("/send", console_page(send_form), methods=["GET"]),
        Route("/send/message", console_page(send_message), methods=["POST"]),
        Route("/send/campaign/confirm", console_page(confirm_campaign), methods=["POST"]),
        Route("/send/campaign", console_page(create_campaign), methods=["POST"]),
        Route("/campaigns/{campaign_id:int}", console_page(campaign_page), methods=["GET"]),
    ]
