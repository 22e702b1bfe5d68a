"""Builds the Starlette application over the running :class:`~appliance.web.parts.Parts`.

Every route module exposes ``routes() -> list[BaseRoute]``; this module joins them,
adds the error handlers and the lifespan that starts and stops the runtime, and keeps
the parts where :func:`appliance.web.parts.parts_of` finds them.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from appliance.refusals import Refused
from appliance.web.deferred_routes import DeferredRoutes
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


# The route modules, in the order the router tries them. Callbacks first: the router
# tries routes in order, and reports are the busiest.
ROUTE_MODULES = (
    "appliance.web.callbacks",
    "appliance.web.api_ops",
    "appliance.web.openapi",
    "appliance.web.api_imports",
    "appliance.web.api_stats",
    "appliance.web.api_messages",
    "appliance.web.api_campaigns",
    "appliance.web.api_optout",
    "appliance.web.api_consents",
    "appliance.web.inbound",
    "appliance.web.pages",
)
# Imported with the server: the reports' routes and the probes (``/healthz``).
EAGER_MODULES = frozenset({"appliance.web.callbacks", "appliance.web.api_ops"})


def all_routes() -> list[BaseRoute]:
    """Every route, each module imported now."""
    routes: list[BaseRoute] = []
    for module in ROUTE_MODULES:
        routes += importlib.import_module(module).routes()
    return routes


def served_routes() -> list[BaseRoute]:
    """The routes a server starts with: the same as :func:`all_routes`, in the same
    order, except that the modules outside :data:`EAGER_MODULES` are imported at the
    first request that reaches them (:class:`DeferredRoutes`)."""
    routes: list[BaseRoute] = []
    for module in ROUTE_MODULES:
        if module in EAGER_MODULES:
            routes += importlib.import_module(module).routes()
        else:
            routes.append(DeferredRoutes.of_module(module))
    return routes


def build_app(parts: Parts) -> ASGIApp:
    """The Starlette app of every route, with ``/callbacks/{provider}`` taken ahead of
    it (:class:`~appliance.web.callback_endpoint.CallbackLane`: a report flood does not
    pay for Starlette's layers; see :mod:`appliance.web.callback_endpoint`)."""
    from appliance.web.callback_endpoint import CallbackLane
    from appliance.web.callbacks import own_port

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
        routes=served_routes(),
        exception_handlers={ApiError: _api_error, Refused: _refused,
                            HTTPException: _http_error},
        lifespan=lifespan,
        middleware=[Middleware(RequestMiddleware, metrics=parts.metrics),
                    Middleware(LastResort, budget=parts.body_budget)],
    )
    app.state.parts = parts
    app.state.callbacks = endpoint = own_port(parts)
    return CallbackLane(app, endpoint)
