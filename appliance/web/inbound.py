"""``/inbound/{provider}``: inbound (MO) messages, stored first, interpreted after (OPS-4).

The same path as a delivery report's (``appliance.web.callbacks``): the body is read under
``[reports] max_callback_bytes``; the provider's inbound reader proves the request with
the provider's own signature or shared secret (``401`` and nothing stored when it
cannot); the messages in it are read; one write unit stores the request raw and then
files its messages, adding the sender of a STOP to the suppression lists
(:func:`appliance.inbound.store.receive_request`). The answer is the provider's own
``2xx`` (Twilio: an empty TwiML ``<Response>``), also for a body that cannot be read
(kept raw, ``parsed = 0``); the one failure reported is failing to store: ``503`` with
``Retry-After``, so the provider sends it again. Every refusal is JSON
``{"error", "message"}``, as a callback's and the API's are.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from appliance.config import ConfigError
from appliance.disk import is_storage_error
from appliance.inbound.store import InboundRules, receive_request
from appliance.logs import note_not_stored
from appliance.providers import AuthError, CallbackRequest, InboundMessage, InboundParseError
from appliance.reports.inbox import RawCallback
from appliance.web.bodies import read_bounded
from appliance.web.callback_check import TRY_AGAIN, note_inbound, refusal
from appliance.web.errors import ApiError
from appliance.web.parts import parts_of

log = logging.getLogger("appliance.inbound")
ROUTE = "/inbound/{provider}"


async def inbound(request: Request) -> Response:
    try:
        return await _inbound(request)
    except ApiError as exc:
        return refusal(exc)


async def _inbound(request: Request) -> Response:
    appliance = parts_of(request).runtime
    name = request.path_params["provider"]
    try:
        provider = parts_of(request).providers.get(name)
    except ConfigError as exc:
        log.error("inbound request for provider %s cannot be checked: %s", name, exc)
        raise ApiError(503, "provider_misconfigured",
                       "this provider's settings cannot check inbound requests",
                       retry_after=60) from None
    if provider is None:
        raise ApiError(404, "not_found", "no such provider")
    reader = provider.inbound
    if reader is None:
        raise ApiError(404, "not_found", "this provider has no inbound webhook")
    body = await read_bounded(request, appliance.settings.reports.max_callback_bytes)
    if body is None:
        raise ApiError(413, "payload_too_large", "inbound body too large")
    query = request.url.query
    url = appliance.settings.callback_base + request.url.path + (f"?{query}" if query else "")
    headers = {k.lower(): v for k, v in request.headers.items()}
    req = CallbackRequest(method=request.method, url=url, query=query, headers=headers,
                          body=body)
    try:
        reader.verify(req)
    except AuthError as exc:
        log.warning("inbound request for provider %s refused: %s", name, exc)
        raise ApiError(401, "unauthorized", "not authenticated") from None
    parse_error: str | None = None
    messages: list[InboundMessage] = []
    try:
        messages = reader.parse_inbound(req)
    except InboundParseError as exc:
        parse_error = str(exc) or "unreadable"
    raw = RawCallback(provider=name, method=request.method,
                      content_type=headers.get("content-type", ""), query=query, body=body)
    rules = InboundRules.from_settings(appliance.settings)
    now = appliance.now_ms()
    try:
        receipt = await appliance.store.writer.run(
            lambda c: receive_request(c, rules, raw, messages, parse_error, now))
    except Exception as exc:
        if not is_storage_error(exc):
            log.exception("inbound request for provider %s could not be stored", name)
        else:  # a full disk refuses every request: summed up, not one line each
            note_not_stored(ROUTE, exc)
        raise TRY_AGAIN from None
    note_inbound(name, receipt)
    status, content, media_type = reader.inbound_response()
    return Response(content, status_code=status, media_type=media_type)


def routes() -> list[BaseRoute]:
    return [Route("/inbound/{provider}", inbound, methods=["GET", "POST"])]
