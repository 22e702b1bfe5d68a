"""``/suppressions`` and ``/inbound``: the opt-out list and the inbound messages (OPS-4).

The suppression page lists the account's numbers (newest first, searchable by number or
digits), adds one, uploads a list (the API's own reader: ``import_suppressions``) and
removes one only from a confirmation page that says what removing means. The inbound
page lists the messages received for the account and marks the STOPs. The checks and
the upload are the API's, from the domain (:mod:`appliance.optout.checks`,
:mod:`appliance.optout.suppression_requests`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from appliance import refusals
from appliance.console_sessions import ConsoleSession
from appliance.imports.accept import check_region
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.inbound.store import list_inbound
from appliance.optout import suppressions as sup
from appliance.optout.checks import check_msisdn, check_reason, search_terms
from appliance.optout.suppression_import import MAX_BYTES, MAX_LINES
from appliance.optout.suppression_requests import import_suppressions
from appliance.refusals import Refused
from appliance.runtime import Runtime
from appliance.web.errors import ascii_int, refusal_status
from appliance.web.optout_json import import_summary_json, inbound_json, suppression_json
from appliance.web.pages.guard import console_page
from appliance.web.pages.render import page, when
from appliance.web.parts import parts_of

PAGE_SIZE = 50


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value if isinstance(value, str) else ""


def _before(request: Request) -> int | None:
    return ascii_int(request.query_params.get("before", ""))


def _more_link(path: str, params: dict[str, str], last_id: int | None, more: bool) -> str | None:
    if not more or last_id is None:
        return None
    kept = {k: v for k, v in params.items() if v}
    return f"{path}?{urlencode({**kept, 'before': str(last_id)})}"


async def _suppressions_page(request: Request, session: ConsoleSession, status: int = 200,
                             error: str = "", notice: str = "",
                             summary: dict[str, Any] | None = None,
                             values: dict[str, str] | None = None) -> Response:
    appliance = parts_of(request).runtime
    query = request.query_params.get("q", "")
    try:
        exact, contains = search_terms(appliance.settings, query)
    except Refused as exc:
        exact, contains, error = None, None, error or exc.message
        query = ""
    before = _before(request)
    account_id = session.account_id
    found = await appliance.store.readers.run(lambda c: sup.search(
        c, account_id, msisdn=exact, contains=contains, before_id=before, limit=PAGE_SIZE))
    last = found.entries[-1].id if found.entries else None
    added = request.query_params.get("added", "")
    removed = request.query_params.get("removed", "")
    if not notice and added:
        notice = f"{added} is on the suppression list: nothing will be sent to it."
    if not notice and removed:
        notice = f"{removed} was taken off the suppression list."
    return page(request, "suppressions.html", session, status=status, title="Suppressions",
                entries=[suppression_json(e) for e in found.entries], total=found.total,
                query=query, searching=bool(exact or contains), error=error, notice=notice,
                summary=summary, values=values or {},
                region=appliance.settings.imports.default_region, max_lines=MAX_LINES,
                more=_more_link("/suppressions", {"q": query}, last, found.more))


async def suppressions_page(request: Request, session: ConsoleSession,
                            form: FormData) -> Response:
    return await _suppressions_page(request, session)


async def add_one(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    values = {"msisdn": _field(form, "msisdn"), "reason": _field(form, "reason")}
    try:
        msisdn = check_msisdn(appliance.settings, values["msisdn"])
        reason = check_reason(values["reason"])
    except Refused as exc:
        return await _suppressions_page(request, session, refusal_status(exc), exc.message,
                                        values=values)
    now = appliance.now_ms()
    account_id = session.account_id
    entry, created = await appliance.store.writer.run(
        lambda c: sup.add(c, account_id, msisdn, reason or "added in the console", "console",
                          now))
    if not created:
        return await _suppressions_page(
            request, session, notice=f"{entry.msisdn} was already on the suppression list"
            f" (since {when(entry.created_at)}); nothing changed.")
    return RedirectResponse(f"/suppressions?{urlencode({'added': entry.msisdn})}",
                            status_code=303)


async def _upload(form: FormData) -> bytes:
    upload = form.get("file")
    text = form.get("text")
    chosen = isinstance(upload, UploadFile) and bool(upload.filename)
    pasted = isinstance(text, str) and text.strip() != ""
    if chosen and pasted:
        raise refusals.Invalid("ambiguous_list", "Paste the numbers or choose a file, not both.")
    if chosen and isinstance(upload, UploadFile):
        return await upload.read()
    return text.encode("utf-8") if isinstance(text, str) else b""


async def import_list(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    raw_region = _field(form, "region")
    try:
        payload = await _upload(form)
        region = check_region(raw_region or None, appliance.settings.imports.default_region)
        summary = await import_suppressions(appliance, session.account_id, payload, region,
                                            "import")
    except Refused as exc:
        return await _suppressions_page(request, session, refusal_status(exc), exc.message)
    return await _suppressions_page(request, session, summary=import_summary_json(summary))


async def remove_confirm(request: Request, session: ConsoleSession,
                         form: FormData) -> Response:
    appliance = parts_of(request).runtime
    entry = await _entry(appliance, session, request.query_params.get("msisdn", ""))
    if entry is None:
        return await _suppressions_page(request, session, 404,
                                        "That number is not on the suppression list.")
    return page(request, "suppression_remove.html", session, title="Remove a suppression",
                entry=suppression_json(entry))


async def _entry(appliance: Runtime, session: ConsoleSession,
                 raw: str) -> sup.Suppression | None:
    found = normalise_msisdn(raw, appliance.settings.imports.default_region)
    if isinstance(found, Invalid):
        return None
    account_id = session.account_id
    return await appliance.store.readers.run(lambda c: sup.get(c, account_id, found.msisdn))


async def remove(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    found = normalise_msisdn(_field(form, "msisdn"), appliance.settings.imports.default_region)
    if isinstance(found, Invalid):
        return await _suppressions_page(request, session, 422, "That is not a phone number.")
    account_id = session.account_id
    removed = await appliance.store.writer.run(lambda c: sup.remove(c, account_id,
                                                                    found.msisdn))
    if removed is None:
        return await _suppressions_page(request, session, 404,
                                        "That number was not on the suppression list.")
    return RedirectResponse(f"/suppressions?{urlencode({'removed': removed.msisdn})}",
                            status_code=303)


async def inbound_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    query = request.query_params.get("q", "").strip()
    stops = request.query_params.get("stops", "") == "1"
    msisdn: str | None = None
    if query:
        found = normalise_msisdn(query, appliance.settings.imports.default_region)
        msisdn = query if isinstance(found, Invalid) else found.msisdn
    account_id = session.account_id
    listed = await appliance.store.readers.run(lambda c: list_inbound(
        c, account_id, msisdn=msisdn, stops_only=stops, before_id=_before(request),
        limit=PAGE_SIZE))
    last = listed.messages[-1].id if listed.messages else None
    return page(request, "inbound.html", session, title="Inbound messages",
                messages=[inbound_json(m) for m in listed.messages], total=listed.total,
                query=query, stops=stops,
                more=_more_link("/inbound", {"q": query, "stops": "1" if stops else ""},
                                last, listed.more))


def _upload_limit(appliance: Runtime) -> int:
    return MAX_BYTES + 16 * 1024


def routes() -> list[BaseRoute]:
    return [
        Route("/suppressions", console_page(suppressions_page), methods=["GET"]),
        Route("/suppressions/add", console_page(add_one), methods=["POST"]),
        Route("/suppressions/import", console_page(import_list, _upload_limit),
              methods=["POST"]),
        Route("/suppressions/remove", console_page(remove_confirm), methods=["GET"]),
        Route("/suppressions/remove", console_page(remove), methods=["POST"]),
        Route("/inbound", console_page(inbound_page), methods=["GET"]),
    ]
