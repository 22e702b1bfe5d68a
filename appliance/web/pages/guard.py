"""The gate in front of every console page: a session, and a CSRF token on every POST.

:func:`console_page` wraps a page handler. Without a live session a page answers
``303`` to ``/login?next=...`` (a JSON request gets ``401``). A POST has its body read
under a byte limit, parsed as a form, and is refused with ``403`` unless it carries
the session's CSRF token; only then does the handler run, with the parsed form.
A handler whose write the disk did not take (full or failing) answers ``503`` with
``Retry-After`` in the same two shapes: nothing of the form was stored.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from appliance.console_sessions import ConsoleSession
from appliance.disk import is_storage_error
from appliance.logs import note_not_stored
from appliance.runtime import Runtime
from appliance.web.body_budget import Watch
from appliance.web.errors import ApiError, ascii_int, not_stored
from appliance.web.forms import parse_form
from appliance.web.pages.render import json_answer, page, wants_json
from appliance.web.parts import parts_of
from appliance.web.request_reading import read_limited
from appliance.web.session import CSRF_FIELD, current_session, presented_csrf, tokens_match

SMALL_FORM_BYTES = 64 * 1024
Handler = Callable[[Request, ConsoleSession, FormData], Awaitable[Response]]
Endpoint = Callable[[Request], Awaitable[Response]]
BodyLimit = Callable[[Runtime], int]
BodyWatch = Callable[[Runtime, Request], Watch]



def safe_next(target: str | None) -> str:
    """A local path to go to after sign-in; anything else (another host) becomes ``/``."""
    if (not target or not target.startswith("/") or target.startswith("//")
            or "\\" in target or any(ord(ch) < 32 for ch in target) or len(target) > 500):
        return "/"
    return target


def sign_in_redirect(request: Request) -> Response:
    if wants_json(request):
        return json_answer({"error": "unauthorized", "message": "sign in again",
                            "login": "/login"}, 401)
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(here, safe='/')}", status_code=303)


def refusal(request: Request, session: ConsoleSession | None, status: int, error: str,
            message: str, **extra: object) -> Response:
    """An error answer in the shape the client asked for: JSON, or the error page."""
    if wants_json(request):
        return json_answer({"error": error, "message": message, **extra}, status)
    return page(request, "error.html", session, status=status, status_code=status,
                error=error, message=message)


async def read_form(request: Request, limit: int, watch: Watch | None = None) -> FormData:
    """The POSTed form, its body refused with 413 past ``limit`` bytes, strictly UTF-8."""
    body = await read_limited(request, limit, watch)
    return await parse_form(request, body, max_files=2, max_fields=20, max_part_size=limit)


def console_page(handler: Handler, body_limit: BodyLimit | None = None,
                 body_watch: BodyWatch | None = None) -> Endpoint:
    """Wrap ``handler`` with the session check and, for POST, the form and CSRF checks.

    ``body_watch`` makes a check that sees the body piece by piece as it arrives.
    """

    async def endpoint(request: Request) -> Response:
        session = await current_session(request)
        if session is None:
            return sign_in_redirect(request)
        form = FormData()
        if request.method == "POST":
            limit = body_limit(parts_of(request).runtime) if body_limit else SMALL_FORM_BYTES
            try:
                watch = body_watch(parts_of(request).runtime, request) if body_watch else None
                form = await read_form(request, limit, watch)
            except ApiError as exc:
                extra = dict(exc.extra)
                declared = ascii_int(request.headers.get("content-length", ""))
                if exc.error == "payload_too_large" and declared is not None:
                    extra["submitted_bytes"] = declared
                return refusal(request, session, exc.status, exc.error, exc.message, **extra)
            if not tokens_match(session.csrf_token, presented_csrf(request, form.get(CSRF_FIELD))):
                return refusal(request, session, 403, "csrf",
                               "This form is missing its security token or the token is"
                               " stale. Reload the page and try again.")
        try:
            return await handler(request, session, form)
        except Exception as exc:
            if not is_storage_error(exc):
                raise
            note_not_stored(request.url.path, exc)
            refused = not_stored()
            answer = refusal(request, session, refused.status, refused.error, refused.message)
            answer.headers["Retry-After"] = str(refused.retry_after)
            return answer

    return endpoint
