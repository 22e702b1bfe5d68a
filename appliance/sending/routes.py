"""Routes (ROUTE-3): which provider a message goes through, and which is next.

``[[routes]]`` (:mod:`appliance.config.routes`) map a destination prefix, and optionally
a message type, to providers in order; the first route that matches wins. Without routes
nothing changes: the request's provider, else ``[sending] default_provider``. With
routes, a request that names ``"provider"`` pins the message there (it never moves), and
a message no route matches goes to the default provider (no route: it never moves).

A provider whose live delivery fell is *lowered* (:mod:`appliance.sending.provider_health`):
a route tries it after the others, except for 1 message in ``[sending] health_trickle``,
which still goes to it first so that its recovery can be seen. Which messages those are
is decided by the ref's last random bits for a campaign's messages (refs made together
count up by one, so the share is exact over a chunk) and by a random draw for a single
message, in every process, with no counter to share.

The next provider of a message that may move (:mod:`appliance.sending.failover`) is the
first of its route's order, as lowering has it now, that it has not already left.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from appliance.config import Settings
from appliance.config.routes import RouteSettings
from appliance.sending.checks import check_provider
from appliance.sending.refs import ALPHABET


@dataclass(frozen=True)
class Choice:
    """Where a new message goes: its provider, and the prefix of the route that chose
    it (``None``: no route did, so it never moves)."""

    provider: str
    route: str | None


def trickle_ticket(ref: str) -> int:
    """A number from the ref's last random bits: refs made together count up by one."""
    value = 0
    for ch in ref[-4:]:
        value = value * 32 + ALPHABET.index(ch)
    return value


class RouteTable:
    """The routes of the settings, first match wins."""

    def __init__(self, settings: Settings) -> None:
        self.routes: tuple[RouteSettings, ...] = settings.routes
        self.default = settings.default_provider
        self.trickle = settings.sending.health_trickle

    def __bool__(self) -> bool:
        return bool(self.routes)

    def match(self, msisdn: str, message_type: str | None) -> RouteSettings | None:
        """The first route whose prefix starts ``msisdn`` and whose type, when it has
        one, is the message's."""
        for route in self.routes:
            if msisdn.startswith(route.prefix) and (route.type is None
                                                    or route.type == message_type):
                return route
        return None

    def order(self, route: RouteSettings, lowered: Collection[str],
              ticket: int | None = None) -> list[str]:
        """The route's providers as tried now: the lowered ones after the others; for a
        ``ticket`` that draws the trickle, the lowered ones first."""
        low = [p for p in route.providers if p in lowered]
        if not low or len(low) == len(route.providers):
            return list(route.providers)
        rest = [p for p in route.providers if p not in lowered]
        if ticket is not None and ticket % self.trickle == 0:
            return low + rest
        return rest + low

    def choose(self, msisdn: str, message_type: str | None, named: str | None,
               lowered: Collection[str], ticket: int) -> Choice:
        """Where a new message goes: ``named`` when the request names a provider (pinned),
        else its route's first provider now (``ticket``: :func:`trickle_ticket` of its
        ref, or any number drawn at random), else the default provider."""
        if named is not None:
            return Choice(named, None)
        route = self.match(msisdn, message_type)
        if route is None:
            return Choice(self.default, None)
        return Choice(self.order(route, lowered, ticket)[0], route.prefix)

    def next_provider(self, msisdn: str, message_type: str | None, current: str,
                      left: Collection[str], lowered: Collection[str]) -> str | None:
        """The provider a message of a route moves to from ``current``: the first of its
        route's order now that is neither ``current`` nor one it has left; ``None``
        when there is none (it stays, and waits for ``current`` as without routes)."""
        route = self.match(msisdn, message_type)
        if route is None:
            return None
        for name in self.order(route, lowered):
            if name != current and name not in left:
                return name
        return None


def route_of(settings: Settings, lowered: Collection[str], named: Any, msisdn: str,
             message_type: str | None) -> Choice:
    """Where a single message of a request goes: the provider it names (checked:
    ``unknown_provider``), else its route's choice now, else the default provider
    (``no_provider`` when none is configured)."""
    table = RouteTable(settings)
    pinned = check_provider(settings, named) if named is not None or not table else None
    return table.choose(msisdn, message_type, pinned, lowered,
                        random.randrange(1 << 20))
