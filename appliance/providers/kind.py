"""A provider kind, declared once: what every other part reads instead of its name.

Each kind module exports one :class:`ProviderKind`, and one list names them all
(:data:`appliance.provider_kinds.KINDS`). From the declarations alone the settings check
and mask a provider table and redact its secrets (:mod:`appliance.config.options`),
the registry builds a provider, the callbacks and the inbound routes read what it
sends, and the sessions are found for ``/metrics``, ``/readyz`` and the dashboard. No
other module names a kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from appliance.config import SHARED_PROVIDER_SETTINGS, Option, ProviderSettings
from appliance.message_text.segments import STANDARD, Counting

from .adapter import ProviderAdapter
from .callbacks import InboundReader, ReportReader
from .transport import Provider, SessionTransport


class Shape(StrEnum):
    """How a kind talks to its provider."""

    REQUEST = "request"  # a request per submission; reports and inbound by callback
    SESSION = "session"  # a bound session carries submissions, reports and inbound


@dataclass(frozen=True)
class BuildContext:
    """What building a provider may need beyond its table."""

    submit_timeout_s: float
    now_ms: Callable[[], int] | None = None
    # Option names of the other kinds of the same shape: tolerated in this table (a
    # table copied from one HTTP kind to another keeps working), never read.
    tolerated: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ProviderKind:
    """One provider kind.

    ``options``: the keys of its table beyond the shared settings (credentials
    included), with their types, defaults and which are secret; a kind may declare any
    of its own. ``settings``: which of the shared settings
    (:data:`~appliance.config.SHARED_PROVIDER_SETTINGS`) it reads. ``build``: the
    configured provider from a table (:class:`~appliance.config.ConfigError` for a bad
    one). ``check``: what the provider would refuse in this configuration (MSG-7), one
    line each, given the callback URL; raises ``ConfigError`` for a bad table.
    ``inbound``: the reader of its inbound webhook, over its report reader (``None``:
    none, or inbound comes over its session). ``many_per_request``: one request may
    carry many messages. ``status_query``: the provider can be asked a message's status
    (``pull_by_default``: it is, unless its table says ``pull = false``).
    ``inbound_query``: its inbound messages are fetched by asking
    (:class:`~appliance.providers.inbound_query.InboundQuery`), not pushed.
    ``counting``: the Turkish tables it can signal (a kind with some takes
    ``national_language``) and how it counts parts (ENC-1: the parts shown at acceptance
    are those it bills; :class:`~appliance.message_text.segments.Counting`).
    ``validity_range_s``: the validity (ROUTE-4, seconds) its API's own field can carry,
    least and most; ``None``: it has none, so a message's validity is kept here only.
    ``route_refusals``: the refusal codes (:attr:`~.outcome.Outcome.code`) that mean
    "this route cannot" (ROUTE-3: the destination or its network is not served): a
    message of a ``[[routes]]`` route refused so moves on to the route's next provider.
    """

    name: str
    shape: Shape
    build: Callable[[ProviderSettings, BuildContext], Provider]
    check: Callable[[ProviderSettings, str, BuildContext], list[str]]
    options: tuple[Option, ...] = ()
    settings: frozenset[str] = field(default_factory=lambda: frozenset(SHARED_PROVIDER_SETTINGS))
    inbound: Callable[[ReportReader], InboundReader] | None = None
    many_per_request: bool = False
    status_query: bool = False
    # Whether a provider of a kind that can be asked is asked when its table leaves
    # ``pull`` unset (``smpp``: no, many SMSCs do not answer ``query_sm``).
    pull_by_default: bool = True
    inbound_query: bool = False
    # The Turkish tables it can signal and how it counts parts (ENC-1).
    counting: Counting = STANDARD
    validity_range_s: tuple[int, int] | None = None
    route_refusals: frozenset[str] = frozenset()
    # The provider's published limit of requests a second (sends and pulls together):
    # the default of a table's ``requests_per_s``; 0 when it publishes none.
    requests_per_s: float = 0.0
    # The provider's published limit of status queries a second (the puller's asks):
    # the puller never asks faster, whatever ``pull_rate_per_s`` says; 0: none
    # published (Netgsm 10 a minute, Verimor 20 a minute).
    status_queries_per_s: float = 0.0
    # A request kind's wire format and report reader (None for a session kind).
    adapter: type[ProviderAdapter] | None = None
    # A session kind's own ``/metrics`` families over its sessions (by provider name),
    # beside what every session shows (prometheus_client ``Metric`` values).
    metrics: Callable[[Mapping[str, SessionTransport]], Iterator[Any]] | None = None

    @property
    def national_language(self) -> bool:
        """It can send national language shift tables (``national_language``)."""
        return bool(self.counting.tables)

    def option_names(self) -> frozenset[str]:
        return frozenset(o.name for o in self.options)


def by_name(kinds: Iterable[ProviderKind]) -> Mapping[str, ProviderKind]:
    """The kinds by name; two of one name is a mistake in the registry."""
    out: dict[str, ProviderKind] = {}
    for kind in kinds:
        if kind.name in out:
            raise ValueError(f"provider kind {kind.name!r} declared twice")
        out[kind.name] = kind
    return out
