"""``/webhooks``: the status webhook outbox's health (OPS-5), for people.

Whether events are written, where they go (the URL without its query or password),
how many wait and since when, the last success and the last error, the backoff the
receiver is under; then the oldest waiting events with their attempts and errors.
*Try now* ends the backoff (after the receiver was fixed) instead of waiting for the
ladder's next step. The outbox is the appliance's, not one account's.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.console_sessions import ConsoleSession
from appliance.store.connection import Connection
from appliance.web.pages.guard import console_page
from appliance.web.pages.render import page
from appliance.web.parts import parts_of
from appliance.webhooks.outbox import outbox_health, try_now, waiting_events

SHOWN = 100


def shown_url(url: str | None) -> str:
    """The receiver's URL without what may be a credential (password, query)."""
    if not url:
        return ""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


async def webhooks_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    now = appliance.now_ms()

    def read(c: Connection) -> dict[str, Any]:
        return {"health": outbox_health(c, now), "events": waiting_events(c, SHOWN)}

    context = await appliance.store.readers.run(read)
    configured = appliance.settings.webhooks.configured
    return page(request, "webhooks.html", session, title="Status webhooks",
                configured=configured, url=shown_url(appliance.settings.webhooks.url),
                paused=context["health"].paused_until > now, now=now, shown=SHOWN,
                retried=request.query_params.get("retried") is not None, **context)


async def retry(request: Request, session: ConsoleSession, form: FormData) -> Response:
    parts = parts_of(request)
    now = parts.runtime.now_ms()
    await parts.runtime.store.writer.run(lambda c: try_now(c, now))
    if parts.webhooks is not None:
        parts.webhooks.try_now()
    return RedirectResponse("/webhooks?retried", status_code=303)


def routes() -> list[BaseRoute]:
    return [Route("/webhooks", console_page(webhooks_page), methods=["GET"]),
            Route("/webhooks/retry", console_page(retry), methods=["POST"])]
