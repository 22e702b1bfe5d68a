"""``GET /api/stats``: coverage, delivery rate, inbox health, overdue, alerts.

Coverage, delivery rate, open-by-hour and overdue are the caller's account's own
messages; ``webhooks`` is the health of the caller's account's receiver (its own, else
the ``[webhooks]`` one: OPS-5, TEAM-2); the inbox (reports not yet matched to any
message) and the alerts are the appliance's. See
:mod:`appliance.ops.observability.summary`.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.ops.observability.summary import summary
from appliance.store.connection import Connection
from appliance.web.auth import require_account
from appliance.web.parts import parts_of
from appliance.webhooks.health import outbox_health
from appliance.webhooks.receivers import shown_receiver


async def show_stats(request: Request) -> Response:
    account = await require_account(request)
    appliance = parts_of(request).runtime
    now = appliance.now_ms()
    settings = appliance.settings

    def read(c: Connection) -> dict[str, Any]:  # one snapshot for every figure
        return {**summary(c, settings, now, account.id),
                "webhooks": outbox_health(c, now, shown_receiver(c, account.id)).as_json()}

    body = await appliance.store.readers.run(read)
    return JSONResponse(body)


def routes() -> list[BaseRoute]:
    return [Route("/api/stats", show_stats, methods=["GET"])]
