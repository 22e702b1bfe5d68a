"""What an SMPP session shows of itself: the state every session transport shares
(:class:`appliance.providers.transport.SessionState`), what its intake stored, and what
its loop settled since start (for ``/metrics`` and the console)."""

from __future__ import annotations

from dataclasses import dataclass

from appliance.providers.transport import LinkState, SessionState

__all__ = ["IntakeCounts", "LinkState", "SessionState", "SessionTotals"]


@dataclass
class IntakeCounts:
    receipts: int = 0  # receipts stored (repeats included)
    receipts_applied: int = 0  # applied or kept as history at once
    receipts_waiting: int = 0  # filed, waiting for their part's id
    repeats: int = 0
    unreadable: int = 0  # kept raw, not read
    inbound: int = 0
    store_failures: int = 0  # units that failed: answered ESME_RX_T_APPN


@dataclass
class SessionTotals:
    """What the session's loop settled since start (:mod:`appliance.smpp.lifecycle`)."""

    late_recorded: int = 0
    late_given_up: int = 0
    orphans_matched: int = 0
    orphans_ambiguous: int = 0
