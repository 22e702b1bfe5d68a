"""``/inbox``: the reports waiting for their message (DLR-3, DLR-10), for people.

Counts per provider, then the waiting reports themselves, oldest first (or newest),
with what the provider sent (our ref, its own id, its status word and time), when
we received it, and when the reconciler tries to match it next. Dozens aged seconds
is a race being absorbed; thousands aged hours is a ref that was never ours.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from appliance.console_sessions import ConsoleSession
from appliance.reports.coverage import inbox_health
from appliance.reports.inbox_view import waiting_by_provider, waiting_reports
from appliance.store.connection import Connection
from appliance.web.pages.guard import console_page
from appliance.web.pages.render import page
from appliance.web.parts import parts_of

SHOWN = 200


async def inbox_page(request: Request, session: ConsoleSession, form: FormData) -> Response:
    appliance = parts_of(request).runtime
    now = appliance.now_ms()
    provider = request.query_params.get("provider", "")[:100] or None
    newest = request.query_params.get("order") == "newest"

    def read(c: Connection) -> dict[str, Any]:
        return {"health": inbox_health(c, now), "providers": waiting_by_provider(c),
                "reports": waiting_reports(c, provider, SHOWN, newest)}

    context = await appliance.store.readers.run(read)
    return page(request, "inbox.html", session, title="Report inbox", provider=provider or "",
                newest=newest, shown=SHOWN, now=now, **context)


def routes() -> list[BaseRoute]:
    return [Route("/inbox", console_page(inbox_page), methods=["GET"])]
