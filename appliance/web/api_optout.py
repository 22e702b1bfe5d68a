"""``/api/suppressions`` and ``/api/inbound``: the opt-out list and inbound messages (OPS-4).

* ``GET /api/suppressions`` (``?msisdn=``, ``?limit=``, ``?before=``): the account's list,
  newest first, ``{"suppressions": [...], "total", "next"}``;
* ``POST /api/suppressions`` with JSON ``{"msisdn", "reason"?}``: ``201`` and the entry,
  or ``200`` and the existing entry when the number is already on the list; with a
  ``text/csv`` or ``text/plain`` body (``?region=``): one number per line, an optional
  reason beside it, read as contact imports are; ``200 {"added", "already", "rejected",
  "rejects", ...}``;
* ``DELETE /api/suppressions/{msisdn}``: ``200`` with the entry removed, ``404`` when
  the number is not on the list;
* ``GET /api/inbound`` (``?msisdn=``, ``?stops=1``, ``?limit=``, ``?before=``): the
  account's inbound messages, newest first.

The checks and the upload are the domain's (:mod:`appliance.optout.checks`,
:mod:`appliance.optout.suppression_requests`), shared with the console; their refusals
become the JSON errors of ``docs/api.md``.
"""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.imports.accept import check_region
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.inbound.store import list_inbound
from appliance.optout import suppressions as sup
from appliance.optout.checks import MAX_MSISDN_CHARS, check_msisdn, check_reason, search_terms
from appliance.optout.suppression_import import MAX_BYTES
from appliance.optout.suppression_requests import import_suppressions
from appliance.refusals import Refused
from appliance.web.auth import require_account
from appliance.web.errors import ApiError, ascii_int, not_found
from appliance.web.json_body import parse_json
from appliance.web.optout_json import import_summary_json, inbound_json, suppression_json
from appliance.web.parts import parts_of
from appliance.web.request_reading import read_limited

MAX_JSON_BYTES = 16 * 1024
DEFAULT_PAGE = 100
MAX_PAGE = 1000



def _page_args(request: Request) -> tuple[int, int | None]:
    q = request.query_params
    limit = ascii_int(q.get("limit", str(DEFAULT_PAGE)), 6)
    if limit is None or not 1 <= limit <= MAX_PAGE:
        raise ApiError(422, "invalid_limit", f"'limit' is a number from 1 to {MAX_PAGE}")
    raw_before = q.get("before")
    before = None if raw_before is None else ascii_int(raw_before)
    if raw_before is not None and before is None:
        raise ApiError(422, "invalid_before", "'before' is the id of an entry of a previous page")
    return limit, before


def _next(request: Request, more: bool, last_id: int | None, limit: int) -> str | None:
    if not more or last_id is None:
        return None
    params = {k: v for k, v in request.query_params.items() if k not in ("before", "limit")}
    params.update({"limit": str(limit), "before": str(last_id)})
    return f"{request.url.path}?{urlencode(params)}"


async def list_suppressions(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    limit, before = _page_args(request)
    exact, contains = search_terms(appliance.settings, request.query_params.get("msisdn"))
    page = await appliance.store.readers.run(lambda c: sup.search(
        c, account.id, msisdn=exact, contains=contains, before_id=before, limit=limit))
    last = page.entries[-1].id if page.entries else None
    return JSONResponse({"suppressions": [suppression_json(e) for e in page.entries],
                         "total": page.total, "next": _next(request, page.more, last, limit)})


async def add_suppression(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype in ("text/csv", "text/plain"):
        body = await read_limited(request, MAX_BYTES)
        region = check_region(request.query_params.get("region"),
                              appliance.settings.imports.default_region)
        summary = await import_suppressions(appliance, account.id, body, region, "import")
        return JSONResponse(import_summary_json(summary))
    if ctype != "application/json":
        raise ApiError(415, "unsupported_media_type",
                       "send application/json {\"msisdn\", \"reason\"?}, or a list as"
                       " text/csv or text/plain")
    body = await read_limited(request, MAX_JSON_BYTES)
    data = parse_json(body)
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    msisdn = check_msisdn(appliance.settings, data.get("msisdn"))
    reason = check_reason(data.get("reason"))
    now = appliance.now_ms()
    entry, created = await appliance.store.writer.run(
        lambda c: sup.add(c, account.id, msisdn, reason, "api", now))
    return JSONResponse(suppression_json(entry), status_code=201 if created else 200)


async def remove_suppression(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    try:
        msisdn = check_msisdn(appliance.settings, request.path_params["msisdn"])
    except Refused:
        raise not_found("suppression") from None
    removed = await appliance.store.writer.run(lambda c: sup.remove(c, account.id, msisdn))
    if removed is None:
        raise not_found("suppression")
    return JSONResponse({"removed": suppression_json(removed)})


async def inbound_messages(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    limit, before = _page_args(request)
    raw = request.query_params.get("msisdn")
    msisdn: str | None = None
    if raw is not None and len(raw) > MAX_MSISDN_CHARS:
        raise ApiError(422, "invalid_msisdn", "'msisdn' is too long")
    if raw is not None and raw.strip():
        found = normalise_msisdn(raw, appliance.settings.imports.default_region)
        msisdn = raw.strip() if isinstance(found, Invalid) else found.msisdn
    stops = request.query_params.get("stops", "") in ("1", "true", "yes")
    page = await appliance.store.readers.run(lambda c: list_inbound(
        c, account.id, msisdn=msisdn, stops_only=stops, before_id=before, limit=limit))
    last = page.messages[-1].id if page.messages else None
    return JSONResponse({"inbound": [inbound_json(m) for m in page.messages],
                         "total": page.total, "next": _next(request, page.more, last, limit)})


def routes() -> list[BaseRoute]:
    return [
        Route("/api/suppressions", list_suppressions, methods=["GET"]),
        Route("/api/suppressions", add_suppression, methods=["POST"]),
        Route("/api/suppressions/{msisdn}", remove_suppression, methods=["DELETE"]),
        Route("/api/inbound", inbound_messages, methods=["GET"]),
    ]
