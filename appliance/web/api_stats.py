"""``GET /api/stats``: coverage, delivery rate, inbox health, overdue, alerts.

Coverage, delivery rate, open-by-hour and overdue are the caller's account's own
messages; the inbox (reports not yet matched to any message) and the alerts are the
appliance's. See :mod:`appliance.reports.summary`.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from appliance.reports.summary import summary
from appliance.service import Appliance
from appliance.web.auth import require_account


async def show_stats(request: Request) -> Response:
    account = await require_account(request)
    appliance: Appliance = request.app.state.appliance
    now = appliance.now_ms()
    settings = appliance.settings
    body = await appliance.store.readers.run(lambda c: summary(c, settings, now, account.id))
    return JSONResponse(body)


def routes() -> list[BaseRoute]:
    return [Route("/api/stats", show_stats, methods=["GET"])]
