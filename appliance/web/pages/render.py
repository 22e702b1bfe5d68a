"""Rendering console pages: the Jinja2 environment, its filters and the page headers.

Autoescaping is on for every template, so anything a user or a provider sent (list
names, message bodies, rejected lines, report statuses) is shown as text. Every page
carries a Content-Security-Policy that allows only the appliance's own scripts and
styles, and is never cached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse

from appliance.clock import iso
from appliance.console_sessions import ConsoleSession
from appliance.web.session import CSRF_FIELD

WEB_DIR = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = WEB_DIR / "templates"
STATIC_DIR = WEB_DIR / "static"

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self';"
        " connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def when(ms: int | None) -> str:
    """Epoch milliseconds as ``2026-11-30 18:35:05 UTC``; a dash for none."""
    text = iso(ms)
    if text is None or not ms:
        return "–"
    return text[:10] + " " + text[11:19] + " UTC"


def isotime(text: str | None) -> str:
    """An API time string (``2026-11-30T18:35:05.123Z``) as ``2026-11-30 18:35:05 UTC``."""
    if not text:
        return "–"
    return text[:10] + " " + text[11:19] + " UTC"


def duration(seconds: float | int | None) -> str:
    """A short human duration: ``42 s``, ``3 min 5 s``, ``2 h 10 min``, ``3 d 4 h``."""
    if seconds is None:
        return "–"
    s = round(float(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    if s < 86400:
        return f"{s // 3600} h {s % 3600 // 60} min"
    return f"{s // 86400} d {s % 86400 // 3600} h"


def number(value: int | float | None) -> str:
    """Thousands separated by a thin space: ``20 000``."""
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.1f}".replace(",", "\u2009")
    return f"{int(value):,}".replace(",", "\u2009")


def hours(value: float | None) -> str:
    """A number of hours without a useless decimal: ``6 h``, ``1.5 h``."""
    if value is None:
        return "–"
    return f"{value:g} h"


def percent(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.1f} %"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(when=when, isotime=isotime, duration=duration, number=number,
                       percent=percent, hours=hours)
    env.globals["csrf_field"] = CSRF_FIELD
    return env


ENV = _environment()


def page(request: Request, template: str, session: ConsoleSession | None,
         status: int = 200, **context: Any) -> HTMLResponse:
    """Render ``template`` with the session (for the header and CSRF field) and ``context``."""
    body = ENV.get_template(template).render(
        session=session,
        csrf_token=session.csrf_token if session else "",
        path=request.url.path,
        **context,
    )
    return HTMLResponse(body, status_code=status, headers=PAGE_HEADERS)


def wants_json(request: Request) -> bool:
    """Whether the console's script asked (it sends ``Accept: application/json``)."""
    return request.headers.get("accept", "").startswith("application/json")


def json_answer(data: dict[str, Any], status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers={"Cache-Control": "no-store"})
