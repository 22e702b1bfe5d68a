"""``[[routes]]``: which providers a message may go through, in order (ROUTE-3).

Each route is a table of the array ``[[routes]]``::

    [[routes]]
    prefix = "+90"                      # E.164 prefix; "" matches every number
    type = "commercial"                 # optional: commercial | transactional
    providers = ["tr_main", "tr_backup"] # tried in order (configured providers)

The first route that matches a message wins (:mod:`appliance.sending.routes`). A route
with a ``type`` matches only messages of that type; one without matches every message.
Read strictly, as every other setting: an unknown key, a prefix that is not ``+`` and
digits, an unknown type, an empty list, a provider named twice or one that is not
configured are each one line naming the route by its place in the file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError, near

ROUTES = "routes"
ROUTE_TYPES = ("commercial", "transactional")  # as a message's "type" (IYS-1)
_PREFIX = re.compile(r"^(\+[0-9]{0,15})?$")
_KEYS = ("prefix", "type", "providers")


@dataclass(frozen=True)
class RouteSettings:
    """One ``[[routes]]`` table: the numbers it takes (``prefix``, ``""`` all), the
    messages (``type``: ``None`` every one), and its providers in the order tried."""

    prefix: str
    providers: tuple[str, ...]
    type: str | None = None

    def as_table(self) -> dict[str, Any]:
        """The route as the file writes it (``config check`` prints this)."""
        out: dict[str, Any] = {"prefix": self.prefix}
        if self.type is not None:
            out["type"] = self.type
        out["providers"] = list(self.providers)
        return out


def read_routes(where: str, value: Any) -> tuple[RouteSettings, ...]:
    """The ``[[routes]]`` array as read from a file (``where`` names the file)."""
    if not isinstance(value, list):
        raise ConfigError(f"{where}[[{ROUTES}]]: must be an array of tables ([[routes]])")
    return tuple(_route(f"{where}[[{ROUTES}]] #{i}: ", t) for i, t in enumerate(value, 1))


def _route(where: str, table: Any) -> RouteSettings:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}must be a table")
    for key in table:
        if key not in _KEYS:
            raise ConfigError(f"{where}{key}: unknown setting{near(str(key), list(_KEYS))}")
    prefix = table.get("prefix")
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        raise ConfigError(f"{where}prefix: must be an E.164 prefix such as \"+90\" (\"\""
                          f" matches every number), got {prefix!r}")
    kind = table.get("type")
    if kind is not None and kind not in ROUTE_TYPES:
        raise ConfigError(f"{where}type: must be one of {', '.join(ROUTE_TYPES)}"
                          f" (leave it out for every message), got {kind!r}")
    providers = table.get("providers")
    if not isinstance(providers, list) or not providers \
            or not all(isinstance(p, str) and p for p in providers):
        raise ConfigError(f"{where}providers: must be a list of provider names, tried in"
                          f" order, got {providers!r}")
    twice = sorted({p for p in providers if providers.count(p) > 1})
    if twice:
        raise ConfigError(f"{where}providers: {twice[0]!r} is named twice")
    return RouteSettings(prefix, tuple(providers), kind)


def check_routes(routes: tuple[RouteSettings, ...], configured: Mapping[str, Any]) -> None:
    """Every provider a route names must be configured (``config check`` and ``serve``
    refuse the file otherwise: a route to nowhere would hold its messages forever)."""
    known = ", ".join(configured) or "none"
    for i, route in enumerate(routes, 1):
        for name in route.providers:
            if name not in configured:
                raise ConfigError(f"[[{ROUTES}]] #{i} (prefix {route.prefix!r}) providers:"
                                  f" no provider named {name!r} (configured: {known})"
                                  + near(name, list(configured)))
