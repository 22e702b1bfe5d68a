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

The console's pages call the same checks and units (:func:`check_msisdn`,
:func:`import_suppressions`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlencode

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.clock import iso
from appliance.imports.accept import check_region, too_large
from appliance.imports.lines import PayloadEncodingError, count_lines
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.inbound.store import Inbound, list_inbound
from appliance.optout import suppressions as sup
from appliance.optout.suppression_import import MAX_BYTES, MAX_LINES, MAX_REJECTS_SHOWN, ReadList
from appliance.optout.suppression_import import read_suppressions as read_list
from appliance.refusals import Refused, TooLarge
from appliance.service import Appliance
from appliance.store.connection import Connection
from appliance.web.auth import require_account
from appliance.web.errors import ApiError, api_error, ascii_int, not_found
from appliance.web.request_reading import read_limited

MAX_JSON_BYTES = 16 * 1024
MAX_MSISDN_CHARS = 64
DEFAULT_PAGE = 100
MAX_PAGE = 1000
WRITE_CHUNK = 5000
_NOT_DIGIT = re.compile(r"[^0-9]")


def _appliance(request: Request) -> Appliance:
    appliance: Appliance = request.app.state.appliance
    return appliance


def check_msisdn(appliance: Appliance, value: Any, field: str = "msisdn") -> str:
    """A number to suppress, as E.164 (the default region applies); 422 otherwise."""
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_MSISDN_CHARS:
        raise ApiError(422, "invalid_msisdn", f"'{field}' must be a phone number string")
    found = normalise_msisdn(value, appliance.settings.imports.default_region)
    if isinstance(found, Invalid):
        raise ApiError(422, "invalid_msisdn", f"'{field}' is not a phone number: {found.reason}",
                       reason=found.reason)
    return found.msisdn


def check_reason(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or "\x00" in value:
        raise ApiError(422, "invalid_reason", "'reason' must be a string")
    if len(value) > sup.MAX_REASON_CHARS:
        raise ApiError(422, "invalid_reason",
                       f"'reason' is at most {sup.MAX_REASON_CHARS} characters")
    return value.strip()


def suppression_json(entry: sup.Suppression) -> dict[str, Any]:
    return {
        "msisdn": entry.msisdn,
        "reason": entry.reason,
        "source": entry.source,
        "inbound_id": entry.inbound_id,
        "created_at": iso(entry.created_at),
    }


def inbound_json(m: Inbound) -> dict[str, Any]:
    return {
        "id": m.id,
        "provider": m.provider,
        "provider_msg_id": m.provider_msg_id,
        "from": m.msisdn,
        "to": m.to,
        "text": m.text,
        "parts": m.parts,
        "parts_received": m.parts_received,
        "stop": m.keyword is not None,
        "keyword": m.keyword,
        "sent_at": iso(m.sent_at) if m.sent_at else None,
        "received_at": iso(m.received_at),
        "repeats": m.repeats,
    }


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


def search_terms(appliance: Appliance, raw: str | None) -> tuple[str | None, str | None]:
    """``?msisdn=`` as ``(exact number, digits to look for)``: a whole number is matched
    exactly (any way of writing it), a fragment by its digits."""
    if raw is None or not raw.strip():
        return None, None
    if len(raw) > MAX_MSISDN_CHARS:
        raise ApiError(422, "invalid_msisdn", "'msisdn' is too long")
    found = normalise_msisdn(raw, appliance.settings.imports.default_region)
    if not isinstance(found, Invalid):
        return found.msisdn, None
    digits = _NOT_DIGIT.sub("", raw)
    if not digits:
        raise ApiError(422, "invalid_msisdn", "'msisdn' must hold a number or some of its digits")
    return None, digits


async def list_suppressions(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    limit, before = _page_args(request)
    exact, contains = search_terms(appliance, request.query_params.get("msisdn"))
    page = await appliance.store.readers.run(lambda c: sup.search(
        c, account.id, msisdn=exact, contains=contains, before_id=before, limit=limit))
    last = page.entries[-1].id if page.entries else None
    return JSONResponse({"suppressions": [suppression_json(e) for e in page.entries],
                         "total": page.total, "next": _next(request, page.more, last, limit)})


@dataclass(frozen=True)
class ImportSummary:
    lines: int
    added: int
    already: int
    read: ReadList

    def as_json(self) -> dict[str, Any]:
        rejects = self.read.rejects
        return {
            "lines": self.lines,
            "added": self.added,
            "already": self.already,
            "rejected": len(rejects),
            "blank": self.read.blank,
            "header_skipped": self.read.header_skipped,
            "rejects": [{"line_number": r.line_number, "line": r.line, "reason": r.reason}
                        for r in rejects[:MAX_REJECTS_SHOWN]],
            "rejects_truncated": len(rejects) > MAX_REJECTS_SHOWN,
        }


def _add_chunk(account_id: int, entries: list[tuple[str, str]], source: str, now_ms: int,
               conn: Connection) -> int:
    return sup.add_many(conn, account_id, entries, source, now_ms)


async def import_suppressions(appliance: Appliance, account_id: int, payload: bytes,
                              region: str, source: str) -> ImportSummary:
    """Read an uploaded list and add its numbers (the API's and the console's upload).

    :class:`ApiError` for a list that is too large, not text, or empty. The numbers are
    written in units of :data:`WRITE_CHUNK`; sending the same list again adds nothing.
    """
    if len(payload) > MAX_BYTES:
        raise api_error(too_large(MAX_BYTES))

    def read() -> tuple[int, ReadList]:
        lines = count_lines(payload)
        if lines > MAX_LINES:
            raise TooLarge("too_many_rows",
                           f"This list has {lines} lines. The limit is {MAX_LINES}; split it.",
                           limit=MAX_LINES, submitted=lines)
        return lines, read_list(payload, region)

    try:
        lines, found = await anyio.to_thread.run_sync(read)
    except Refused as exc:
        raise api_error(exc) from None
    except (PayloadEncodingError, UnicodeDecodeError) as exc:
        raise ApiError(400, "invalid_encoding", str(exc)) from None
    if lines == 0 or (not found.entries and not found.rejects and not found.repeats):
        raise ApiError(422, "empty_list", "the list is empty: give at least one number")
    added = 0
    now = appliance.now_ms()
    for start in range(0, len(found.entries), WRITE_CHUNK):
        added += await appliance.store.writer.run(
            partial(_add_chunk, account_id, found.entries[start:start + WRITE_CHUNK], source,
                    now))
    already = len(found.entries) - added + found.repeats
    return ImportSummary(lines, added, already, found)


async def add_suppression(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype in ("text/csv", "text/plain"):
        body = await read_limited(request, MAX_BYTES)
        try:
            region = check_region(request.query_params.get("region"),
                                  appliance.settings.imports.default_region)
        except Refused as exc:
            raise api_error(exc) from None
        summary = await import_suppressions(appliance, account.id, body, region, "import")
        return JSONResponse(summary.as_json())
    if ctype != "application/json":
        raise ApiError(415, "unsupported_media_type",
                       "send application/json {\"msisdn\", \"reason\"?}, or a list as"
                       " text/csv or text/plain")
    body = await read_limited(request, MAX_JSON_BYTES)
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ApiError(400, "invalid_json", f"the body is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "the body must be a JSON object")
    msisdn = check_msisdn(appliance, data.get("msisdn"))
    reason = check_reason(data.get("reason"))
    now = appliance.now_ms()
    entry, created = await appliance.store.writer.run(
        lambda c: sup.add(c, account.id, msisdn, reason, "api", now))
    return JSONResponse(suppression_json(entry), status_code=201 if created else 200)


async def remove_suppression(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
    try:
        msisdn = check_msisdn(appliance, request.path_params["msisdn"])
    except ApiError:
        raise not_found("suppression") from None
    removed = await appliance.store.writer.run(lambda c: sup.remove(c, account.id, msisdn))
    if removed is None:
        raise not_found("suppression")
    return JSONResponse({"removed": suppression_json(removed)})


async def inbound_messages(request: Request) -> Response:
    account = await require_account(request)
    appliance = _appliance(request)
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
