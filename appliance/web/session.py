"""Console sign-in sessions, the session cookie and CSRF tokens.

A session is a random token in an ``HttpOnly``, ``SameSite=Lax`` cookie (``Secure``
when the console is reached over https, or ``public_url`` is https). The store keeps
only the token's sha256 (table ``sessions``), so a copy of the database does not
sign anyone in. Each session has its own CSRF token, which every console form
carries as the ``csrf_token`` field (or the ``X-CSRF-Token`` header); a POST
without the right one is refused. Before sign-in there is no session, so the sign-in
form is protected by a double-submit token held in a short-lived cookie (a fresh,
server-signed, single-use one per form: :mod:`appliance.web.pages.sign_in_guard`).
"""

from __future__ import annotations

import hmac

from starlette.requests import Request
from starlette.responses import Response

from appliance.console_sessions import (
    MAX_TOKEN,
    SESSION_TTL_MS,
    ConsoleSession,
    session_for,
)
from appliance.web.parts import parts_of

SESSION_COOKIE = "appliance_session"
SIGN_IN_COOKIE = "appliance_signin"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
SIGN_IN_TTL_S = 3600
_UNSET = object()


def tokens_match(expected: str, presented: str | None) -> bool:
    if not presented or not expected or len(presented) > MAX_TOKEN:
        return False
    return hmac.compare_digest(expected.encode("utf-8"), presented.encode("utf-8"))


async def current_session(request: Request) -> ConsoleSession | None:
    """The signed-in session of this request, or None (looked up once per request)."""
    cached = getattr(request.state, "console_session", _UNSET)
    if cached is None or isinstance(cached, ConsoleSession):
        return cached
    token = request.cookies.get(SESSION_COOKIE, "")
    session = None
    if token:
        appliance = parts_of(request).runtime
        now = appliance.now_ms()
        session = await appliance.store.readers.run(lambda c: session_for(c, token, now))
    request.state.console_session = session
    return session


def cookie_secure(request: Request) -> bool:
    """Whether cookies get ``Secure``: the request came over https, or we are public at https."""
    public_url = parts_of(request).runtime.settings.public_url
    return request.url.scheme == "https" or public_url.lower().startswith("https://")


def set_session_cookie(response: Response, request: Request, token: str) -> None:
    response.set_cookie(SESSION_COOKIE, token, max_age=SESSION_TTL_MS // 1000, path="/",
                        httponly=True, samesite="lax", secure=cookie_secure(request))


def clear_session_cookie(response: Response, request: Request) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax",
                           secure=cookie_secure(request))


def set_sign_in_cookie(response: Response, request: Request, token: str) -> None:
    response.set_cookie(SIGN_IN_COOKIE, token, max_age=SIGN_IN_TTL_S, path="/login",
                        httponly=True, samesite="lax", secure=cookie_secure(request))


def presented_csrf(request: Request, form_value: object) -> str | None:
    """The CSRF token a request carries: the form field, else the header."""
    if isinstance(form_value, str) and form_value:
        return form_value
    return request.headers.get(CSRF_HEADER)
