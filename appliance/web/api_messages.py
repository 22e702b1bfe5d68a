"""``/api/messages`` and ``/api/campaigns``: accept sends, show their progress.

Accepting only validates, writes the row (``QUEUED``) and wakes the sender; the
answer is ``202`` with our ref, which the provider will echo back in its reports.
A send to a number on the account's suppression list is refused ``409`` (OPS-4), in the
same write unit as the insert, so nothing is queued.
A campaign is accepted as one row and expanded into messages by the ``campaigns``
loop, so the answer does not wait for the list.
"""

from __future__ import annotations

import json
from typing import Any

import apsw
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.accounts import Account
from appliance.clock import iso
from appliance.imports.accept import MAX_LIST_NAME
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.optout.suppressions import Suppressed, refuse_if_suppressed
from appliance.reports.states import FINAL_STATES
from appliance.sending import campaigns as camp
from appliance.sending import messages as msgs
from appliance.sending.refs import looks_like_ref, new_ref
from appliance.service import Appliance
from appliance.web.api_imports import read_limited
from appliance.web.auth import require_account
from appliance.web.errors import ApiError, not_found

MAX_IDEMPOTENCY_KEY = 200
MAX_REQUEST_BYTES = 64 * 1024
MAX_MSISDN_CHARS = 64


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
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    return data


def check_body(appliance: Appliance, value: Any) -> str:
    """A message body as sent (API or console form); :class:`ApiError` 422 otherwise."""
    limit = appliance.settings.sending.max_body_chars
    if not isinstance(value, str) or not value.strip():
        raise ApiError(422, "invalid_body", "'body' must be a non-empty string")
    if len(value) > limit:
        raise ApiError(422, "body_too_long",
                       f"'body' has {len(value)} characters; the limit is {limit}",
                       limit=limit, submitted=len(value))
    if "\x00" in value:
        raise ApiError(422, "invalid_body", "'body' must not contain NUL characters")
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


def message_json(m: msgs.Message, history: list[msgs.HistoryEntry] | None = None
                 ) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ref": m.ref,
        "state": m.state,
        "final": m.state in FINAL_STATES,
        "to": m.msisdn,
        "provider": m.provider,
        "provider_msg_id": m.provider_msg_id,
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
             "outcome": h.outcome or "WAITING", "error_code": h.error_code}
            for h in history
        ]
    return out


async def send_message(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    data = await _json_object(request)
    key = _idempotency_key(request)
    new = msgs.NewMessage(
        account_id=account.id,
        msisdn=check_to(appliance, data.get("to")),
        body=check_body(appliance, data.get("body")),
        provider=check_provider(appliance, data.get("provider")),
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
                         "poll": f"/api/messages/{accepted.ref}"}, status_code=202)


async def show_message(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    ref = request.path_params["ref"].upper()
    if not looks_like_ref(ref):
        raise not_found("message")

    def read(c: Any) -> tuple[msgs.Message, list[msgs.HistoryEntry]] | None:
        m = msgs.get_message(c, ref, account.id)
        return None if m is None else (m, msgs.message_history(c, m))

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
    return {
        "id": c.id,
        "campaignId": c.id,
        "state": p.state,
        "list": c.list_name,
        "provider": c.provider,
        "body": c.body,
        "total": c.total,
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
    now = appliance.now_ms()
    new = camp.NewCampaign(
        account_id=account.id,
        list_name=list_name.strip(),
        provider=check_provider(appliance, data.get("provider")),
        body=check_body(appliance, data.get("body")),
        idempotency_key=key if key is not None else "auto:" + new_ref(now),
    )
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
                         "poll": f"/api/campaigns/{campaign.id}"}, status_code=202)


async def _owned_campaign(request: Request, account: Account) -> camp.Progress:
    appliance = _appliance(request)
    raw = request.path_params["campaign_id"]
    if not raw.isdigit() or len(raw) > 18:
        raise not_found("campaign")
    campaign_id = int(raw)

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
