"""Builds the Starlette application over an :class:`Appliance`.

Every route module exposes ``routes() -> list[BaseRoute]``; this module joins them,
adds the error handlers and the lifespan that starts and stops the scheduler.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from appliance.service import Appliance
from appliance.web.errors import ApiError


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


def all_routes() -> list[BaseRoute]:
    from appliance.web import (
        api_imports,
        api_messages,
        api_ops,
        api_optout,
        api_stats,
        callbacks,
        inbound,
        pages,
    )

    routes: list[BaseRoute] = api_ops.routes()
    routes += api_imports.routes()
    routes += callbacks.routes()
    routes += api_stats.routes()
    routes += api_messages.routes()
    routes += api_optout.routes()
    routes += inbound.routes()
    routes += pages.routes()
    return routes


def build_app(appliance: Appliance) -> Starlette:
    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await appliance.start()
        try:
            yield
        finally:
            await appliance.stop()

    from appliance.ops.metrics import metrics_for
    from appliance.ops.request_middleware import RequestMiddleware

    app = Starlette(
        routes=all_routes(),
        exception_handlers={ApiError: _api_error},
        lifespan=lifespan,
        middleware=[Middleware(RequestMiddleware, metrics=metrics_for(appliance))],
    )
    app.state.appliance = appliance
    return app
