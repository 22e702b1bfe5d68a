"""What a session shows of itself (for ``/metrics``, ``/readyz`` and the console)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LinkState:
    mode: str  # transceiver | transmitter | receiver
    bound: bool
    bound_since_ms: int | None
    smsc_system_id: str
    last_error: str | None


@dataclass(frozen=True, slots=True)
class SessionState:
    provider: str
    bound: bool  # every link of the session is bound
    bound_since_ms: int | None  # since when (the latest of its links' binds)
    window: int
    window_in_use: int  # submit_sm written and not yet answered
    rate_per_s: float  # the rate in force (lower than configured after throttling)
    throttled: int  # ESME_RTHROTTLED / ESME_RMSGQFUL answers
    reconnects: int  # bound links lost and opened again
    submitted: int  # submit_sm written
    accepted: int
    rejected: int
    retried: int  # RETRY outcomes (throttled or never written)
    uncertain: int
    delivers: int  # deliver_sm received
    deliver_temp_errors: int  # answered ESME_RX_T_APPN (not stored)
    links: tuple[LinkState, ...]
