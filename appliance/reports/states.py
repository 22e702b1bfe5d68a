"""Message states, and newer wins (DLR-5): may a report change a message's state?

Reports arrive twice, late and out of order. The rule, applied to the message's
current state and the provider time of the report that set it:

* While the message is ``QUEUED`` or ``SENDING`` the report waits: the sender has not
  recorded its submission yet, and applying now would race the sender's own update.
  The sender applies what waits right after it commits (DLR-6).
* After submission (``SUBMITTED``, ``RETRY``, ``UNCERTAIN``) any report applies: it is
  the first word from the provider (and proof that an uncertain send went out).
* ``UNKNOWN`` (our cut-off, DLR-7) gives way to any final report from the provider,
  never to an intermediate one.
* Otherwise a final state never gives way to an intermediate one; an intermediate
  gives way to a final one. Between two finals or two intermediates the provider's
  time decides; where it ties or either side has none (``0``), a fixed precedence
  decides, so two reports give the same answer whichever arrives first.

A report that does not apply is still kept in the message's history (``STALE``).
"""

from __future__ import annotations

from enum import StrEnum

from appliance.states import (
    AWAITING_REPORT,
    CUT_OFF,
    FINAL_STATES,
    NEVER_SENT,
    NOT_YET_SENT,
    OPEN_AFTER_SUBMIT,
    REPORTED_FINAL,
    REPORTED_INTERMEDIATE,
)

__all__ = ["AWAITING_REPORT", "CUT_OFF", "FINAL_STATES", "NEVER_SENT", "NOT_YET_SENT",
           "OPEN_AFTER_SUBMIT", "REPORTED_FINAL", "REPORTED_INTERMEDIATE", "Verdict",
           "decide", "is_final"]

_RANK = {state: rank for rank, state in enumerate(reversed(REPORTED_INTERMEDIATE + REPORTED_FINAL))}


class Verdict(StrEnum):
    APPLY = "APPLY"  # the report sets the message's state
    STALE = "STALE"  # older or weaker: recorded in history only
    WAIT = "WAIT"  # the message is not ready for reports yet


def is_final(state: str) -> bool:
    return state in FINAL_STATES


def decide(current: str, current_at: int, reported: str, reported_at: int) -> Verdict:
    """The verdict on a report of state ``reported`` at provider time ``reported_at``
    for a message in ``current``, set by a report at provider time ``current_at``
    (``0``: no time known)."""
    if current in NOT_YET_SENT:
        return Verdict.WAIT
    if current in AWAITING_REPORT:
        return Verdict.APPLY
    if current == CUT_OFF:
        return Verdict.APPLY if reported in REPORTED_FINAL else Verdict.STALE
    if current not in _RANK or reported not in _RANK:
        # A state this module does not know (on either side) is never overwritten.
        return Verdict.STALE
    current_final = current in REPORTED_FINAL
    reported_final = reported in REPORTED_FINAL
    if current_final != reported_final:
        return Verdict.APPLY if reported_final else Verdict.STALE
    if current_at and reported_at and current_at != reported_at:
        return Verdict.APPLY if reported_at > current_at else Verdict.STALE
    return Verdict.APPLY if _RANK[reported] > _RANK[current] else Verdict.STALE
