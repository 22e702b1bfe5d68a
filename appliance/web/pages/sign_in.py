"""``/login`` and ``/logout``: signing in to the console and out again.

The password is checked with scrypt in a worker thread (an unknown name costs the
same time as a wrong password, so the answer does not tell which). Failed attempts
slow the next ones down per name and per address, few checks run at once, and each
form carries a fresh single-use token (:mod:`appliance.web.pages.sign_in_guard`). A
successful sign-in always starts a fresh session (no fixation); signing out deletes
the session row, so the old cookie is worthless even if it was copied.
"""

from __future__ import annotations

import anyio.to_thread
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.console_sessions import ConsoleSession, create_session, end_session
from appliance.sign_in_attempts import clear_failures, user_key
from appliance.store.connection import Connection
from appliance.users import User, absent_user_hash, user_for_sign_in, verify_password
from appliance.web.errors import ApiError
from appliance.web.pages.guard import (
    SMALL_FORM_BYTES,
    console_page,
    read_form,
    safe_next,
)
from appliance.web.pages.render import page
from appliance.web.parts import parts_of
from appliance.web.session import (
    CSRF_FIELD,
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    clear_session_cookie,
    current_session,
    set_session_cookie,
    set_sign_in_cookie,
)

MAX_FIELD = 1024


async def _sign_in_page(request: Request, status: int = 200, error: str = "",
                        name: str = "", next_path: str = "/", retry_after: int = 0
                        ) -> Response:
    """The form, always with a fresh token (in the page and in its cookie)."""
    parts = parts_of(request)
    token = (await parts.sign_in_guard.tokens()).issue(parts.runtime.now_ms())
    response = page(request, "login.html", None, status=status, sign_in_csrf=token,
                    error=error, name=name, next_path=next_path)
    set_sign_in_cookie(response, request, token)
    if retry_after:
        response.headers["Retry-After"] = str(retry_after)
    return response


async def _too_many(request: Request, name: str, next_path: str, retry_after: int
                    ) -> Response:
    return await _sign_in_page(
        request, 429, f"Too many failed sign-ins. Try again in {retry_after} s.",
        name, next_path, retry_after)


def _password_matches(found: tuple[User, str] | None, password: str) -> bool:
    stored = found[1] if found else absent_user_hash()
    return verify_password(stored, password) and found is not None


async def login_form(request: Request) -> Response:
    next_path = safe_next(request.query_params.get("next"))
    if await current_session(request) is not None:
        return RedirectResponse(next_path, status_code=303)
    return await _sign_in_page(request, next_path=next_path)


def _field(form: FormData, name: str) -> str:
    value = form.get(name)
    return value[:MAX_FIELD] if isinstance(value, str) else ""


async def login_submit(request: Request) -> Response:
    try:
        form = await read_form(request, SMALL_FORM_BYTES)
    except ApiError as exc:
        return await _sign_in_page(request, exc.status, exc.message)
    next_path = safe_next(_field(form, "next"))
    name = _field(form, "username").strip()
    password = _field(form, "password")
    parts = parts_of(request)
    appliance, guard = parts.runtime, parts.sign_in_guard
    if not await guard.redeem(request.cookies.get(SIGN_IN_COOKIE, ""),
                              _field(form, CSRF_FIELD)):
        return await _sign_in_page(request, 403, "The sign-in form expired. Please try again.",
                                   name, next_path)
    address = request.client.host if request.client else ""
    wait = await guard.retry_after_s(name, address)
    if wait:
        return await _too_many(request, name, next_path, wait)
    found = await appliance.store.readers.run(lambda c: user_for_sign_in(c, name))
    async with guard.hashing.turn() as admitted:
        if not admitted:
            return await _sign_in_page(
                request, 429, "Many sign-ins are being checked right now."
                " Please try again in a moment.", name, next_path, retry_after=1)
        # Others may have failed for this name while this attempt waited its turn.
        wait = await guard.retry_after_s(name, address)
        if wait:
            return await _too_many(request, name, next_path, wait)
        ok = await anyio.to_thread.run_sync(_password_matches, found, password)
    if found is None or not ok:
        await guard.failed(name, address)
        return await _sign_in_page(request, 401, "Wrong user name or password.", name, next_path)
    user = found[0]

    def signed_in(c: Connection) -> str:  # the name's failures are forgotten with it
        clear_failures(c, user_key(name))
        return create_session(c, user.id, appliance.now_ms())

    token = await appliance.store.writer.run(signed_in)
    response = RedirectResponse(next_path, status_code=303)
    set_session_cookie(response, request, token)
    response.delete_cookie(SIGN_IN_COOKIE, path="/login")
    return response


async def _logout_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    return page(request, "logout.html", session, title="Sign out")


async def _logout(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    token = request.cookies.get(SESSION_COOKIE, "")
    await appliance.store.writer.run(lambda c: end_session(c, token))
    response = RedirectResponse("/login", status_code=303)
    clear_session_cookie(response, request)
    return response


async def _home(request: Request, session: ConsoleSession, form: FormData) -> Response:
    """The console's front page is the delivery dashboard, as the README says: after
    sign-in (without a page to return to) and at ``/``."""
    return RedirectResponse("/dashboard", status_code=303)


def routes() -> list[BaseRoute]:
    return [
        Route("/", console_page(_home), methods=["GET"]),
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login_submit, methods=["POST"]),
        Route("/logout", console_page(_logout_page), methods=["GET"]),
        Route("/logout", console_page(_logout), methods=["POST"]),
    ]
