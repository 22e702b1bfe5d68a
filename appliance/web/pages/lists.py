"""``/lists/{id}``: one list's contacts: browse, search, export, delete.

Browsing pages by contact id (``?after=``), 100 at a time. A search that is a whole
phone number (in any of the ways the importer reads one) finds exactly that contact;
anything else finds its digits anywhere in the numbers, or its text in the names.
The export streams every contact as CSV (``msisdn,name,added_at``), page by page,
so a million-row list never sits in memory.

Deleting asks first, on a page that states what goes (one contact, or the list and
its N contacts); the confirmation carries that count, and if the list changed
meanwhile nothing is deleted and the new count is shown. A deleted list's contacts
are removed in batches of :data:`~appliance.imports.contact_lists.DELETE_BATCH`
(the writer is never held long); its import jobs and campaigns stay.
"""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from functools import partial
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from appliance.console_sessions import ConsoleSession
from appliance.csv_export import spreadsheet_safe
from appliance.imports import contact_lists as cl
from appliance.imports.normalise import Invalid, normalise_msisdn
from appliance.store.connection import Connection
from appliance.web.errors import ascii_int
from appliance.web.pages.guard import console_page, refusal
from appliance.web.pages.render import page
from appliance.web.parts import parts_of

PAGE_SIZE = 100
MAX_ID = 2**62
MAX_QUERY = 100


def _int_param(request: Request, name: str) -> int:
    return ascii_int(request.query_params.get(name, "")) or 0


async def _owned(request: Request, session: ConsoleSession) -> cl.ListInfo | None:
    list_id: int = request.path_params["list_id"]
    if list_id > MAX_ID:
        return None
    account_id = session.account_id
    return await parts_of(request).runtime.store.readers.run(
        lambda c: cl.get_list(c, account_id, list_id))


def _missing(request: Request, session: ConsoleSession) -> Response:
    return refusal(request, session, 404, "not_found", "There is no such list (or it was deleted).")


async def list_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    list_id: int = request.path_params["list_id"]
    query = request.query_params.get("q", "").strip()[:MAX_QUERY]
    after = _int_param(request, "after")
    exact: str | None = None
    if query:
        found = normalise_msisdn(query, appliance.settings.imports.default_region)
        if not isinstance(found, Invalid):
            exact = found.msisdn
    account_id = session.account_id

    def read(c: Connection) -> tuple[cl.ListInfo | None, list[cl.Contact], str | None]:
        info = cl.get_list(c, account_id, list_id) if list_id <= MAX_ID else None
        if info is None:
            return None, [], None
        rows = cl.browse(c, list_id, after, PAGE_SIZE + 1, msisdn=exact, text=query or None)
        return info, rows, cl.busy_with(c, list_id)

    info, rows, busy = await appliance.store.readers.run(read)
    if info is None:
        return _missing(request, session)
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    return page(request, "list.html", session, title=f"List {info.name}", info=info,
                contacts=rows, query=query, exact=exact, after=after,
                next_after=rows[-1].id if more and rows else None, busy=busy,
                deleted=_int_param(request, "deleted"))


async def export_csv(request: Request, session: ConsoleSession, form: FormData) -> Response:
    info = await _owned(request, session)
    if info is None:
        return _missing(request, session)
    store = parts_of(request).runtime.store
    list_id = info.id

    async def body() -> AsyncIterator[bytes]:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
        writer.writerow(["msisdn", "name", "added_at"])
        yield buf.getvalue().encode("utf-8")
        after = 0
        while True:
            rows = await store.readers.run(partial(cl.export_page, list_id=list_id,
                                                   after_id=after))
            if not rows:
                return
            buf.seek(0)
            buf.truncate()
            for _id, msisdn, name, added in rows:
                # A number is E.164 (digits after a '+'): never a formula; a name may be.
                writer.writerow([msisdn, spreadsheet_safe(name), _iso(added)])
            yield buf.getvalue().encode("utf-8")
            after = rows[-1][0]

    filename = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in info.name)[:60]
    return StreamingResponse(
        body(), media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="list-{filename or info.id}.csv"',
                 "Cache-Control": "no-store"})


def _iso(ms: int) -> str:
    from appliance.clock import iso

    return iso(ms) or ""


def _contact_id(source: Any) -> int | None:
    return ascii_int(source.get("contact")) if source is not None else None


async def _contact(request: Request, info: cl.ListInfo, contact_id: int) -> cl.Contact | None:
    return await parts_of(request).runtime.store.readers.run(
        lambda c: cl.get_contact(c, info.id, contact_id))


async def confirm_delete(request: Request, session: ConsoleSession, form: FormData) -> Response:
    info = await _owned(request, session)
    if info is None:
        return _missing(request, session)
    contact_id = _contact_id(request.query_params)
    contact = None
    if contact_id is not None:
        contact = await _contact(request, info, contact_id)
        if contact is None:
            return refusal(request, session, 404, "not_found", "That contact is not in the list.")
    busy = None if contact is not None else await parts_of(request).runtime.store.readers.run(
        lambda c: cl.busy_with(c, info.id))
    return page(request, "list_delete.html", session, title=f"Delete from {info.name}",
                info=info, contact=contact, busy=busy, changed_from=None)


async def delete(request: Request, session: ConsoleSession, form: FormData) -> Response:
    info = await _owned(request, session)
    if info is None:
        return _missing(request, session)
    appliance = parts_of(request).runtime
    store = appliance.store
    account_id = session.account_id
    contact_id = _contact_id(form)
    if contact_id is not None:
        gone = await store.writer.run(
            lambda c: cl.delete_contact(c, account_id, info.id, contact_id))
        return RedirectResponse(f"/lists/{info.id}?deleted={gone}", status_code=303)
    expected = ascii_int(form.get("expected"), 12)
    if expected is None:
        return refusal(request, session, 400, "invalid_form",
                       "This form is incomplete. Reload the page.")
    try:
        count = await store.writer.run(
            lambda c: cl.mark_deleted(c, account_id, info.id, expected, appliance.now_ms()))
    except cl.ListBusy as exc:
        return page(request, "list_delete.html", session, status=409,
                    title=f"Delete {info.name}", info=info, contact=None, busy=str(exc),
                    changed_from=None)
    except cl.ListChanged as exc:
        fresh = cl.ListInfo(info.id, info.name, info.created_at, exc.contacts, info.jobs,
                            info.campaigns)
        return page(request, "list_delete.html", session, status=409,
                    title=f"Delete {info.name}", info=fresh, contact=None, busy=None,
                    changed_from=expected)
    except LookupError:
        return _missing(request, session)
    while await store.writer.run(lambda c: cl.delete_some_contacts(c, info.id)):
        pass
    return RedirectResponse(f"/lists?deleted={quote(info.name)}&count={count}", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/lists/{list_id:int}", console_page(list_page), methods=["GET"]),
        Route("/lists/{list_id:int}/export.csv", console_page(export_csv), methods=["GET"]),
        Route("/lists/{list_id:int}/delete", console_page(confirm_delete), methods=["GET"]),
        Route("/lists/{list_id:int}/delete", console_page(delete), methods=["POST"]),
    ]
