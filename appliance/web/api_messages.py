"""``/api/messages`` and ``/api/campaigns``: accept sends, show their progress.

Accepting only validates, writes the row (``QUEUED``) and wakes the sender; the
answer is ``202`` with our ref, which the provider will echo back in its reports.
A send to a number on the account's suppression list is refused ``409`` (OPS-4), in the
same write unit as the insert, so nothing is queued.
A campaign is accepted as one row and expanded into messages by the ``campaigns``
loop, so the answer does not wait for the list.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.accounts import SHOWN_PREFIX, Account
from appliance.clock import iso
from appliance.config import ProviderSettings
from appliance.imports.accept import MAX_LIST_NAME
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.message_text.segments import Unsendable, check_sendable
from appliance.ops.storage import below_reserve
from appliance.optout.suppressions import Suppressed, refuse_if_suppressed
from appliance.reports.states import FINAL_STATES
from appliance.sending import campaigns as camp
from appliance.sending import messages as msgs
from appliance.sending.personalise import TemplateError
from appliance.sending.personalise import parse as parse_template
from appliance.sending.refs import looks_like_ref, new_ref
from appliance.sending.windows import BadWindow, SendWindow
from appliance.service import Appliance
from appliance.store.connection import Connection
from appliance.web.api_imports import read_limited
from appliance.web.auth import require_account
from appliance.web.errors import ApiError, not_found, path_id, storage_full
from appliance.web.json_body import parse_json_object

MAX_IDEMPOTENCY_KEY = 200
MAX_REQUEST_BYTES = 64 * 1024
MAX_MSISDN_CHARS = 64
MAX_PARTS_DEFAULT = ProviderSettings.max_parts


def _appliance(request: Request) -> Appliance:
    appliance: Appliance = request.app.state.appliance
    return appliance


def _idempotency_key(request: Request) -> str | None:
    key = request.headers.get("idempotency-key")
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > MAX_IDEMPOTENCY_KEY or not key.isprintable():
        raise ApiError(400, "invalid_idempotency_key",
                       f"Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable characters")
    return key


async def _json_object(request: Request) -> dict[str, Any]:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise ApiError(415, "unsupported_media_type", "send application/json")
    body = await read_limited(request, MAX_REQUEST_BYTES)
    return parse_json_object(body)


def check_body(appliance: Appliance, value: Any, provider: str | None = None,
               msisdn: str = "") -> str:
    """A message body as sent (API or console form); :class:`ApiError` 422 otherwise.

    The body must also be sendable through ``provider`` (a configured provider's name;
    the default limits for ``None``): encodable as SMS (no lone surrogate) and no more
    parts than the provider's ``max_parts``. That refusal is ``422 unsendable_body``
    with the ``reason`` (``lone_surrogate`` or ``too_many_parts``) and, for too many
    parts, the ``limit`` and the ``parts`` the body would need. Parts are counted as the
    provider sends to ``msisdn`` (with the Turkish tables where it uses them, ENC-1).
    """
    limit = appliance.settings.sending.max_body_chars
    if not isinstance(value, str) or not value.strip():
        raise ApiError(422, "invalid_body", "'body' must be a non-empty string")
    if len(value) > limit:
        raise ApiError(422, "body_too_long",
                       f"'body' has {len(value)} characters; the limit is {limit}",
                       limit=limit, submitted=len(value))
    if "\x00" in value:
        raise ApiError(422, "invalid_body", "'body' must not contain NUL characters")
    settings = appliance.settings.providers.get(provider or "")
    max_parts = settings.max_parts if settings is not None else MAX_PARTS_DEFAULT
    try:
        # No number yet (a campaign's template): as the provider sends to its own country.
        turkish = settings is not None and (settings.turkish_to(msisdn) if msisdn
                                            else settings.national_language == "turkish")
        check_sendable(value, max_parts, turkish)
    except Unsendable as exc:
        extra: dict[str, Any] = {"reason": exc.reason}
        text = f"'body' cannot be sent: {exc}"
        if exc.limit is not None:
            extra.update(limit=exc.limit, parts=exc.parts)
            if settings is not None:
                text += f" of provider {settings.name!r} ([providers.{settings.name}] max_parts)"
        raise ApiError(422, "unsendable_body", text, **extra) from None
    return value


def check_provider(appliance: Appliance, value: Any) -> str:
    """A configured provider's name, the default one for ``None``; 422 otherwise."""
    if value is None:
        name = appliance.settings.default_provider
        if not name:
            raise ApiError(422, "no_provider", "no provider is configured")
        return name
    if not isinstance(value, str) or value not in appliance.settings.providers:
        known = ", ".join(appliance.settings.providers) or "none"
        raise ApiError(422, "unknown_provider",
                       f"'provider' must be one of the configured providers ({known})")
    return value


def check_to(appliance: Appliance, value: Any, field: str = "to") -> str:
    """A recipient as E.164 (the default region applies); 422 naming ``field`` otherwise."""
    if not isinstance(value, str) or len(value) > MAX_MSISDN_CHARS:
        raise ApiError(422, "invalid_to", f"'{field}' must be a phone number string")
    found = normalise_msisdn(value, appliance.settings.imports.default_region)
    if isinstance(found, Invalid):
        raise ApiError(422, "invalid_to", f"'{field}' is not a number we can send to: "
                       f"{found.reason}", reason=found.reason)
    return found.msisdn


def check_priority(value: Any) -> int:
    """``"high"`` (the default for a single message) or ``"normal"``; 422 otherwise."""
    if value is None:
        return camp.PRIORITY_HIGH
    if not isinstance(value, str) or value not in camp.PRIORITIES:
        raise ApiError(422, "invalid_priority", "'priority' must be \"high\" or \"normal\"")
    return camp.PRIORITIES[value]


def check_template(body: str) -> None:
    """A campaign body must be a template we can render: 422 naming what is wrong."""
    try:
        parse_template(body)
    except TemplateError as exc:
        raise ApiError(422, "invalid_template", f"'body': {exc}",
                       placeholder=exc.placeholder) from None


def check_send_at(value: Any, now_ms: int) -> int | None:
    """``send_at`` as epoch ms: ISO 8601 with ``Z`` (or an offset); 422 otherwise."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > 40:
        raise ApiError(422, "invalid_send_at", "'send_at' must be a time in ISO 8601 UTC,"
                       " such as 2026-12-01T09:00:00Z")
    try:
        parsed = datetime.fromisoformat(value.strip().replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        raise ApiError(422, "invalid_send_at", f"'send_at' is not an ISO 8601 time: {value!r}"
                       ) from None
    if parsed.tzinfo is None:
        raise ApiError(422, "invalid_send_at", "'send_at' must say it is UTC (end it with Z)")
    return int(parsed.timestamp() * 1000)


def check_window(value: Any) -> SendWindow | None:
    if value is None:
        return None
    try:
        return SendWindow.parse(value)
    except BadWindow as exc:
        raise ApiError(422, "invalid_window", str(exc), field=exc.field) from None


def check_longest(appliance: Appliance, plan: camp.DryRun, provider: str) -> None:
    """The longest personalised text must be sendable through the provider (422)."""
    if not plan.personalised or not plan.longest_text:
        return
    try:
        check_body(appliance, plan.longest_text, provider)
    except ApiError as exc:
        raise ApiError(exc.status, exc.error, "after personalisation, the longest message"
                       f" cannot be sent: {exc.message}", **exc.extra) from None


def request_actor(request: Request) -> str:
    """Who acts, for the audit: the API key by the prefix it is listed under."""
    key = request.headers.get("authorization", "").partition(" ")[2].strip()
    return f"API key {key[:SHOWN_PREFIX]}"


def insert_unless_suppressed(conn: Connection, new: msgs.NewMessage, ref: str,
                             now_ms: int) -> msgs.Accepted:
    """Queue one message (a write unit), unless its number is on the account's
    suppression list: then :class:`~appliance.optout.suppressions.Suppressed` is raised
    and the unit rolls back, so nothing is queued. A repeat of an idempotent send gives
    back the message it made, as ``insert_message`` does."""
    accepted = msgs.insert_message(conn, new, ref, now_ms)
    if accepted.created:
        refuse_if_suppressed(conn, new.account_id, new.msisdn)
    return accepted


def suppressed_error(exc: Suppressed) -> ApiError:
    """The 409 a send to a suppressed number answers (OPS-4)."""
    entry = exc.entry
    why = f" ({entry.reason})" if entry.reason else ""
    return ApiError(409, "suppressed",
                    f"{entry.msisdn} is on the suppression list{why}; nothing was queued",
                    msisdn=entry.msisdn, reason=entry.reason, source=entry.source)


def message_json(m: msgs.Message, history: list[msgs.HistoryEntry] | None = None,
                 parts: list[msgs.Part] | None = None,
                 actions: list[msgs.Action] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ref": m.ref,
        "state": m.state,
        "final": m.state in FINAL_STATES,
        "to": m.msisdn,
        "provider": m.provider,
        "provider_msg_id": m.provider_msg_id,
        "encoding": m.encoding,
        "parts": m.parts,
        "ucs2_because": m.ucs2_because,
        "ucs2_parts": m.ucs2_parts,
        "campaign_id": m.campaign_id,
        "priority": camp.PRIORITY_NAMES.get(m.priority, "normal"),
        "attempts": m.attempts,
        "error": m.error,
        "created_at": iso(m.created_at),
        "submitted_at": iso(m.submitted_at),
        "finalised_at": iso(m.finalised_at),
        "updated_at": iso(m.updated_at),
        "state_reported_at": iso(m.state_at) if m.state_at else None,
        "next_attempt_at": iso(m.next_attempt_at) if m.state in ("QUEUED", "RETRY") else None,
    }
    if history is not None:
        out["history"] = [
            {"status": h.status, "state": h.state,
             "reported_at": iso(h.reported_at) if h.reported_at else None,
             "received_at": iso(h.received_at), "repeats": h.repeats,
             "outcome": h.outcome or "WAITING", "error_code": h.error_code, "part": h.part}
            for h in history
        ]
    if actions is not None:
        out["actions"] = [
            {"action": a.action, "from": a.from_state, "to": a.to_state, "by": a.actor,
             "at": iso(a.at)} for a in actions]
        if m.state == "UNCERTAIN":
            out["resolve"] = {"url": f"/api/messages/{m.ref}/resolve",
                              "actions": list(msgs.ACTIONS), "warning": msgs.RESEND_WARNING}
    if parts is not None:
        out["part_reports"] = [
            {"part": p.part, "provider_msg_id": p.provider_msg_id, "state": p.state,
             "reported_at": iso(p.state_at) if p.state_at else None, "error": p.error}
            for p in parts
        ]
    return out


async def send_message(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    data = await _json_object(request)
    key = _idempotency_key(request)
    msisdn = check_to(appliance, data.get("to"))
    provider = check_provider(appliance, data.get("provider"))
    new = msgs.NewMessage(
        account_id=account.id,
        msisdn=msisdn,
        body=check_body(appliance, data.get("body"), provider, msisdn),
        provider=provider,
        idempotency_key=key,
        priority=check_priority(data.get("priority")),
        turkish=appliance.settings.provider(provider).turkish_to(msisdn),
    )
    now = appliance.now_ms()
    ref = new_ref(now)
    try:
        accepted = await appliance.store.writer.run(
            lambda c: insert_unless_suppressed(c, new, ref, now))
    except msgs.IdempotencyConflict as exc:
        raise ApiError(422, "idempotency_key_reused", str(exc)) from None
    except Suppressed as exc:
        raise suppressed_error(exc) from None
    if accepted.created:
        appliance.scheduler.wake("sender")
    return JSONResponse({"ref": accepted.ref, "state": accepted.state,
                         "priority": camp.PRIORITY_NAMES[new.priority],
                         "encoding": accepted.encoding, "parts": accepted.parts,
                         "ucs2_because": accepted.ucs2_because,
                         "ucs2_parts": accepted.ucs2_parts,
                         "poll": f"/api/messages/{accepted.ref}"}, status_code=202)


async def show_message(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    ref = request.path_params["ref"].upper()
    if not looks_like_ref(ref):
        raise not_found("message")

    found = await appliance.store.readers.run(lambda c: read_message(c, ref, account.id))
    if found is None:
        raise not_found("message")
    return JSONResponse(message_json(*found))


def read_message(c: Connection, ref: str, account_id: int) -> tuple[
        msgs.Message, list[msgs.HistoryEntry], list[msgs.Part], list[msgs.Action]] | None:
    m = msgs.get_message(c, ref, account_id)
    if m is None:
        return None
    return (m, msgs.message_history(c, m), msgs.message_parts(c, m.id),
            msgs.message_actions(c, m.id))


def check_action(value: Any) -> str:
    if value not in msgs.ACTIONS:
        raise ApiError(422, "invalid_action",
                       "'action' must be \"resend\" or \"mark_failed\"")
    return str(value)


async def resolve_one(appliance: Appliance, ref: str, account_id: int, action: str,
                      actor: str) -> None:
    """Resolve one UNCERTAIN message (API and console); 404 or 409 as ApiError."""
    now = appliance.now_ms()

    def unit(c: Connection) -> str:
        m = msgs.get_message(c, ref, account_id)
        if m is None:
            raise LookupError(ref)
        return msgs.resolve_message(c, m.id, action, actor, now)

    try:
        state = await appliance.store.writer.run(unit)
    except LookupError:
        raise not_found("message") from None
    except msgs.NotUncertain as exc:
        raise ApiError(409, "not_uncertain", str(exc), state=exc.state) from None
    if state == "RETRY":
        appliance.scheduler.wake("sender")


async def resolve_message(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    ref = request.path_params["ref"].upper()
    if not looks_like_ref(ref):
        raise not_found("message")
    data = await _json_object(request)
    action = check_action(data.get("action"))
    await resolve_one(appliance, ref, account.id, action, request_actor(request))
    found = await appliance.store.readers.run(lambda c: read_message(c, ref, account.id))
    assert found is not None
    out = message_json(*found)
    if action == msgs.RESEND:
        out["warning"] = msgs.RESEND_WARNING
    return JSONResponse(out)


async def find_messages(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    raw = request.query_params.get("msisdn")
    if raw is None:
        raise ApiError(422, "missing_msisdn", "give the number to look up as ?msisdn=")
    msisdn = check_to(appliance, raw, "msisdn")
    found = await appliance.store.readers.run(
        lambda c: msgs.messages_for_msisdn(c, account.id, msisdn))
    return JSONResponse({"msisdn": msisdn, "messages": [message_json(m) for m in found]})


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


def campaign_json(p: camp.Progress, per_s: float = 0.0) -> dict[str, Any]:
    """A campaign as the API shows it; ``per_s``: its messages sent per second lately."""
    c = p.campaign
    seg = c.segmentation
    state = p.state
    window = c.window
    now = p.now_ms
    window_open = window.is_open(now) if window is not None else True
    sending = state == camp.RUNNING and p.unsent > 0 and window_open
    eta_s = round(p.unsent / per_s, 1) if sending and per_s > 0 else None
    return {
        "id": c.id,
        "campaignId": c.id,
        "state": state,
        "list": c.list_name,
        "provider": c.provider,
        "body": c.body,
        "personalised": c.template.personalised,
        "total": c.total,
        "parts": p.parts,  # the SMS parts of its messages, cancelled ones left out
        "parts_per_message": p.max_parts or seg.count,
        "encoding": p.encoding,
        "ucs2_parts": p.ucs2_parts,
        "ucs2_because": seg.ucs2_because,
        "cancelled": p.cancelled,
        "uncertain": p.uncertain,
        "needs_decision": p.uncertain > 0,
        "created": p.created,
        "unsent": p.unsent,
        "counts": dict(sorted(p.counts.items())),
        "suppressed": p.suppressed,
        "finalised": p.finalised,
        "coverage_pct": _pct(p.finalised, c.total),
        "delivered_pct": _pct(p.counts.get("DELIVERED", 0), c.total),
        "messages_per_s": round(per_s, 1) if sending else 0.0,
        "eta_s": eta_s,
        "eta_at": iso(now + int(eta_s * 1000)) if eta_s is not None else None,
        "send_at": iso(c.send_at),
        "window": window.as_json() if window is not None else None,
        "window_open": window_open,
        "window_opens_at": iso(window.next_open_ms(now))
        if window is not None and not window_open else None,
        "created_at": iso(c.created_at),
        "updated_at": iso(c.updated_at),
        "poll": f"/api/campaigns/{c.id}",
    }


def campaign_rate(appliance: Appliance, campaign_id: int) -> float:
    sender = appliance.sender
    return sender.campaign_per_s(campaign_id) if sender is not None else 0.0


async def create_campaign(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    data = await _json_object(request)
    key = _idempotency_key(request)
    list_name = data.get("list")
    if not isinstance(list_name, str) or not list_name.strip() or len(list_name) > MAX_LIST_NAME:
        raise ApiError(422, "invalid_list", "give the name of one of your lists as 'list'")
    dry = data.get("dry_run", False)
    if not isinstance(dry, bool):
        raise ApiError(422, "invalid_dry_run", "'dry_run' must be true or false")
    provider = check_provider(appliance, data.get("provider"))
    body = check_body(appliance, data.get("body"), provider)
    check_template(body)
    now = appliance.now_ms()
    send_at = check_send_at(data.get("send_at"), now)
    window = check_window(data.get("window"))
    plan = await plan_campaign(appliance, account.id, list_name.strip(), provider, body)
    if dry:
        return JSONResponse(dry_run_json(plan))
    check_longest(appliance, plan, provider)
    new = camp.NewCampaign(
        account_id=account.id,
        list_name=list_name.strip(),
        provider=provider,
        body=body,
        idempotency_key=key if key is not None else "auto:" + new_ref(now),
        send_at=send_at,
        window=window,
        planned_parts=plan.parts,
    )
    reserve = below_reserve(appliance.settings)
    if reserve is not None:
        raise storage_full(reserve)
    try:
        campaign, created = await appliance.store.writer.run(
            lambda c: camp.create_campaign(c, new, now, plan.last_contact_id))
    except camp.IdempotencyConflict as exc:
        raise ApiError(422, "idempotency_key_reused", str(exc)) from None
    except camp.NoSuchList as exc:
        raise ApiError(422, "unknown_list", str(exc)) from None
    if created:
        appliance.scheduler.wake("campaigns")
    return JSONResponse({"campaignId": campaign.id, "total": campaign.total,
                         "parts": plan.parts, "encoding": plan.encoding,
                         "state": camp.SCHEDULED if send_at is not None and send_at > now
                         else camp.RUNNING,
                         "send_at": iso(campaign.send_at),
                         "window": window.as_json() if window is not None else None,
                         "poll": f"/api/campaigns/{campaign.id}"}, status_code=202)


async def plan_campaign(appliance: Appliance, account_id: int, list_name: str, provider: str,
                        body: str) -> camp.DryRun:
    """The dry run: what the campaign would send, after personalisation (422 for an
    unknown list)."""
    prefixes = appliance.settings.provider(provider).turkish_prefixes
    try:
        return await appliance.store.readers.run(
            lambda c: camp.dry_run(c, account_id, list_name, provider, body,
                                   turkish_prefixes=prefixes))
    except camp.NoSuchList as exc:
        raise ApiError(422, "unknown_list", str(exc)) from None


def dry_run_json(d: camp.DryRun) -> dict[str, Any]:
    longest = d.longest
    return {
        "dry_run": True,
        "list": d.list_name,
        "provider": d.provider,
        "messages": d.messages,
        "parts": d.parts,
        "parts_per_message": longest.count,
        "encoding": d.encoding,
        "ucs2_parts": d.ucs2_parts,
        "ucs2_because": d.ucs2_because,
        "ucs2_messages": d.ucs2_messages,
        "suppressed": d.suppressed,
        "personalised": d.personalised,
        "longest": {"parts": longest.count, "encoding": longest.encoding,
                    "ucs2_parts": longest.ucs2_parts,
                    "ucs2_because": longest.ucs2_because, "characters": len(d.longest_text),
                    "text": d.longest_text},
    }


async def _owned_campaign(request: Request, account: Account) -> camp.Progress:
    appliance = _appliance(request)
    campaign_id = path_id(request.path_params["campaign_id"], "campaign")

    progress = await read_progress(appliance, campaign_id, account.id)
    if progress is None:
        raise not_found("campaign")
    return progress


async def read_progress(appliance: Appliance, campaign_id: int,
                        account_id: int) -> camp.Progress | None:
    now = appliance.now_ms()

    def read(c: Any) -> camp.Progress | None:
        found = camp.get_campaign(c, campaign_id, account_id)
        return None if found is None else camp.campaign_progress(c, found, now)

    return await appliance.store.readers.run(read)


async def show_campaign(request: Request) -> Response:
    account = await require_account(request)
    progress = await _owned_campaign(request, account)
    return JSONResponse(campaign_json(progress, campaign_rate(_appliance(request),
                                                              progress.campaign.id)))


async def campaigns(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    now = appliance.now_ms()
    found = await appliance.store.readers.run(
        lambda c: camp.list_campaigns(c, account.id, now_ms=now))
    return JSONResponse({"campaigns": [campaign_json(p, campaign_rate(appliance, p.campaign.id))
                                       for p in found]})


CONTROLS = ("pause", "resume", "cancel")


async def control_campaign(appliance: Appliance, campaign_id: int, account_id: int,
                           verb: str) -> tuple[camp.Campaign, int]:
    """Pause, resume or cancel (API and console). For a pause or a cancel the answer
    waits until none of the campaign's messages is still being sent: from then on
    nothing more of it is submitted. Returns the campaign and, for a cancel, how many
    messages it cancelled."""
    now = appliance.now_ms()

    def unit(c: Connection) -> tuple[camp.Campaign, int]:
        if verb == "pause":
            return camp.pause_campaign(c, campaign_id, account_id, now), 0
        if verb == "resume":
            return camp.resume_campaign(c, campaign_id, account_id, now), 0
        return camp.cancel_campaign(c, campaign_id, account_id, now)

    try:
        campaign, count = await appliance.store.writer.run(unit)
    except camp.NoSuchCampaign:
        raise not_found("campaign") from None
    except camp.NotAllowed as exc:
        raise ApiError(409, "invalid_state", f"cannot {verb} this campaign: {exc}",
                       state=exc.state) from None
    if verb == "resume":
        appliance.scheduler.wake("sender")
    elif appliance.sender is not None:
        await appliance.sender.settle_campaign(campaign.id)
    return campaign, count


def _control(verb: str) -> Any:
    async def handler(request: Request) -> Response:
        account = await require_account(request)
        appliance = _appliance(request)
        campaign_id = path_id(request.path_params["campaign_id"], "campaign")
        _, count = await control_campaign(appliance, campaign_id, account.id, verb)
        progress = await read_progress(appliance, campaign_id, account.id)
        assert progress is not None
        out = campaign_json(progress, campaign_rate(appliance, campaign_id))
        if verb == "cancel":
            out["cancelled_now"] = count
        return JSONResponse(out)

    handler.__name__ = f"{verb}_campaign"
    return handler


async def resolve_campaign(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    campaign_id = path_id(request.path_params["campaign_id"], "campaign")
    data = await _json_object(request)
    action = check_action(data.get("action"))
    count = await resolve_all(appliance, campaign_id, account.id, action,
                              request_actor(request))
    progress = await read_progress(appliance, campaign_id, account.id)
    assert progress is not None
    out = campaign_json(progress, campaign_rate(appliance, campaign_id))
    out["resolved"] = count
    if action == msgs.RESEND:
        out["warning"] = msgs.RESEND_WARNING
    return JSONResponse(out)


async def resolve_all(appliance: Appliance, campaign_id: int, account_id: int, action: str,
                      actor: str) -> int:
    """Resolve every UNCERTAIN message of a campaign (API and console)."""
    now = appliance.now_ms()

    def unit(c: Connection) -> int:
        if camp.get_campaign(c, campaign_id, account_id) is None:
            raise camp.NoSuchCampaign("no such campaign")
        return msgs.resolve_campaign(c, campaign_id, action, actor, now)

    try:
        count = await appliance.store.writer.run(unit)
    except camp.NoSuchCampaign:
        raise not_found("campaign") from None
    if count and action == msgs.RESEND:
        appliance.scheduler.wake("sender")
    return count


def routes() -> list[BaseRoute]:
    return [
        Route("/api/messages", send_message, methods=["POST"]),
        Route("/api/messages", find_messages, methods=["GET"]),
        Route("/api/messages/{ref}", show_message, methods=["GET"]),
        Route("/api/messages/{ref}/resolve", resolve_message, methods=["POST"]),
        Route("/api/campaigns", create_campaign, methods=["POST"]),
        Route("/api/campaigns", campaigns, methods=["GET"]),
        Route("/api/campaigns/{campaign_id}", show_campaign, methods=["GET"]),
        *(Route(f"/api/campaigns/{{campaign_id}}/{verb}", _control(verb), methods=["POST"])
          for verb in CONTROLS),
        Route("/api/campaigns/{campaign_id}/resolve", resolve_campaign, methods=["POST"]),
    ]
