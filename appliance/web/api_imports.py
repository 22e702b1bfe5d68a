"""``/api/contacts/import``, ``/api/jobs/*`` and ``/api/lists/*``.

The accept side (IMP-1, 2, 3, 11) only authenticates, streams the body under a byte
limit, counts lines, stores the payload as received and answers ``202``. All
parsing happens later in the import worker. ``POST /api/jobs/{id}/rerun`` (IMP-11)
queues a new job over a finished job's stored payload, so the current parser reads
it again (into another list with ``{"list"}``); ``410`` once retention pruned it.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.clock import iso
from appliance.disk import below_reserve
from appliance.imports.accept import (
    StreamedLineCount,
    StreamedPayload,
    check_list_name,
    check_region,
    count_payload_lines,
)
from appliance.imports.import_job import (
    IdempotencyConflict,
    ImportJob,
    ListBeingDeleted,
    NewJob,
    cancel_job,
    create_job,
    fallback_idempotency_key,
    get_job,
    list_jobs,
    list_lists,
    list_summary,
    payload_sha256,
)
from appliance.imports.job_requests import queue_rerun
from appliance.imports.json_paste import JsonPaste, StreamedJsonPaste, names_text_once
from appliance.refusals import Refused
from appliance.runtime import Runtime
from appliance.web.auth import require_account
from appliance.web.errors import ApiError, api_error, not_found, path_id, storage_full
from appliance.web.forms import parse_form
from appliance.web.import_answers import job_json, rejects_response
from appliance.web.json_body import parse_json_object, parse_json_object_encoding
from appliance.web.parts import parts_of
from appliance.web.request_reading import (
    idempotency_key,
    payload_too_large,
    read_limited,
    read_pieces,
)

IMPORT_TYPES = ("application/json", "text/plain", "text/csv", "multipart/form-data",
                "application/x-www-form-urlencoded")



def _content_type(request: Request) -> str:
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype not in IMPORT_TYPES:
        raise ApiError(
            415, "unsupported_media_type",
            "send application/json, text/plain, text/csv, multipart/form-data"
            " or application/x-www-form-urlencoded",
        )
    return ctype


def _json_paste(body: bytes) -> tuple[dict[str, Any], bytes]:
    """The JSON body's fields and its ``text`` as UTF-8 (4 ms for a 3 MB paste)."""
    data, text = parse_json_object_encoding(body, "text")
    if text is None:
        raise ApiError(422, "invalid_text", "'text' must be a string with one number per line")
    return data, text


async def _submission(request: Request, body: bytes, ctype: str
                      ) -> tuple[Any, Any, bytes, str, bool]:
    """(list name, region, payload bytes, content type, whether the payload was encoded
    here from text) from any accepted body shape."""
    if ctype == "application/json":
        # A 64 MB body takes a while to parse and its text to encode: off the event loop.
        data, payload = await anyio.to_thread.run_sync(_json_paste, body)
        return data.get("list"), data.get("region"), payload, "text/plain", True
    if ctype in ("text/plain", "text/csv"):
        q = request.query_params
        return q.get("list"), q.get("region"), body, ctype, False
    if ctype in ("multipart/form-data", "application/x-www-form-urlencoded"):
        # The body is already bounded by max_bytes; let a pasted `text` field be that big.
        form = await parse_form(request, body, max_files=1, max_fields=10,
                                max_part_size=len(body) + 1, unreadable="invalid_multipart")
        upload = form.get("file")
        if isinstance(upload, UploadFile):
            payload = await upload.read()
            part_type = (upload.content_type or "text/plain").split(";")[0]
            from_text = False
        elif isinstance(form.get("text"), str):
            payload = str(form.get("text")).encode("utf-8")
            part_type, from_text = "text/plain", True
        else:
            raise ApiError(422, "invalid_text", "send the list as a 'file' part or a 'text' field")
        q = request.query_params
        return (form.get("list") or q.get("list"), form.get("region") or q.get("region"),
                payload, part_type, from_text)
    raise AssertionError(ctype)  # _content_type let only the shapes above through


def decoded_json_paste(streamed: StreamedJsonPaste
                       ) -> tuple[dict[str, Any], JsonPaste] | None:
    """The fields and text of a JSON paste decoded as it came, or ``None``: parse the
    body whole. What was found is kept only if its other fields pass as strictly as
    any JSON body's, so a body gets the same answer either way."""
    paste = streamed.finish()
    if paste is None:
        return None
    try:
        data, text = parse_json_object_encoding(paste.fields, "text")
    except ApiError:
        return None
    if text != b"" or not names_text_once(paste.fields):
        return None
    return data, paste


async def _streamed_json(streamed: StreamedJsonPaste
                         ) -> tuple[dict[str, Any], JsonPaste] | None:
    if streamed.undecoded > 1024 * 1024:  # a body of one long line: off the event loop
        return await anyio.to_thread.run_sync(decoded_json_paste, streamed)
    return decoded_json_paste(streamed)


async def import_contacts(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    limits = appliance.settings.imports
    ctype = _content_type(request)
    # A plain-text body is counted, hashed and checked as it streams in, a JSON one
    # decoded too: once its last byte is here there is nothing left to read again.
    # Other shapes are decoded first.
    streamed = (StreamedPayload(ctype, limits.max_rows) if ctype in ("text/plain", "text/csv")
                else StreamedJsonPaste(limits.max_rows) if ctype == "application/json"
                else StreamedLineCount(ctype, limits.max_rows))
    pieces: list[bytes] = []
    checked: StreamedPayload | None = None  # the streamed checks of the pieces, if any
    decoded: tuple[dict[str, Any], JsonPaste] | None = None
    if isinstance(streamed, StreamedPayload | StreamedJsonPaste):  # never joined if it works
        found = await read_pieces(request, limits.max_bytes, streamed)
        if found is None:
            raise payload_too_large(limits.max_bytes)
        if isinstance(streamed, StreamedPayload):
            pieces, body, checked = found, b"", streamed
        else:
            decoded = await _streamed_json(streamed)
            body = b"" if decoded is not None else b"".join(found)
            del found
    else:
        body = await read_limited(request, limits.max_bytes, streamed)
    if decoded is not None:
        data, paste = decoded
        list_name, region, payload = data.get("list"), data.get("region"), b""
        ctype, from_text = "text/plain", True
        pieces, checked = list(paste.pieces), paste.text
    else:
        list_name, region, payload, ctype, from_text = await _submission(request, body, ctype)
    whole = payload is body
    if not whole:  # JSON or a form: the raw body is no longer needed
        request._body = b""
        del body

    def examine() -> tuple[int, str]:  # a few ms of CPU on a 3 MB paste: off the event loop
        return count_payload_lines(payload, limits, utf8=from_text), payload_sha256(payload)

    try:
        name = check_list_name(list_name)
        region = check_region(region, limits.default_region)
        done: tuple[int, str] | None = None
        if checked is not None:
            await checked.hashed()
            done = checked.result(limits)
            if done is None:  # not plain UTF-8 text: the full checks say what it is
                payload, pieces = b"".join(pieces), []
        if done is None:
            done = await anyio.to_thread.run_sync(examine)
        total, digest = done
    except Refused as exc:
        raise api_error(exc) from None
    key = idempotency_key(request)
    ours = key is None
    if key is None:
        key = fallback_idempotency_key(account.id, name, region, digest)
    reserve = below_reserve(appliance.settings, len(payload) + sum(len(p) for p in pieces))
    if reserve is not None:
        raise storage_full(reserve)
    new = NewJob(account.id, name, region, key, payload, ctype, total, digest, tuple(pieces))
    try:
        job, _created = await appliance.store.writer.run(
            lambda c: create_job(c, new, appliance.now_ms())
        )
    except IdempotencyConflict as exc:
        if ours:  # only a hash collision gets here: never blame a key the caller did not send
            raise ApiError(409, "submission_conflict",
                           "this submission could not be told apart from an earlier one;"
                           " send it with an Idempotency-Key") from None
        raise ApiError(422, "idempotency_key_reused", str(exc)) from None
    except ListBeingDeleted as exc:
        raise ApiError(409, "list_being_deleted", str(exc)) from None
    parts_of(request).wake_imports()
    return JSONResponse(
        {"jobId": job.id, "total": job.total, "poll": f"/api/jobs/{job.id}", "state": job.state},
        status_code=202,
    )


async def rerun(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    job_id = _job_id(request)
    body = await read_limited(request, 64 * 1024)
    list_name = None
    if body.strip():
        data = parse_json_object(body)
        if data.get("list") is not None:
            list_name = check_list_name(data["list"])  # refused: the API's 422
    job, _ = await queue_rerun(appliance, account.id, job_id, list_name,
                               idempotency_key(request),
                               wake_imports=parts_of(request).wake_imports)
    return JSONResponse({"jobId": job.id, "rerun_of": job.rerun_of, "total": job.total,
                         "poll": f"/api/jobs/{job.id}", "state": job.state}, status_code=202)


def _job_id(request: Request) -> int:
    return path_id(request.path_params["job_id"], "job")


async def _owned_job(request: Request) -> tuple[Runtime, ImportJob]:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    job_id = _job_id(request)
    job = await appliance.store.readers.run(lambda c: get_job(c, job_id, account.id))
    if job is None:
        raise not_found("job")
    return appliance, job


async def show_job(request: Request) -> Response:
    _, job = await _owned_job(request)
    return JSONResponse(job_json(job))


async def cancel(request: Request) -> Response:
    appliance, job = await _owned_job(request)
    await appliance.store.writer.run(
        lambda c: cancel_job(c, job.id, job.account_id, appliance.now_ms())
    )
    fresh = await appliance.store.readers.run(lambda c: get_job(c, job.id))
    assert fresh is not None
    return JSONResponse(job_json(fresh))


async def rejects_csv(request: Request) -> Response:
    appliance, job = await _owned_job(request)
    return await rejects_response(appliance, job)


async def jobs(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    found = await appliance.store.readers.run(lambda c: list_jobs(c, account.id))
    return JSONResponse({"jobs": [job_json(j) for j in found]})


async def lists(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    found = await appliance.store.readers.run(lambda c: list_lists(c, account.id))
    return JSONResponse({"lists": found})


async def show_list(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    name = request.path_params["name"]
    found = await appliance.store.readers.run(lambda c: list_summary(c, account.id, name))
    if found is None:
        raise not_found("list")
    found["created_at"] = iso(found["created_at"])
    return JSONResponse(found)


def routes() -> list[BaseRoute]:
    return [
        Route("/api/contacts/import", import_contacts, methods=["POST"]),
        Route("/api/jobs", jobs, methods=["GET"]),
        Route("/api/jobs/{job_id}", show_job, methods=["GET"]),
        Route("/api/jobs/{job_id}/cancel", cancel, methods=["POST"]),
        Route("/api/jobs/{job_id}/rerun", rerun, methods=["POST"]),
        Route("/api/jobs/{job_id}/rejects.csv", rejects_csv, methods=["GET"]),
        Route("/api/lists", lists, methods=["GET"]),
        Route("/api/lists/{name}", show_list, methods=["GET"]),
    ]
