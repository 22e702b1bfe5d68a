"""``/api/messages`` and ``/api/campaigns``: accept sends, show their progress.

Accepting only validates, writes the row (``QUEUED``) and wakes the sender; the
answer is ``202`` with our ref, which the provider will echo back in its reports.
A send to a number on the account's suppression list is refused ``409`` (OPS-4), in the
same write unit as the insert, so nothing is queued.
A campaign is accepted as one row and expanded into messages by the ``campaigns``
loop, so the answer does not wait for the list.
"""

from __future__ import annotations

from typing import Any

import apsw
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.accounts import Account
from appliance.clock import iso
from appliance.config import ProviderSettings
from appliance.imports.accept import MAX_LIST_NAME
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.ops.storage import below_reserve
from appliance.optout.suppressions import Suppressed, refuse_if_suppressed
from appliance.reports.states import FINAL_STATES
from appliance.sending import campaigns as camp
from appliance.sending import messages as msgs
from appliance.sending.refs import looks_like_ref, new_ref
from appliance.sending.segments import Unsendable, check_sendable
from appliance.service import Appliance
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


def check_body(appliance: Appliance, value: Any, provider: str | None = None) -> str:
    """A message body as sent (API or console form); :class:`ApiError` 422 otherwise.

    The body must also be sendable through ``provider`` (a configured provider's name;
    the default limits for ``None``): encodable as SMS (no lone surrogate) and no more
    parts than the provider's ``max_parts``. That refusal is ``422 unsendable_body``
    with the ``reason`` (``lone_surrogate`` or ``too_many_parts``) and, for too many
    parts, the ``limit`` and the ``parts`` the body would need.
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
        check_sendable(value, max_parts)
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


def insert_unless_suppressed(conn: apsw.Connection, new: msgs.NewMessage, ref: str,
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
                 parts: list[msgs.Part] | None = None) -> dict[str, Any]:
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
        "campaign_id": m.campaign_id,
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
        body=check_body(appliance, data.get("body"), provider),
        provider=provider,
        idempotency_key=key,
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
                         "encoding": accepted.encoding, "parts": accepted.parts,
                         "ucs2_because": accepted.ucs2_because,
                         "poll": f"/api/messages/{accepted.ref}"}, status_code=202)


async def show_message(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    ref = request.path_params["ref"].upper()
    if not looks_like_ref(ref):
        raise not_found("message")

    def read(c: Any) -> tuple[msgs.Message, list[msgs.HistoryEntry], list[msgs.Part]] | None:
        m = msgs.get_message(c, ref, account.id)
        if m is None:
            return None
        return m, msgs.message_history(c, m), msgs.message_parts(c, m.id)

    found = await appliance.store.readers.run(read)
    if found is None:
        raise not_found("message")
    return JSONResponse(message_json(*found))


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


def campaign_json(p: camp.Progress) -> dict[str, Any]:
    c = p.campaign
    seg = c.segmentation
    return {
        "id": c.id,
        "campaignId": c.id,
        "state": p.state,
        "list": c.list_name,
        "provider": c.provider,
        "body": c.body,
        "total": c.total,
        "parts": (c.total - p.suppressed) * seg.count,  # suppressed ones are never sent
        "parts_per_message": seg.count,
        "encoding": seg.encoding,
        "ucs2_because": seg.ucs2_because,
        "cancelled": p.counts.get("CANCELLED", 0),
        "uncertain": p.counts.get("UNCERTAIN", 0),
        "created": p.created,
        "counts": dict(sorted(p.counts.items())),
        "suppressed": p.suppressed,
        "finalised": p.finalised,
        "coverage_pct": _pct(p.finalised, c.total),
        "delivered_pct": _pct(p.counts.get("DELIVERED", 0), c.total),
        "created_at": iso(c.created_at),
        "updated_at": iso(c.updated_at),
        "poll": f"/api/campaigns/{c.id}",
    }


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
    if dry:
        return await _dry_run(appliance, account.id, list_name.strip(), provider, body)
    now = appliance.now_ms()
    new = camp.NewCampaign(
        account_id=account.id,
        list_name=list_name.strip(),
        provider=provider,
        body=body,
        idempotency_key=key if key is not None else "auto:" + new_ref(now),
    )
    reserve = below_reserve(appliance.settings)
    if reserve is not None:
        raise storage_full(reserve)
    try:
        campaign, created = await appliance.store.writer.run(
            lambda c: camp.create_campaign(c, new, now))
    except camp.IdempotencyConflict as exc:
        raise ApiError(422, "idempotency_key_reused", str(exc)) from None
    except camp.NoSuchList as exc:
        raise ApiError(422, "unknown_list", str(exc)) from None
    if created:
        appliance.scheduler.wake("campaigns")
    return JSONResponse({"campaignId": campaign.id, "total": campaign.total,
                         "parts": campaign.parts, "encoding": campaign.segmentation.encoding,
                         "poll": f"/api/campaigns/{campaign.id}"}, status_code=202)


def dry_run_json(d: camp.DryRun) -> dict[str, Any]:
    return {
        "dry_run": True,
        "list": d.list_name,
        "provider": d.provider,
        "messages": d.messages,
        "parts": d.parts,
        "parts_per_message": d.segmentation.count,
        "encoding": d.segmentation.encoding,
        "ucs2_because": d.segmentation.ucs2_because,
        "suppressed": d.suppressed,
    }


async def _dry_run(appliance: Appliance, account_id: int, list_name: str, provider: str,
                   body: str) -> Response:
    """What the campaign would send, read from a snapshot; nothing is written."""
    try:
        found = await appliance.store.readers.run(
            lambda c: camp.dry_run(c, account_id, list_name, provider, body))
    except camp.NoSuchList as exc:
        raise ApiError(422, "unknown_list", str(exc)) from None
    return JSONResponse(dry_run_json(found))


async def _owned_campaign(request: Request, account: Account) -> camp.Progress:
    appliance = _appliance(request)
    campaign_id = path_id(request.path_params["campaign_id"], "campaign")

    def read(c: Any) -> camp.Progress | None:
        found = camp.get_campaign(c, campaign_id, account.id)
        return None if found is None else camp.campaign_progress(c, found)

    progress = await appliance.store.readers.run(read)
    if progress is None:
        raise not_found("campaign")
    return progress


async def show_campaign(request: Request) -> Response:
    account = await require_account(request)
    return JSONResponse(campaign_json(await _owned_campaign(request, account)))


async def campaigns(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    found = await appliance.store.readers.run(lambda c: camp.list_campaigns(c, account.id))
    return JSONResponse({"campaigns": [campaign_json(p) for p in found]})


def routes() -> list[BaseRoute]:
    return [
        Route("/api/messages", send_message, methods=["POST"]),
        Route("/api/messages", find_messages, methods=["GET"]),
        Route("/api/messages/{ref}", show_message, methods=["GET"]),
        Route("/api/campaigns", create_campaign, methods=["POST"]),
        Route("/api/campaigns", campaigns, methods=["GET"]),
        Route("/api/campaigns/{campaign_id}", show_campaign, methods=["GET"]),
    ]
