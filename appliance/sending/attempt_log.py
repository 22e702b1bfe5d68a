"""What each attempt of a message came to, at which provider (ROUTE-3).

``messages.attempts_log`` holds one line per attempt or move,
``provider<TAB>outcome<TAB>epoch ms``, appended by the very update that records the
outcome (``attempts_log = coalesce(attempts_log, '') || ?``): no row of its own, no
statement more on the sender's path. The attempt the provider took is not written: the
message's ``submitted_at`` and ``provider`` are that entry (a message is taken once, and
never moves after), so a message taken at its first try writes exactly what it wrote
before routes. ``GET /api/messages/{ref}`` shows them together as
``attempts_by_provider``: ``[{"provider", "outcome", "at"}]``, oldest first.

Outcomes: ``accepted``, ``retry``, ``rejected``, ``uncertain`` (what the provider's
answer came to), ``unreached`` (nothing left the process: refused, connect timeout, a
session not bound), ``blocked`` (the provider refuses every message until its operator
acts: the lane holds), ``route_refused`` (a refusal its kind declares as "this route
cannot"), and ``failed_over``: the message left that provider for the next of its route.
"""

from __future__ import annotations

from typing import Any

from appliance.providers.outcome import Outcome

ACCEPTED = "accepted"
UNREACHED = "unreached"
BLOCKED = "blocked"
ROUTE_REFUSED = "route_refused"
FAILED_OVER = "failed_over"
APPEND_SQL = "attempts_log = coalesce(attempts_log, '') || ?"


def entry(provider: str, outcome: str, at_ms: int) -> str:
    """One line of the log (tabs and newlines in a name cannot occur: names are table
    keys of the config, and checked as such)."""
    return f"{provider}\t{outcome}\t{at_ms}\n"


def outcome_word(outcome: Outcome) -> str:
    """What an attempt came to, in the log's words."""
    if outcome.blocked is not None:
        return BLOCKED
    if outcome.unreached:
        return UNREACHED
    return outcome.result.value.lower()


def attempts_by_provider(log: Any, provider: str | None = None,
                         submitted_at: int | None = None) -> list[dict[str, Any]]:
    """The log as the API shows it, with the attempt ``provider`` took at
    ``submitted_at`` (when it did, and the log does not say it already), oldest first."""
    out = _entries(log)
    if provider is not None and submitted_at is not None and not any(
            a["outcome"] == ACCEPTED for a in out):
        out.append({"provider": provider, "outcome": ACCEPTED, "at": int(submitted_at)})
        out.sort(key=lambda a: int(a["at"]))  # stable: the taken try after its millisecond's
    return out


def _entries(log: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in str(log or "").splitlines():
        provider, _, rest = line.partition("\t")
        outcome, _, at = rest.partition("\t")
        if provider and outcome and at.isdigit():
            out.append({"provider": provider, "outcome": outcome, "at": int(at)})
    return out


def left(log: Any) -> frozenset[str]:
    """The providers the message has failed over from (it never goes back to one)."""
    return frozenset(a["provider"] for a in _entries(log) if a["outcome"] == FAILED_OVER)
