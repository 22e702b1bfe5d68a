"""A group of routes whose module is imported at the first request that reaches it.

The console's pages (with Jinja2) and the larger API modules are a fifth of a start's
imports, and a server is ready, and answers ``/healthz``, before anyone opens a page
(docs/benchmarks.md, "Operations"). :class:`DeferredRoutes` stands in the route list
where the module's routes stand, and answers the router exactly as those routes would
in that place: the router takes the first route that matches fully, else the first
that matches the path but not the method (a ``405``); a group gives its first full
match, else its first partial one, which is the same choice over the flat list. The
module is imported on the event loop, once, by the first request the router asks the
group about (a request no route before it took), or by the first ``url_path_for``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from starlette.datastructures import URLPath
from starlette.routing import BaseRoute, Match, NoMatchFound
from starlette.types import Receive, Scope, Send

# The scope's entry naming the route that matched: the router sets it to the group, then
# merges the group's answer in, so the request's metrics and handling see the route
# itself, as with the flat list.
ROUTE_KEY = "route"


class DeferredRoutes(BaseRoute):
    """The routes ``load()`` returns, loaded when first asked for."""

    def __init__(self, name: str, load: Callable[[], list[BaseRoute]]) -> None:
        self.name = name
        self._load = load
        self._routes: list[BaseRoute] | None = None

    @classmethod
    def of_module(cls, module: str) -> DeferredRoutes:
        """The routes of ``module``'s ``routes()``."""

        def load() -> list[BaseRoute]:
            routes: list[BaseRoute] = importlib.import_module(module).routes()
            return routes

        return cls(module, load)

    @property
    def loaded(self) -> bool:
        return self._routes is not None

    @property
    def routes(self) -> list[BaseRoute]:
        if self._routes is None:
            self._routes = self._load()
        return self._routes

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        partial: tuple[BaseRoute, Scope] | None = None
        for route in self.routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                return Match.FULL, {**child, ROUTE_KEY: route}
            if match is Match.PARTIAL and partial is None:
                partial = (route, child)
        if partial is not None:
            return Match.PARTIAL, {**partial[1], ROUTE_KEY: partial[0]}
        return Match.NONE, {}

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        route: BaseRoute = scope[ROUTE_KEY]
        await route.handle(scope, receive, send)

    def url_path_for(self, name: str, /, **path_params: object) -> URLPath:
        for route in self.routes:
            try:
                return route.url_path_for(name, **path_params)
            except NoMatchFound:
                pass
        raise NoMatchFound(name, path_params)

    def __repr__(self) -> str:
        return f"DeferredRoutes({self.name!r}, loaded={self.loaded})"
