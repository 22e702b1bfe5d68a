"""``/callbacks/{provider}``: delivery reports, stored first, interpreted after (DLR-2).

The handler reads the body under ``[reports] max_callback_bytes``, lets the provider's
adapter prove the callback is the provider's (``401`` and nothing stored when it is
not), reads the reports in it, and hands the writer one unit that stores the callback
raw and then files and applies its reports (:func:`appliance.reports.apply.receive`).
It answers the adapter's ``2xx`` whether or not anything matched, and for a body it
cannot parse (kept raw, ``parsed = 0``; so is one whose reports hold text that is
not valid Unicode). The one failure it reports is failing to store: ``503`` with
``Retry-After``, so the provider sends it again. Refusals are JSON
``{"error", "message"}``. Callbacks are never refused for the ``[storage]``
reserve: it is kept for them.

The checks between the body and the write unit (:func:`reader_for`, :func:`check`)
and what is done with the writer's receipt (:func:`note_receipt`) are shared with the
report intake process (:mod:`appliance.web.intake_app`), which answers the same way
on its own port.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.config import ConfigError
from appliance.logs import SampledLine, note_not_stored
from appliance.ops.metrics import metrics_for
from appliance.ops.storage import is_storage_error
from appliance.providers import AuthError, CallbackRequest, ReportParseError
from appliance.providers.base import ReportReader
from appliance.providers.registry import Providers
from appliance.reports.apply import Receipt, receive
from appliance.reports.inbox import InboxReport, RawCallback, from_parsed, storable
from appliance.service import Appliance
from appliance.web.bodies import read_bounded
from appliance.web.errors import ApiError

log = logging.getLogger("appliance.callbacks")
# The line the field note counts: a report whose message we cannot match yet. Under a
# race there are thousands a minute, so each provider's are summed up every 10 s.
UNKNOWN_REPORT = SampledLine(log, "unknown report", interval_s=10.0, detail_key="ref")
TOO_LARGE = ApiError(413, "payload_too_large", "callback body too large")
TRY_AGAIN = ApiError(503, "not_stored", "try again", retry_after=5)


@dataclass(frozen=True)
class Checked:
    """A callback the provider's adapter verified and read: what the write unit takes,
    and what to answer once it is committed."""

    provider: str
    raw: RawCallback
    reports: list[InboxReport]
    parse_error: str | None
    answer: tuple[int, bytes, str]  # the adapter's (status, body, content type)
    signed_age_s: float | None


def _path_and_query(request: Request) -> tuple[str, str]:
    """``request.url.path`` and ``.query`` (what the provider signed), read from the scope
    without building a URL object when nothing in them needs it."""
    scope = request.scope
    path = str(scope["path"])
    query = bytes(scope.get("query_string", b"")).decode()
    plain = "?" not in path and "#" not in path and "\\" not in path
    if plain and "#" not in query and query.isprintable() and path.isprintable():
        return path, query
    return request.url.path, request.url.query


def reader_for(providers: Providers, name: str) -> ReportReader:
    """Provider ``name``'s report reader; the refusal to answer when there is none."""
    try:
        provider = providers.get(name)
    except ConfigError as exc:
        log.error("callback for provider %s cannot be checked: %s", name, exc)
        raise ApiError(503, "provider_misconfigured",
                       "this provider's settings cannot check callbacks",
                       retry_after=60) from None
    if provider is None:
        raise ApiError(404, "not_found", "no such provider")
    if provider.reports is None:
        raise ApiError(404, "not_found",
                       "this provider reports over its own session, not by callback")
    return provider.reports


def check(reader: ReportReader, name: str, method: str, url: str, query: str,
          headers: Mapping[str, str], body: bytes) -> Checked:
    """Verify the callback (``401`` refused, nothing stored) and read its reports; a
    body that cannot be read is still kept, raw, with the reason."""
    req = CallbackRequest(method=method, url=url, query=query, headers=dict(headers),
                          body=body)
    try:
        reader.verify(req)
    except AuthError as exc:
        log.warning("callback for provider %s refused: %s", name, exc)
        raise ApiError(401, "unauthorized", "not authenticated") from None
    parse_error: str | None = None
    reports: list[InboxReport] = []
    try:
        reports = [from_parsed(name, p) for p in reader.parse_reports(req)]
    except ReportParseError as exc:
        parse_error = str(exc) or "unreadable"
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        # A body the adapter did not expect at all: kept raw like any unparsable one.
        parse_error = f"unreadable ({type(exc).__name__})"
    if parse_error is None and not storable(reports):
        parse_error, reports = "a report field is not valid Unicode text", []
    raw = RawCallback(provider=name, method=method,
                      content_type=headers.get("content-type", ""), query=query, body=body)
    return Checked(name, raw, reports, parse_error, reader.callback_response(),
                   reader.signed_age_s(req))


def note_receipt(name: str, receipt: Receipt) -> None:
    """The log lines of a stored callback: its reports left waiting, a body kept raw."""
    for ref in receipt.waiting:
        # Kept in the inbox; the reconciler applies it when the message appears.
        UNKNOWN_REPORT.note(name, ref, provider=name)
    if receipt.error is not None:
        log.warning("callback %s from %s kept raw, not interpreted: %s", receipt.raw_id, name,
                    receipt.error)


def refusal(exc: ApiError) -> Response:
    """A refusal as a provider is answered: JSON ``{"error", "message"}``, with
    ``Retry-After`` where sending again later helps."""
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else None
    return JSONResponse({"error": exc.error, "message": exc.message}, status_code=exc.status,
                        headers=headers)


async def callback(request: Request) -> Response:
    try:
        return await _callback(request)
    except ApiError as exc:
        return refusal(exc)


async def _callback(request: Request) -> Response:
    appliance: Appliance = request.app.state.appliance
    name = request.path_params["provider"]
    reader = reader_for(appliance.providers, name)
    body = await read_bounded(request, appliance.settings.reports.max_callback_bytes)
    if body is None:
        raise TOO_LARGE
    path, query = _path_and_query(request)
    url = appliance.settings.callback_base + path + (f"?{query}" if query else "")
    # ASGI header names are lower case already; latin-1 as Starlette decodes them.
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.scope["headers"]}
    checked = check(reader, name, request.method, url, query, headers, body)
    if checked.signed_age_s is not None:
        metrics_for(appliance).observe_signed_report_age(name, checked.signed_age_s)
    now = appliance.now_ms()
    try:
        receipt = await appliance.store.writer.run(
            lambda c: receive(c, checked.raw, checked.reports, checked.parse_error, now))
    except Exception as exc:
        if not is_storage_error(exc):
            log.exception("callback for provider %s could not be stored", name)
        else:  # a full disk refuses every callback: summed up, not one line each
            note_not_stored("/callbacks/{provider}", exc)
        raise TRY_AGAIN from None
    note_receipt(name, receipt)
    status, content, media_type = checked.answer
    return Response(content, status_code=status, media_type=media_type)


def routes() -> list[BaseRoute]:
    return [Route("/callbacks/{provider}", callback, methods=["GET", "POST"])]
