"""``/api/messages``: accept a send, show a message, find a number's, resolve one.

Accepting only validates, writes the row (``QUEUED``) and wakes the sender; the
answer is ``202`` with our ref, which the provider will echo back in its reports.
A send to a number on the account's suppression list is refused ``409`` (OPS-4), in the
same write unit as the insert, so nothing is queued. The checks and the use cases are
the domain's (:mod:`appliance.sending.checks`,
:mod:`appliance.sending.message_requests`), shared with the console; their refusals
become the JSON errors of ``docs/api.md``. ``POST /api/messages/{ref}/pull`` makes the
message's next status request due now (ROUTE-2, :mod:`appliance.reports.puller`).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.provider_kinds import validity_range_s
from appliance.reports.pull_schedule import PULLABLE, pulls_of, queue_now
from appliance.sending import resolution
from appliance.sending.accept import NewMessage
from appliance.sending.checks import (
    check_action,
    check_body,
    check_priority,
    check_to,
)
from appliance.sending.commercial import COMMERCIAL, check_content, check_type
from appliance.sending.duplicates import dup_key
from appliance.sending.message_requests import queue_message, resolve_one
from appliance.sending.messages import get_message, messages_for_msisdn, read_message
from appliance.sending.refs import looks_like_ref
from appliance.sending.routes import route_of
from appliance.sending.validity import check_validity
from appliance.web.auth import require_account
from appliance.web.errors import ApiError, not_found
from appliance.web.parts import parts_of
from appliance.web.request_reading import idempotency_key, json_object, request_actor
from appliance.web.sending_json import accepted_json, message_json

MAX_REQUEST_BYTES = 64 * 1024



def _ref(request: Request) -> str:
    ref = str(request.path_params["ref"]).upper()
    if not looks_like_ref(ref):
        raise not_found("message")
    return ref


async def send_message(request: Request) -> Response:
    account = await require_account(request)
    parts_of(request).key_rates.take(account.quota)
    appliance = parts_of(request).runtime
    settings = appliance.settings
    data = await json_object(request, MAX_REQUEST_BYTES)
    key = idempotency_key(request)
    msisdn = check_to(settings, data.get("to"))
    message_type = check_type(settings, data.get("type"))
    choice = route_of(settings, parts_of(request).sender.health.lowered,
                      data.get("provider"), msisdn, message_type)
    provider = choice.provider
    validity_s = check_validity(data.get("validity_s"), settings.sending.validity_s, provider,
                                validity_range_s(settings, provider))
    new = NewMessage(
        account_id=account.id,
        msisdn=msisdn,
        body=check_body(settings, data.get("body"), provider, msisdn),
        provider=provider,
        idempotency_key=key,
        priority=check_priority(data.get("priority")),
        counting=settings.provider(provider).counting_to(msisdn),
        message_type=message_type,
        consent_required=message_type == COMMERCIAL and settings.compliance.turkey,
        dup_key=dup_key(account.id, msisdn, settings.provider(provider).sender,
                        appliance.now_ms(), data["body"])
        if settings.compliance.turkey else None,
        validity_s=validity_s,
        route=choice.route,
    )
    check_content(settings, message_type, new.body)
    accepted = await queue_message(appliance, new, wake_sender=parts_of(request).sender.wake,
                                   quota=account.quota)
    return JSONResponse(accepted_json(accepted, new.priority), status_code=202)


async def show_message(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    ref = _ref(request)
    found = await appliance.store.readers.run(lambda c: read_message(c, ref, account.id))
    if found is None:
        raise not_found("message")
    pulls = await appliance.store.readers.run(lambda c: pulls_of(c, found[0].id))
    return JSONResponse({**message_json(*found), "pulls": pulls})


async def pull_message(request: Request) -> Response:
    """Ask the provider about the message now: ``202`` once its next ask is due, ``409
    not_pullable`` when its provider is not asked (no status API, ``pull = false``) or
    the message is not waiting for a report (not yet submitted, or final)."""
    account = await require_account(request)
    parts = parts_of(request)
    appliance = parts.runtime
    ref = _ref(request)
    m = await appliance.store.readers.run(lambda c: get_message(c, ref, account.id))
    if m is None:
        raise not_found("message")
    if not parts.puller.asks(m.provider):
        raise ApiError(409, "not_pullable", f"provider {m.provider!r} is not asked about"
                       " messages (its kind has no status API, or pull = false; an smpp"
                       " provider is asked only with pull = true)")
    if m.state not in PULLABLE:
        raise ApiError(409, "not_pullable", f"the message is {m.state}: only a submitted"
                       " message without a final state is asked about")
    now = appliance.now_ms()
    await appliance.store.writer.run(lambda c: queue_now(c, m.id, m.provider, now))
    if parts.puller.wake is not None:
        parts.puller.wake()
    return JSONResponse({"ref": m.ref, "pull": "queued"}, status_code=202)


async def resolve_message(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    ref = _ref(request)
    data = await json_object(request, MAX_REQUEST_BYTES)
    action = check_action(data.get("action"))
    await resolve_one(appliance, ref, account.id, action, request_actor(request),
                      wake_sender=parts_of(request).sender.wake)
    found = await appliance.store.readers.run(lambda c: read_message(c, ref, account.id))
    assert found is not None
    out = message_json(*found)
    if action == resolution.RESEND:
        out["warning"] = resolution.RESEND_WARNING
    return JSONResponse(out)


async def find_messages(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    raw = request.query_params.get("msisdn")
    if raw is None:
        raise ApiError(422, "missing_msisdn", "give the number to look up as ?msisdn=")
    msisdn = check_to(appliance.settings, raw, "msisdn")
    found = await appliance.store.readers.run(
        lambda c: messages_for_msisdn(c, account.id, msisdn))
    return JSONResponse({"msisdn": msisdn, "messages": [message_json(m) for m in found]})


def routes() -> list[BaseRoute]:
    return [
        Route("/api/messages", send_message, methods=["POST"]),
        Route("/api/messages", find_messages, methods=["GET"]),
        Route("/api/messages/{ref}", show_message, methods=["GET"]),
        Route("/api/messages/{ref}/resolve", resolve_message, methods=["POST"]),
        Route("/api/messages/{ref}/pull", pull_message, methods=["POST"]),
    ]
