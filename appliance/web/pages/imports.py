"""``/import``, ``/jobs/{id}`` and ``/lists``: pasting a list and watching it land.

The import form posts to this module, which runs the same accept checks as the API
(``appliance.imports.accept``: bytes, encoding, line count, list name, region) and
the same ``create_job``; the job page polls ``/jobs/{id}.json`` (the API's job JSON)
and links the rejects download, which is the API's CSV answer. A submission is keyed
by account, list, region and the exact payload, so pasting the same text into the
same list twice shows the first job again instead of starting a second one.

``/import/preview`` shows the first lines before anything is stored: their columns
and what the importer will make of each (:mod:`appliance.imports.preview`); the
form's script asks for it as soon as a file is chosen or text pasted, sending only
the head of the file. A finished job's page can re-run it from its stored payload
(IMP-11), into the same list or another, as the API's ``/rerun`` does.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.datastructures import FormData, UploadFile
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.console_sessions import ConsoleSession
from appliance.disk import below_reserve
from appliance.imports.accept import (
    StreamedLineCount,
    check_list_name,
    check_region,
    count_payload_lines,
)
from appliance.imports.import_job import (
    IdempotencyConflict,
    ImportJob,
    ListBeingDeleted,
    NewJob,
    create_job,
    default_idempotency_key,
    get_job,
    list_jobs,
    list_lists,
)
from appliance.imports.job_requests import queue_rerun
from appliance.imports.preview import PREVIEW_BYTES, preview
from appliance.refusals import Invalid, Malformed, Refused, Unavailable
from appliance.runtime import Runtime
from appliance.store.connection import Connection
from appliance.web.errors import STORAGE_RETRY_AFTER_S, ascii_int, refusal_status
from appliance.web.import_answers import job_json, rejects_response
from appliance.web.pages.guard import console_page, refusal
from appliance.web.pages.render import json_answer, page, wants_json
from appliance.web.parts import parts_of

TERMINAL = ("DONE", "FAILED", "CANCELLED")
MAX_ID = 2**62


def _import_limit(appliance: Runtime) -> int:
    # The form around the payload (list, region, token, part headers) needs a little room.
    return appliance.settings.imports.max_bytes + 16 * 1024


def _import_rows(appliance: Runtime, request: Request) -> StreamedLineCount:
    # The row limit, decided while the form streams in, as the API does.
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return StreamedLineCount(ctype, appliance.settings.imports.max_rows)


def console_idempotency_key(account_id: int, list_name: str, region: str,
                            payload: bytes) -> str:
    """The key of a console submission: the same paste into the same list is one job."""
    scope = f"console\0{list_name}\0{region}\0".encode()
    return default_idempotency_key(account_id, scope + payload)


async def _payload(form: FormData) -> tuple[bytes, str]:
    """The list as submitted: the chosen file, else the pasted text."""
    upload = form.get("file")
    text = form.get("text")
    chosen = isinstance(upload, UploadFile) and bool(upload.filename)
    pasted = isinstance(text, str) and text.strip() != ""
    if chosen and pasted:
        raise Invalid("ambiguous_list", "Paste the numbers or choose a file, not both.")
    if chosen and isinstance(upload, UploadFile):
        filename = (upload.filename or "").lower()
        return await upload.read(), "text/csv" if filename.endswith(".csv") else "text/plain"
    if isinstance(text, str):
        return text.encode("utf-8"), "text/plain"
    return b"", "text/plain"


def _list_name(form: FormData) -> object:
    new = form.get("new_list")
    if isinstance(new, str) and new.strip():
        return new
    return form.get("list")


async def _import_page(request: Request, session: ConsoleSession, status: int = 200,
                       error: dict[str, object] | None = None, chosen_list: str = "",
                       region: str = "", shown: dict[str, object] | None = None,
                       text: str = "") -> Response:
    appliance = parts_of(request).runtime
    limits = appliance.settings.imports
    lists = await appliance.store.readers.run(lambda c: list_lists(c, session.account_id))
    return page(request, "import.html", session, status=status, title="Import a list",
                lists=lists, error=error, chosen_list=chosen_list,
                region=region or limits.default_region, max_rows=limits.max_rows,
                max_bytes=limits.max_bytes, preview=shown, text=text)


async def import_form(request: Request, session: ConsoleSession, form: FormData) -> Response:
    return await _import_page(request, session, chosen_list=request.query_params.get("list", ""))


async def import_submit(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    limits = appliance.settings.imports
    raw_region = form.get("region")
    try:
        payload, ctype = await _payload(form)
        name = check_list_name(_list_name(form))
        region = check_region(raw_region if isinstance(raw_region, str) else None,
                              limits.default_region)
        total = count_payload_lines(payload, limits)
        reserve = below_reserve(appliance.settings, len(payload))
        if reserve is not None:
            raise Unavailable("storage_full", reserve)
    except Refused as exc:
        status = refusal_status(exc)
        if wants_json(request):
            answer = refusal(request, session, status, exc.error, exc.message, **exc.extra)
        else:
            chosen = _list_name(form)
            answer = await _import_page(
                request, session, status,
                {"error": exc.error, "message": exc.message, **exc.extra},
                chosen if isinstance(chosen, str) else "",
                raw_region if isinstance(raw_region, str) else "")
        if status == 503:
            answer.headers["Retry-After"] = str(STORAGE_RETRY_AFTER_S)
        return answer
    key = console_idempotency_key(session.account_id, name, region, payload)
    new = NewJob(session.account_id, name, region, key, payload, ctype, total)
    try:
        job, created = await appliance.store.writer.run(
            lambda c: create_job(c, new, appliance.now_ms()))
    except IdempotencyConflict:  # only on a hash collision of the key we made
        return refusal(request, session, 409, "submission_conflict",
                       "This list could not be told apart from an earlier one. Change it"
                       " slightly (add a blank line) and send it again.")
    except ListBeingDeleted as exc:
        return refusal(request, session, 409, "list_being_deleted", str(exc))
    parts_of(request).wake_imports()
    url = f"/jobs/{job.id}" + ("" if created else "?again=1")
    if wants_json(request):
        return json_answer({"jobId": job.id, "total": job.total, "created": created,
                            "url": url}, 202 if created else 200)
    return RedirectResponse(url, status_code=303)


async def import_preview(request: Request, session: ConsoleSession, form: FormData) -> Response:
    """The first lines of the submitted list, as the importer will read them; nothing
    is stored. JSON for the form's script, else the form again with the preview."""
    appliance = parts_of(request).runtime
    limits = appliance.settings.imports
    raw_region = form.get("region")
    chosen = _list_name(form)
    region_text = raw_region if isinstance(raw_region, str) else ""
    try:
        payload, _ctype = await _payload(form)
        region = check_region(region_text or None, limits.default_region)
    except Refused as exc:
        if wants_json(request):
            return refusal(request, session, refusal_status(exc), exc.error, exc.message,
                           **exc.extra)
        return await _import_page(request, session, refusal_status(exc),
                                  {"error": exc.error, "message": exc.message, **exc.extra},
                                  chosen if isinstance(chosen, str) else "", region_text)
    complete = form.get("partial") != "1"
    shown = preview(payload[:PREVIEW_BYTES], region, complete).as_json()
    if wants_json(request):
        return json_answer(shown)
    text = form.get("text")
    return await _import_page(request, session, 200, None,
                              chosen if isinstance(chosen, str) else "", region_text, shown,
                              text if isinstance(text, str) else "")


async def _owned_job(request: Request, session: ConsoleSession) -> ImportJob | None:
    job_id: int = request.path_params["job_id"]
    if job_id > MAX_ID:
        return None
    appliance = parts_of(request).runtime
    return await appliance.store.readers.run(lambda c: get_job(c, job_id, session.account_id))


def _missing_job(request: Request, session: ConsoleSession) -> Response:
    return refusal(request, session, 404, "not_found", "There is no such import job.")


async def job_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    job_id: int = request.path_params["job_id"]
    account_id = session.account_id

    def read(c: Connection) -> tuple[ImportJob | None, list[dict[str, Any]]]:
        found = get_job(c, job_id, account_id) if job_id <= MAX_ID else None
        return found, list_lists(c, account_id) if found is not None else []

    job, lists = await parts_of(request).runtime.store.readers.run(read)
    if job is None:
        return _missing_job(request, session)
    return page(request, "job.html", session, title=f"Import job {job.id}", job=job_json(job),
                list_id=job.list_id, finished=job.state in TERMINAL,
                again=request.query_params.get("again") == "1", lists=lists,
                rerun_error=None, rerun_key=secrets.token_urlsafe(18))


async def job_rerun(request: Request, session: ConsoleSession, form: FormData) -> Response:
    """Run a finished job again over its stored payload (IMP-11), then open the new job."""
    job = await _owned_job(request, session)
    if job is None:
        return _missing_job(request, session)
    appliance = parts_of(request).runtime
    target = _list_name(form)
    try:
        list_name = check_list_name(target) if isinstance(target, str) and target.strip() \
            else None
        key = _form_key(form, job.id)
        new, _ = await queue_rerun(appliance, session.account_id, job.id, list_name, key,
                                   wake_imports=parts_of(request).wake_imports)
    except Refused as exc:
        account_id = session.account_id
        lists = await appliance.store.readers.run(lambda c: list_lists(c, account_id))
        return page(request, "job.html", session, status=refusal_status(exc),
                    title=f"Import job {job.id}", job=job_json(job), list_id=job.list_id,
                    finished=job.state in TERMINAL, again=False, lists=lists,
                    rerun_error=exc.message, rerun_key=secrets.token_urlsafe(18))
    if wants_json(request):
        return json_answer({"jobId": new.id, "rerun_of": new.rerun_of,
                            "url": f"/jobs/{new.id}"}, 202)
    return RedirectResponse(f"/jobs/{new.id}", status_code=303)


def _form_key(form: FormData, job_id: int) -> str:
    """The re-run form's key (made when the page was shown): a double submit is one job."""
    key = form.get("rerun_key")
    if not isinstance(key, str) or not (16 <= len(key) <= 64) \
            or not key.replace("-", "").replace("_", "").isalnum():
        raise Malformed("invalid_form", "This form is incomplete. Reload the page.")
    return f"console-rerun:{job_id}:{key}"


async def job_progress(request: Request, session: ConsoleSession, form: FormData) -> Response:
    job = await _owned_job(request, session)
    if job is None:
        return _missing_job(request, session)
    data = job_json(job)
    data["rejects_url"] = f"/jobs/{job.id}/rejects.csv"
    data["finished"] = job.state in TERMINAL
    return json_answer(data)


async def job_rejects(request: Request, session: ConsoleSession, form: FormData) -> Response:
    job = await _owned_job(request, session)
    if job is None:
        return _missing_job(request, session)
    return await rejects_response(parts_of(request).runtime, job)


async def lists_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    account_id = session.account_id
    lists, jobs = await appliance.store.readers.run(
        lambda c: (list_lists(c, account_id), list_jobs(c, account_id)))
    count = request.query_params.get("count", "")
    return page(request, "lists.html", session, title="Lists and jobs", lists=lists,
                jobs=[job_json(j) for j in jobs],
                deleted=request.query_params.get("deleted", "")[:100],
                deleted_count=ascii_int(count, 11) or 0)


def routes() -> list[BaseRoute]:
    return [
        Route("/import", console_page(import_form), methods=["GET"]),
        Route("/import", console_page(import_submit, _import_limit, _import_rows),
              methods=["POST"]),
        Route("/import/preview", console_page(import_preview, _import_limit),
              methods=["POST"]),
        Route("/jobs/{job_id:int}", console_page(job_page), methods=["GET"]),
        Route("/jobs/{job_id:int}.json", console_page(job_progress), methods=["GET"]),
        Route("/jobs/{job_id:int}/rejects.csv", console_page(job_rejects), methods=["GET"]),
        Route("/jobs/{job_id:int}/rerun", console_page(job_rerun), methods=["POST"]),
        Route("/lists", console_page(lists_page), methods=["GET"]),
    ]
