"""``/inbound/{provider}``: inbound (MO) messages, stored first, interpreted after (OPS-4).

The same path as a delivery report's (``appliance.web.callbacks``): the body is read under
``[reports] max_callback_bytes``; the provider's inbound reader proves the request with
the provider's own signature or shared secret (``401`` and nothing stored when it
cannot); the messages in it are read; one write unit stores the request raw and then
files its messages, adding the sender of a STOP to the suppression lists
(:func:`appliance.inbound.store.receive_request`). The answer is the provider's own
``2xx`` (Twilio: an empty TwiML ``<Response>``), also for a body that cannot be read
(kept raw, ``parsed = 0``); the one failure reported is failing to store: ``503`` with
``Retry-After``, so the provider sends it again.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.config import ConfigError
from appliance.inbound.store import InboundRules, receive_request
from appliance.providers import AuthError, CallbackRequest, InboundMessage, InboundParseError
from appliance.reports.inbox import RawCallback
from appliance.service import Appliance
from appliance.web.bodies import read_bounded

log = logging.getLogger("appliance.inbound")


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain")


async def inbound(request: Request) -> Response:
    appliance: Appliance = request.app.state.appliance
    name = request.path_params["provider"]
    try:
        provider = appliance.providers.get(name)
    except ConfigError as exc:
        log.error("inbound request for provider %s cannot be checked: %s", name, exc)
        return _plain(503, "provider misconfigured")
    if provider is None:
        return _plain(404, "no such provider")
    reader = provider.inbound
    if reader is None:
        return _plain(404, "this provider has no inbound webhook")
    body = await read_bounded(request, appliance.settings.reports.max_callback_bytes)
    if body is None:
        return _plain(413, "inbound body too large")
    query = request.url.query
    url = appliance.settings.callback_base + request.url.path + (f"?{query}" if query else "")
    headers = {k.lower(): v for k, v in request.headers.items()}
    req = CallbackRequest(method=request.method, url=url, query=query, headers=headers,
                          body=body)
    try:
        reader.verify(req)
    except AuthError as exc:
        log.warning("inbound request for provider %s refused: %s", name, exc)
        return _plain(401, "not authenticated")
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
    except Exception:
        log.exception("inbound request for provider %s could not be stored", name)
        return JSONResponse({"error": "not_stored", "message": "try again"}, status_code=503,
                            headers={"Retry-After": "5"})
    if receipt.error is not None:
        log.warning("inbound request %s from %s kept raw, not read: %s", receipt.raw_id, name,
                    receipt.error)
    for result in receipt.results:
        if result.keyword is not None and not result.duplicate:
            log.info("opt-out received", extra={"provider": name, "inbound_id": result.inbound_id,
                                                "keyword": result.keyword,
                                                "accounts": len(result.suppressed_for)})
    status, content, media_type = reader.inbound_response()
    return Response(content, status_code=status, media_type=media_type)


def routes() -> list[BaseRoute]:
    return [Route("/inbound/{provider}", inbound, methods=["GET", "POST"])]
