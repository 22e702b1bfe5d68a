"""``/api/consents``: consents to commercial messages, per account (IYS-2).

* ``POST /api/consents`` with one JSON object ``{"msisdn", "status", "recipient_type",
  "source"?, "consented_at"?}``: ``201`` and the record in force when the number had
  none, else ``200``; a record that cannot be read is ``422 invalid_consent`` with the
  ``reason``. With a JSON array, or a ``text/csv`` body (``?region=``): ``200 {"added",
  "updated", "unchanged", "rejected", "rejects"}``, each reject with its line and reason;
* ``GET /api/consents`` (``?status=ONAY|RET``, ``?msisdn=``, ``?limit=``, ``?before=``):
  records in force, newest first, each with ``received_at`` and ``last_commercial_at``;
  with ``?msisdn=`` the number's ``history`` too;
* ``GET /api/consents.csv``: every record in force, for an audit.

Reading the records is :mod:`appliance.optout.consent_input`, loading them
:mod:`appliance.optout.consent_requests`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from appliance.clock import iso
from appliance.csv_export import csv_rows
from appliance.imports.accept import check_region
from appliance.optout import consents as store
from appliance.optout.checks import check_msisdn
from appliance.optout.consent_input import (
    MAX_BYTES,
    MAX_REJECTS_SHOWN,
    BadRecord,
    record_of,
)
from appliance.optout.consent_requests import LoadSummary, load_array, load_csv
from appliance.web.api_optout import _next, _page_args
from appliance.web.auth import require_account
from appliance.web.errors import ApiError
from appliance.web.json_body import parse_json
from appliance.web.parts import parts_of
from appliance.web.request_reading import read_limited

EXPORT_HEADER = ["msisdn", "status", "recipient_type", "source", "consented_at",
                 "received_at", "last_commercial_at"]


def consent_json(c: store.Consent) -> dict[str, Any]:
    return {"msisdn": c.msisdn, "status": c.status, "recipient_type": c.recipient_type,
            "source": c.source, "consented_at": iso(c.consented_at),
            "received_at": iso(c.received_at),
            "last_commercial_at": iso(c.last_commercial_at),
            "commercial_allowed": c.allows_commercial}


def summary_json(s: LoadSummary) -> dict[str, Any]:
    rejects = s.read.rejects
    return {"added": s.applied.added, "updated": s.applied.updated,
            "unchanged": s.applied.unchanged, "rejected": len(rejects),
            "rejects": [{"line_number": r.line_number, "line": r.line, "reason": r.reason}
                        for r in rejects[:MAX_REJECTS_SHOWN]],
            "rejects_truncated": len(rejects) > MAX_REJECTS_SHOWN}


async def add_consents(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    region = check_region(request.query_params.get("region"),
                          appliance.settings.imports.default_region)
    body = await read_limited(request, MAX_BYTES)
    if ctype in ("text/csv", "text/plain"):
        return JSONResponse(summary_json(await load_csv(appliance, account.id, body, region)))
    if ctype != "application/json":
        raise ApiError(415, "unsupported_media_type", "send application/json (one record or"
                       " an array of them) or text/csv")
    data = parse_json(body)
    if isinstance(data, list):
        return JSONResponse(summary_json(await load_array(appliance, account.id, data,
                                                          region)))
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "send one record (an object) or an array")
    now = appliance.now_ms()
    try:
        rec = record_of(data, region, now)
    except BadRecord as exc:
        raise ApiError(422, "invalid_consent", str(exc), reason=str(exc)) from None

    def unit(c: Any) -> tuple[str, store.Consent | None]:
        what = store.apply_one(c, account.id, rec, now)
        return what, store.get(c, account.id, rec.msisdn)

    what, found = await appliance.store.writer.run(unit)
    assert found is not None
    return JSONResponse({**consent_json(found), "result": what},
                        status_code=201 if what == "added" else 200)


async def list_consents(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    limit, before = _page_args(request)
    status = request.query_params.get("status")
    if status is not None and status not in store.STATUSES:
        raise ApiError(422, "invalid_status", "'status' is ONAY or RET")
    raw = request.query_params.get("msisdn")
    msisdn = None if raw is None else check_msisdn(appliance.settings, raw)
    page = await appliance.store.readers.run(lambda c: store.search(
        c, account.id, status=status, msisdn=msisdn, before_id=before, limit=limit))
    out: dict[str, Any] = {"consents": [consent_json(e) for e in page.consents],
                           "total": page.total}
    if msisdn is not None:
        kept = await appliance.store.readers.run(lambda c: store.history(c, account.id,
                                                                         msisdn))
        out["history"] = [{"status": h.record.status,
                           "recipient_type": h.record.recipient_type,
                           "source": h.record.source,
                           "consented_at": iso(h.record.consented_at),
                           "received_at": iso(h.received_at)} for h in kept]
    last = page.consents[-1].id if page.consents else None
    out["next"] = _next(request, page.more, last, limit)
    return JSONResponse(out)


async def export_consents(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime

    async def pieces() -> AsyncIterator[bytes]:
        last = 0
        yield b"".join(csv_rows(EXPORT_HEADER, []))
        while True:
            batch = await appliance.store.readers.run(
                partial(store.search_after, account_id=account.id, after_id=last))
            if not batch:
                return
            rows: list[list[object]] = [
                [c.msisdn, c.status, c.recipient_type, c.source, iso(c.consented_at),
                 iso(c.received_at), iso(c.last_commercial_at) or ""] for c in batch]
            yield b"".join(csv_rows(EXPORT_HEADER, rows)).split(b"\r\n", 1)[1]
            last = batch[-1].id

    return StreamingResponse(pieces(), media_type="text/csv; charset=utf-8", headers={
        "Content-Disposition": 'attachment; filename="consents.csv"'})


def routes() -> list[BaseRoute]:
    return [
        Route("/api/consents", add_consents, methods=["POST"]),
        Route("/api/consents", list_consents, methods=["GET"]),
        Route("/api/consents.csv", export_consents, methods=["GET"]),
    ]
