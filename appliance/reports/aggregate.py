"""A message's state from its parts' states (MSG-4): the one place it is decided.

A message travels as one or more parts, and the provider may report on each part
separately (Vonage, SMPP) or on all of them behind one id (Twilio, Infobip: one part
row). Newer-wins (:func:`appliance.reports.states.decide`) holds per part; the message's
state is then a function of the set of its parts' states, never of the order in which
reports arrived:

* **final** only when every part is final (a reported final state, ``REJECTED`` at
  submission, or ``UNKNOWN`` from the cut-off);
* **DELIVERED** only when every part is ``DELIVERED``;
* otherwise the **worst** final state among the parts, in :data:`FINAL_PRECEDENCE`:
  ``FAILED`` before ``REJECTED`` before ``EXPIRED`` before ``UNKNOWN``. ``REJECTED`` (the
  provider refused a part, at submission or in a report) sits right after ``FAILED``:
  like ``FAILED`` it is a definite verdict that the text did not arrive whole, and
  unlike ``EXPIRED`` or ``UNKNOWN`` nobody is still trying. ``FAILED`` goes first
  because a message of which some part was sent and failed was paid for and not
  delivered, which is what an operator looks for first;
* while some part is open, the message is as far along as its least advanced part, in
  :data:`OPEN_PRECEDENCE`: ``RETRY`` (a part still to be sent: the sender's state),
  ``UNCERTAIN`` (a part may or may not have been taken), ``SUBMITTED``, ``ACCEPTED``,
  ``ENROUTE``.

A single-part message therefore has exactly its part's state. Pure functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from appliance.reports.states import CUT_OFF, FINAL_STATES, NEVER_SENT

# Worst first: the state of a message whose parts are all final.
FINAL_PRECEDENCE = ("FAILED", "REJECTED", "EXPIRED", CUT_OFF, "DELIVERED")
# Least advanced first: the state of a message with an open part.
OPEN_PRECEDENCE = ("RETRY", "UNCERTAIN", "SUBMITTED", "ACCEPTED", "ENROUTE")

# CANCELLED is a message's state only (never sent): no part of it ever went out.
assert set(FINAL_PRECEDENCE) == FINAL_STATES - {NEVER_SENT}


def _final_rank(state: str) -> int:
    return FINAL_PRECEDENCE.index(state)


def _open_rank(state: str) -> tuple[int, str]:
    # A state this module does not know ranks after the known ones, by name, so the
    # answer stays a function of the set of states.
    if state in OPEN_PRECEDENCE:
        return (OPEN_PRECEDENCE.index(state), "")
    return (len(OPEN_PRECEDENCE), state)


def message_state(states: Iterable[str]) -> str:
    """The message's state from its parts' states (at least one)."""
    found = list(states)
    if not found:
        raise ValueError("a message has at least one part")
    if all(s in FINAL_STATES for s in found):
        return min(found, key=_final_rank)
    return min((s for s in found if s not in FINAL_STATES), key=_open_rank)


@dataclass(frozen=True)
class PartView:
    """What the aggregate reads of one part."""

    part: int
    state: str
    state_at: int = 0  # provider time of the report that set it, 0 = none
    error: str | None = None


@dataclass(frozen=True)
class Aggregate:
    state: str
    final: bool
    state_at: int  # the latest provider time among the parts (0 = none given)
    error: str | None  # for an undelivered final state: the first such part's error


def aggregate(parts: Sequence[PartView]) -> Aggregate:
    """The message's state, report time and error from its parts (at least one)."""
    state = message_state(p.state for p in parts)
    final = state in FINAL_STATES
    error = None
    if final and state != "DELIVERED":
        deciding = min((p for p in parts if p.state == state), key=lambda p: p.part)
        if deciding.error:
            error = deciding.error if len(parts) == 1 else f"part {deciding.part}: {deciding.error}"
    return Aggregate(state, final, max(p.state_at for p in parts), error)


def finalised_at(previous: str, previous_at: int | None, now: Aggregate,
                 now_ms: int) -> int | None:
    """The message's ``finalised_at`` (our clock) once ``now`` replaces ``previous``.

    Set when the message first becomes final, and again when the provider's word
    replaces our cut-off (``UNKNOWN`` -> a reported final state); kept otherwise.
    """
    if not now.final:
        return None
    was_final = previous in FINAL_STATES
    if was_final and previous_at is not None and not (previous == CUT_OFF != now.state):
        return previous_at
    return now_ms
