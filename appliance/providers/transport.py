"""How submissions reach a provider: the transport, and a configured provider.

A request/response transport (the HTTP kinds' ``HttpTransport``) carries each
submission in its own request. A :class:`SessionTransport` holds a session open (SMPP's
bind) that carries submissions one way and reports and inbound messages the other:
the appliance attaches where what comes in is stored, starts it, and reads its
:class:`SessionState` for ``/metrics``, ``/readyz`` and the dashboard, whatever
protocol it speaks.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from appliance.config import ProviderSettings

from .callbacks import InboundReader, ReportReader
from .credit import CreditQuery
from .inbound_query import InboundQuery
from .outcome import Outcome, OutgoingMessage
from .status_query import StatusQuery


class Transport(ABC):
    """How submissions reach a provider, and what came of each.

    ``concurrency`` is how many submissions it can have in flight at once (the sender
    sizes its batches by it). :meth:`submit` never raises: every failure is an
    :class:`Outcome` (``RETRY`` when nothing left the process, ``UNCERTAIN`` when the
    provider may have the message).
    """

    concurrency: int = 1
    # Messages one submission may carry (:meth:`submit_batch`); 1 for a kind that takes
    # one message a request.
    batch_max: int = 1

    async def reserve(self, count: int = 1) -> None:
        """Wait until one more submission (of ``count`` messages) may go out at the
        provider's rate.

        The sender calls it before it marks a message ``SENDING`` and then calls
        :meth:`submit` at once, so no message waits for the rate once it is ``SENDING``
        (OPS-6: what a crash leaves ``SENDING`` is what was really on its way). A
        transport that paces inside :meth:`submit` (per segment) leaves it as is.
        """
        return None  # a hook with a default, not an abstract method

    @abstractmethod
    async def submit(self, msg: OutgoingMessage) -> Outcome:
        """Submit one message; pace it by the provider's rate (using a token taken by
        :meth:`reserve` if there is one)."""

    async def submit_batch(self, msgs: Sequence[OutgoingMessage]) -> list[Outcome]:
        """Submit messages of one text in one request where the kind takes many
        (:mod:`appliance.providers.batch`); one outcome per message, in order. By
        default one :meth:`submit` each."""
        return [await self.submit(m) for m in msgs]

    @abstractmethod
    async def close(self) -> None:
        """Release connections or end the session (after the last submission)."""

    async def exchange(self, request: httpx.Request) -> httpx.Response:
        """Carry one request that is not a submission (a status query, ROUTE-2) over
        the provider's connections and return its answer as it came; raises on a
        timeout or a connection that fails. Only request/response transports carry
        one."""
        raise NotImplementedError(f"{type(self).__name__} carries no requests of its own")

    def status(self) -> Mapping[str, float | str | bool]:
        """What the transport's state is now, for ``/metrics`` and ``/readyz``."""
        return {}


@dataclass(frozen=True)
class Provider:
    """A configured provider: how it is reached, and how its reports are read."""

    name: str
    kind: str
    settings: ProviderSettings
    transport: Transport
    # None for a provider that reports over its own session rather than by callback.
    reports: ReportReader | None
    # The provider itself drops a second submission of our ref: an uncertain send may
    # be resent.
    dedupes_on_ref: bool
    # Its reports carry only its own id: the sender records the id -> ref mapping.
    reports_by_provider_id_only: bool
    # It reports on every SMS part separately (Vonage, SMPP), rather than once for a
    # message whose parts it bills behind one id (Twilio, Infobip).
    reports_per_part: bool = False
    # How its inbound webhook is read; None for a provider whose inbound messages come
    # over its own session (SMPP ``deliver_sm``), or that has none.
    inbound: InboundReader | None = None
    # How it is asked about a message it has not reported (ROUTE-2); None for a kind
    # without a status API.
    status: StatusQuery | None = None
    # How it is asked for its account's credit; None for a kind without a balance API.
    credit: CreditQuery | None = None
    # How its inbound messages are fetched, for a provider that keeps them until asked;
    # None for one that pushes them (or has none).
    inbound_query: InboundQuery | None = None
    # The validity (ROUTE-4, seconds, least and most) its kind's field carries; None for
    # a kind without one (a message's validity is then kept by the sender only).
    validity_range_s: tuple[int, int] | None = None
    # The refusal codes its kind declares as "this route cannot" (ROUTE-3).
    route_refusals: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class LinkState:
    """One connection of a session (a session may bind one link or two)."""

    mode: str  # e.g. transceiver | transmitter | receiver
    bound: bool
    bound_since_ms: int | None
    smsc_system_id: str  # the name the other end gave itself when it bound
    last_error: str | None


@dataclass(frozen=True, slots=True)
class SessionState:
    """What a session shows of itself (for ``/metrics``, ``/readyz`` and the console)."""

    provider: str
    bound: bool  # every link of the session is bound
    bound_since_ms: int | None  # since when (the latest of its links' binds)
    window: int
    window_in_use: int  # submissions written and not yet answered
    rate_per_s: float  # the rate in force (lower than configured after throttling)
    throttled: int  # answers that said "too fast"
    reconnects: int  # bound links lost and opened again
    submitted: int  # submissions written
    accepted: int
    rejected: int
    retried: int  # RETRY outcomes (throttled or never written)
    uncertain: int
    delivers: int  # reports and inbound messages received over the session
    deliver_temp_errors: int  # of those, answered "try again" (not stored)
    links: tuple[LinkState, ...]


class SessionTransport(Transport):
    """A transport that holds a session open: submissions go one way, reports and
    inbound messages come the other.

    The appliance :meth:`attach` es where what comes in is stored (and what the session
    learnt in earlier runs), then :meth:`start` s it; :meth:`state` is read at any time.
    :meth:`begin_close` starts stopping it before the last submissions are waited for.
    """

    @abstractmethod
    def attach(self, sink: Any, evidence: Any | None = None) -> None:
        """Where what comes in over the session goes (the protocol's own sink)."""

    @abstractmethod
    async def start(self) -> None:
        """Open the session (and keep it open, reconnecting, until closed)."""

    @abstractmethod
    def state(self) -> SessionState:
        """The session now."""

    @property
    @abstractmethod
    def configured_rate_per_s(self) -> float:
        """The rate configured (the state's rate is the one in force)."""

    def begin_close(self) -> None:
        """Start stopping: nothing new is written. By default nothing to do."""
        return None
