"""``/callbacks/{provider}``: delivery reports, stored first, interpreted after (DLR-2).

The handler reads the body under ``[reports] max_callback_bytes``, lets the provider's
adapter prove the callback is the provider's (``401`` and nothing stored when it is
not), reads the reports in it, and hands the writer one unit that stores the callback
raw and then files and applies its reports (:func:`appliance.reports.apply.receive`);
for a kind that pushes inbound messages to the same URL (its inbound reader is
``at_report_url``: Verimor), the same unit files those as ``/inbound`` does
(:func:`appliance.web.callback_check.receive_push`).
It answers the adapter's ``2xx`` whether or not anything matched, and for a body it
cannot parse (kept raw, ``parsed = 0``; so is one whose reports hold text that is
not valid Unicode). The one failure it reports is failing to store: ``503`` with
``Retry-After``, so the provider sends it again. Refusals are JSON
``{"error", "message"}``. Callbacks are never refused for the ``[storage]``
reserve: it is kept for them.

The checks between the body and the write unit and what is done with the writer's
receipt are shared with the report intake process
(:mod:`appliance.web.callback_check`).
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from appliance.disk import is_storage_error
from appliance.inbound.store import InboundRules
from appliance.logs import note_not_stored
from appliance.web.bodies import read_bounded
from appliance.web.callback_check import (
    TOO_LARGE,
    TRY_AGAIN,
    check,
    inbound_reader_for,
    note_inbound,
    note_receipt,
    reader_for,
    receive_push,
    refusal,
)
from appliance.web.errors import ApiError
from appliance.web.parts import parts_of

log = logging.getLogger("appliance.callbacks")


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


async def callback(request: Request) -> Response:
    try:
        return await _callback(request)
    except ApiError as exc:
        return refusal(exc)


async def _callback(request: Request) -> Response:
    parts = parts_of(request)
    appliance = parts.runtime
    name = request.path_params["provider"]
    reader = reader_for(parts.providers, name)
    body = await read_bounded(request, appliance.settings.reports.max_callback_bytes)
    if body is None:
        raise TOO_LARGE
    path, query = _path_and_query(request)
    url = appliance.settings.callback_base + path + (f"?{query}" if query else "")
    # ASGI header names are lower case already; latin-1 as Starlette decodes them.
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in request.scope["headers"]}
    checked = check(reader, name, request.method, url, query, headers, body,
                    inbound_reader_for(parts.providers, name))
    if checked.signed_age_s is not None:
        parts.metrics.observe_signed_report_age(name, checked.signed_age_s)
    now = appliance.now_ms()
    carries_inbound = bool(checked.inbound) or checked.inbound_error is not None
    rules = InboundRules.from_settings(appliance.settings) if carries_inbound else None
    try:
        receipt, inbound = await appliance.store.writer.run(
            lambda c: receive_push(c, rules, checked.raw, checked.reports, checked.parse_error,
                                   checked.inbound, checked.inbound_error, now))
    except Exception as exc:
        if not is_storage_error(exc):
            log.exception("callback for provider %s could not be stored", name)
        else:  # a full disk refuses every callback: summed up, not one line each
            note_not_stored("/callbacks/{provider}", exc)
        raise TRY_AGAIN from None
    note_receipt(name, receipt)
    note_inbound(name, inbound)
    status, content, media_type = checked.answer
    return Response(content, status_code=status, media_type=media_type)


def routes() -> list[BaseRoute]:
    return [Route("/callbacks/{provider}", callback, methods=["GET", "POST"])]
