"""The routes a server starts with (most of them imported at their first request) choose
the same route as the flat list for every request: the same full match, else the same
path matched with another method (the ``405``), else none (the ``404``)."""

from __future__ import annotations

import re
from typing import Any

from starlette.routing import BaseRoute, Match, Mount, Route

from appliance.web.app import all_routes, served_routes
from appliance.web.deferred_routes import ROUTE_KEY, DeferredRoutes

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH")


def concrete(path: str) -> str:
    """A path a route's pattern matches: each parameter filled in for its type."""
    path = re.sub(r"\{[^}:]+:int\}", "7", path)
    path = re.sub(r"\{[^}:]+:path\}", "a/b.txt", path)
    return re.sub(r"\{[^}]+\}", "x7", path)


def key(route: BaseRoute) -> tuple[Any, ...]:
    if isinstance(route, Route):
        return ("route", route.path, tuple(sorted(route.methods or ())), route.name)
    if isinstance(route, Mount):
        return ("mount", route.path)
    raise AssertionError(f"unexpected route {route!r}")


def choose(routes: list[BaseRoute], method: str, path: str) -> tuple[Match, Any]:
    """Starlette's router's choice: the first full match, else the first partial one."""
    scope = {"type": "http", "method": method, "path": path, "root_path": "",
             "headers": [], "query_string": b""}
    partial = None
    for route in routes:
        match, child = route.matches(scope)
        chosen = child.get(ROUTE_KEY, route) if isinstance(route, DeferredRoutes) else route
        if match is Match.FULL:
            return Match.FULL, key(chosen)
        if match is Match.PARTIAL and partial is None:
            partial = key(chosen)
    return (Match.PARTIAL, partial) if partial is not None else (Match.NONE, None)


def test_every_request_reaches_the_route_the_flat_list_gives_it() -> None:
    flat = all_routes()
    served = served_routes()
    assert any(isinstance(r, DeferredRoutes) for r in served)
    paths = {concrete(r.path) for r in flat if isinstance(r, Route | Mount)}
    paths |= {"/static/app.css", "/nowhere", "/api/nowhere", "/callbacks/",
              "/callbacks/gw/extra"}
    asked = 0
    for path in sorted(paths):
        for method in METHODS:
            assert choose(served, method, path) == choose(flat, method, path), (method, path)
            asked += 1
    assert asked > 100
    assert all(r.loaded for r in served if isinstance(r, DeferredRoutes))


def test_a_group_is_loaded_by_the_first_request_that_reaches_it() -> None:
    served = served_routes()
    deferred = [r for r in served if isinstance(r, DeferredRoutes)]
    assert deferred and not any(r.loaded for r in deferred)
    # /healthz is taken by a route imported with the server: no group is asked.
    assert choose(served, "GET", "/healthz")[0] is Match.FULL
    assert not any(r.loaded for r in deferred)
    # A URL built by a name of the group loads the group.
    pages = next(r for r in deferred if r.name == "appliance.web.pages")
    assert str(pages.url_path_for("static", path="/app.css")) == "/static/app.css"
    assert pages.loaded
