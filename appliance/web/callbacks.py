"""``/callbacks/{provider}``: delivery reports, stored first, interpreted after (DLR-2).

The handler reads the body under ``[reports] max_callback_bytes``, lets the provider's
adapter prove the callback is the provider's (``401`` and nothing stored when it is
not), reads the reports in it, and hands the writer one unit that stores the callback
raw and then files and applies its reports (:func:`appliance.reports.apply.receive`).
It answers the adapter's ``2xx`` whether or not anything matched, and for a body it
cannot parse (kept raw, ``parsed = 0``). The one failure it reports is failing to
store: ``503`` with ``Retry-After``, so the provider sends it again.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.config import ConfigError
from appliance.logs import SampledLine
from appliance.providers import AuthError, CallbackRequest, ReportParseError
from appliance.reports.adapters import adapter_for
from appliance.reports.apply import receive
from appliance.reports.inbox import InboxReport, RawCallback, from_parsed
from appliance.service import Appliance
from appliance.web.bodies import read_bounded

log = logging.getLogger("appliance.callbacks")
# The line the field note counts: a report whose message we cannot match yet. Under a
# race there are thousands a minute, so each provider's are summed up every 10 s.
UNKNOWN_REPORT = SampledLine(log, "unknown report", interval_s=10.0, detail_key="ref")


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain")


async def callback(request: Request) -> Response:
    appliance: Appliance = request.app.state.appliance
    name = request.path_params["provider"]
    try:
        adapter = adapter_for(appliance, name)
    except ConfigError as exc:
        log.error("callback for provider %s cannot be checked: %s", name, exc)
        return _plain(503, "provider misconfigured")
    if adapter is None:
        return _plain(404, "no such provider")
    body = await read_bounded(request, appliance.settings.reports.max_callback_bytes)
    if body is None:
        return _plain(413, "callback body too large")
    query = request.url.query
    url = appliance.settings.callback_base + request.url.path + (f"?{query}" if query else "")
    headers = {k.lower(): v for k, v in request.headers.items()}
    req = CallbackRequest(method=request.method, url=url, query=query, headers=headers,
                          body=body)
    try:
        adapter.verify(req)
    except AuthError as exc:
        log.warning("callback for provider %s refused: %s", name, exc)
        return _plain(401, "not authenticated")
    parse_error: str | None = None
    reports: list[InboxReport] = []
    try:
        reports = [from_parsed(name, p) for p in adapter.parse_reports(req)]
    except ReportParseError as exc:
        parse_error = str(exc) or "unreadable"
    raw = RawCallback(provider=name, method=request.method,
                      content_type=headers.get("content-type", ""), query=query, body=body)
    now = appliance.now_ms()
    try:
        receipt = await appliance.store.writer.run(
            lambda c: receive(c, raw, reports, parse_error, now))
    except Exception:
        log.exception("callback for provider %s could not be stored", name)
        return JSONResponse({"error": "not_stored", "message": "try again"}, status_code=503,
                            headers={"Retry-After": "5"})
    for ref in receipt.waiting:
        # Kept in the inbox; the reconciler applies it when the message appears.
        UNKNOWN_REPORT.note(name, ref, provider=name)
    if receipt.error is not None:
        log.warning("callback %s from %s kept raw, not interpreted: %s", receipt.raw_id, name,
                    receipt.error)
    status, content, media_type = adapter.callback_response()
    return Response(content, status_code=status, media_type=media_type)


def routes() -> list[BaseRoute]:
    return [Route("/callbacks/{provider}", callback, methods=["GET", "POST"])]
