"""``/webhooks``: the health of the signed-in account's webhook receiver (OPS-5, TEAM-2).

The receiver is the account's own when it has one (``appliance account webhook``), else
the ``[webhooks]`` one that accounts without their own share. Whether events are
written, where they go (the URL without its query or password), how many wait for it
and since when, the last success and the last error, the backoff it is under; then its
oldest waiting events with their attempts and errors. *Try now* ends that receiver's
backoff (after it was fixed) instead of waiting for the ladder's next step.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.console_sessions import ConsoleSession
from appliance.store.connection import Connection
from appliance.web.pages.guard import console_page
from appliance.web.pages.render import page
from appliance.web.parts import parts_of
from appliance.webhooks.events import DEFAULT_RECEIVER
from appliance.webhooks.health import outbox_health, waiting_events
from appliance.webhooks.outbox import try_now
from appliance.webhooks.receivers import shown_receiver, shown_url

SHOWN = 100


async def webhooks_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    now = appliance.now_ms()

    def read(c: Connection) -> dict[str, Any]:
        receiver = shown_receiver(c, session.account_id)
        return {"own": receiver != DEFAULT_RECEIVER,
                "health": outbox_health(c, now, receiver),
                "events": waiting_events(c, SHOWN, receiver)}

    context = await appliance.store.readers.run(read)
    health = context["health"]
    configured = context["own"] or appliance.settings.webhooks.configured
    url = health.url if context["own"] else appliance.settings.webhooks.url
    return page(request, "webhooks.html", session, title="Status webhooks",
                configured=configured, url=shown_url(url),
                paused=context["health"].paused_until > now, now=now, shown=SHOWN,
                retried=request.query_params.get("retried") is not None, **context)


async def retry(request: Request, session: ConsoleSession, form: FormData) -> Response:
    parts = parts_of(request)
    now = parts.runtime.now_ms()

    def unit(c: Connection) -> int:
        receiver = shown_receiver(c, session.account_id)
        try_now(c, now, receiver)
        return receiver

    receiver = await parts.runtime.store.writer.run(unit)
    if parts.webhooks is not None:
        parts.webhooks.try_now(receiver)
    return RedirectResponse("/webhooks?retried", status_code=303)


def routes() -> list[BaseRoute]:
    return [Route("/webhooks", console_page(webhooks_page), methods=["GET"]),
            Route("/webhooks/retry", console_page(retry), methods=["POST"])]
