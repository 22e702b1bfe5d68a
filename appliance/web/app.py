"""Builds the Starlette application over the running :class:`~appliance.web.parts.Parts`.

Every route module exposes ``routes() -> list[BaseRoute]``; this module joins them,
adds the error handlers and the lifespan that starts and stops the runtime, and keeps
the parts where :func:`appliance.web.parts.parts_of` finds them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from appliance.refusals import Refused
from appliance.web.errors import ApiError, api_error
from appliance.web.parts import Parts

HTTP_ERRORS = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response()


async def _refused(request: Request, exc: Exception) -> Response:
    """A use case's refusal that reached no handler of its own: the API's JSON error."""
    assert isinstance(exc, Refused)
    return api_error(exc).response()


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, wrong method, a bad form) as JSON too."""
    assert isinstance(exc, HTTPException)
    error = HTTP_ERRORS.get(exc.status_code, "http_error")
    return JSONResponse({"error": error, "message": str(exc.detail)},
                        status_code=exc.status_code, headers=exc.headers)


def all_routes() -> list[BaseRoute]:
    from appliance.web import (
        api_campaigns,
        api_consents,
        api_imports,
        api_messages,
        api_ops,
        api_optout,
        api_stats,
        callbacks,
        inbound,
        openapi,
        pages,
    )

    # Callbacks first: the router tries routes in order, and reports are the busiest.
    routes: list[BaseRoute] = callbacks.routes()
    routes += api_ops.routes()
    routes += openapi.routes()
    routes += api_imports.routes()
    routes += api_stats.routes()
    routes += api_messages.routes()
    routes += api_campaigns.routes()
    routes += api_optout.routes()
    routes += api_consents.routes()
    routes += inbound.routes()
    routes += pages.routes()
    return routes


def build_app(parts: Parts) -> Starlette:
    runtime = parts.runtime

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        from appliance.web.callback_check import UNKNOWN_REPORT

        await runtime.start()
        try:
            yield
        finally:
            await runtime.stop()
            UNKNOWN_REPORT.flush()

    from appliance.ops.observability.request_middleware import RequestMiddleware
    from appliance.web.last_resort import LastResort

    app = Starlette(
        routes=all_routes(),
        exception_handlers={ApiError: _api_error, Refused: _refused,
                            HTTPException: _http_error},
        lifespan=lifespan,
        middleware=[Middleware(RequestMiddleware, metrics=parts.metrics),
                    Middleware(LastResort, budget=parts.body_budget)],
    )
    app.state.parts = parts
    return app
