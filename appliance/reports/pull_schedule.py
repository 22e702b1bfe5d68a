"""When a message is asked about (ROUTE-2): the schedule of its asks, as rows.

A message a provider has not reported is asked about ``pull_after_s`` after its
submission, then again after three times as long each time (``pull_after_s`` × 3,
× 9, ...), and once more at 90% of the delivery window, the last ask before the
cut-off (:mod:`appliance.reports.cutoff`) closes it ``UNKNOWN``; after that, never.
Only ``SUBMITTED``, ``ACCEPTED`` and ``ENROUTE`` messages are asked about: never a
final one, never one not yet submitted, never one past its window.

``message_pulls`` holds one row per message asked about (none before its first ask,
which is due by its ``submitted_at``): how many times, when last, with what outcome,
and when next (``next_at``; NULL: no more asks). An ask is recorded *before* its
request goes out (:func:`record_asks`, in the write unit that also re-checks that each
message is still open), so a process killed with a request in flight has already moved
that message's next ask along: it is asked again later, on the same schedule, and no
message is asked about forever. ``POST /api/messages/{ref}/pull`` makes the next ask
due now (:func:`queue_now`).

Read units and write units of the store's connection; nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from appliance.providers.status_query import PartTarget, PullTarget, StatusQuery
from appliance.store.connection import Connection
from appliance.store.rows import as_int

PULLABLE = ("SUBMITTED", "ACCEPTED", "ENROUTE")
"""The states a message is asked about in: submitted, no final state yet."""
_MARKS = ",".join("?" * len(PULLABLE))
BACKOFF = 3  # each wait is this many times the one before
LAST_ASK_SHARE = 0.9  # the last ask, as a share of the delivery window after submission


@dataclass(frozen=True)
class Pacing:
    """A provider's schedule: its first wait and how long after submission it may be
    asked (the delivery window, or less where the provider answers only so long:
    ``StatusQuery.answers_within_s``), in ms."""

    after_ms: int
    window_ms: int

    @property
    def last_ask_ms(self) -> int:
        """The last ask's offset from submission: 90% of the window."""
        return int(self.window_ms * LAST_ASK_SHARE)


def next_ask_at(pulls: int, submitted_at: int, now_ms: int, pacing: Pacing) -> int | None:
    """When the ask after the ``pulls``-th (made at ``now_ms``) is due; ``None``: that
    was the last. The waits grow ×3 (``after × 3``, ``× 9``...) up to the last ask at
    90% of the window; an ask at or past it is the last."""
    last = submitted_at + pacing.last_ask_ms
    if now_ms >= last:
        return None
    wait: int = pacing.after_ms * int(BACKOFF ** min(max(pulls, 1), 30))
    return min(now_ms + wait, last)


def due(conn: Connection, provider: str, now_ms: int, pacing: Pacing,
        limit: int) -> list[int]:
    """Ids of the provider's messages whose ask is due, oldest submission first (a read
    unit): those asked before whose next ask is due, and those never asked whose first
    ask is (``pull_after_s`` after submission), within the window (one submitted
    before the last ask's moment and never asked gets that one ask)."""
    opened_after = now_ms - pacing.window_ms
    again: list[Any] = conn.execute(
        "SELECT m.id, m.submitted_at FROM message_pulls p JOIN messages m ON m.id = p.message_id"
        " WHERE p.provider = ? AND p.next_at IS NOT NULL AND p.next_at <= ?"
        " ORDER BY p.next_at LIMIT ?", (provider, now_ms, limit)).fetchall()
    first: list[Any] = conn.execute(
        f"SELECT m.id, m.submitted_at FROM messages m WHERE m.state IN ({_MARKS})"
        " AND m.provider = ? AND m.submitted_at <= ? AND m.submitted_at > ?"
        " AND NOT EXISTS (SELECT 1 FROM message_pulls p WHERE p.message_id = m.id)"
        " ORDER BY m.submitted_at LIMIT ?",
        (*PULLABLE, provider, now_ms - pacing.after_ms, opened_after, limit)).fetchall()
    rows = sorted({as_int(r[0]): as_int(r[1] or 0) for r in again + first}.items(),
                  key=lambda r: (r[1], r[0]))
    return [message_id for message_id, _ in rows[:limit]]


def record_asks(conn: Connection, provider: str, ids: Sequence[int], now_ms: int,
                pacing: Pacing, query: StatusQuery | None = None) -> list[PullTarget]:
    """Record an ask about each of ``ids`` that is still open and return those, to be
    asked now in one request (a write unit). The others (final meanwhile, or past their
    window) get no more asks: their ``next_at`` is cleared. Only messages of the first
    open one's ``query.status_batch_key`` are asked together; the rest are left as
    they are, due, for the next request. For a kind that asks per part
    (``query.asks_per_part``) each target carries its parts."""
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    rows: list[Any] = conn.execute(
        "SELECT m.id, m.ref, m.provider_msg_id, m.msisdn, m.submitted_at, m.state,"
        " coalesce(p.pulls, 0), p.message_id FROM messages m"
        " LEFT JOIN message_pulls p ON p.message_id = m.id"
        f" WHERE m.id IN ({marks}) ORDER BY m.submitted_at, m.id", tuple(ids)).fetchall()
    targets: list[PullTarget] = []
    batch_key: str | None = None
    asks_per_part = query is not None and query.asks_per_part
    for message_id, ref, provider_msg_id, msisdn, submitted_at, state, pulls, known in rows:
        submitted = as_int(submitted_at or 0)
        asks = state in PULLABLE and submitted and now_ms < submitted + pacing.window_ms
        if not asks:
            conn.execute("UPDATE message_pulls SET next_at = NULL WHERE message_id = ?",
                         (message_id,))
            continue
        target = PullTarget(ref=str(ref), provider_msg_id=None if provider_msg_id is None
                            else str(provider_msg_id), msisdn=str(msisdn),
                            submitted_at_ms=submitted,
                            parts=parts_of(conn, message_id) if asks_per_part else ())
        key = "" if query is None else query.status_batch_key(target)
        if batch_key is None:
            batch_key = key
        elif key != batch_key:
            continue
        count = as_int(pulls) + 1
        next_at = next_ask_at(count, submitted, now_ms, pacing)
        if known is None:
            conn.execute(
                "INSERT INTO message_pulls (message_id, provider, pulls, next_at, last_at)"
                " VALUES (?, ?, ?, ?, ?)", (message_id, provider, count, next_at, now_ms))
        else:
            conn.execute("UPDATE message_pulls SET pulls = ?, next_at = ?, last_at = ?"
                         " WHERE message_id = ?", (count, next_at, now_ms, message_id))
        targets.append(target)
    return targets


def parts_of(conn: Connection, message_id: int) -> tuple[PartTarget, ...]:
    """A message's parts as a kind that asks per part needs them (a read)."""
    rows: list[Any] = conn.execute(
        "SELECT part, provider_msg_id, state FROM message_parts WHERE message_id = ?"
        " ORDER BY part", (message_id,)).fetchall()
    return tuple(PartTarget(part=as_int(p), provider_msg_id=None if pid is None else str(pid),
                            state=str(state)) for p, pid, state in rows)


def record_outcomes(conn: Connection, provider: str, outcomes: dict[str, str]) -> None:
    """Each asked message's outcome (``final``, ``pending``, ``unknown_id``, ``error``),
    by ref; a final one gets no more asks (a write unit, or part of one)."""
    for ref, outcome in outcomes.items():
        conn.execute(
            "UPDATE message_pulls SET last_outcome = ?,"
            " next_at = CASE WHEN ? = 'final' THEN NULL ELSE next_at END"
            " WHERE message_id = (SELECT id FROM messages WHERE ref = ? AND provider = ?)",
            (outcome, outcome, ref, provider))


def queue_now(conn: Connection, message_id: int, provider: str, now_ms: int) -> None:
    """Make the message's next ask due now (``POST /api/messages/{ref}/pull``; a write
    unit). Its count and schedule after that ask go on as before."""
    conn.execute(
        "INSERT INTO message_pulls (message_id, provider, pulls, next_at) VALUES (?, ?, 0, ?)"
        " ON CONFLICT (message_id) DO UPDATE SET next_at = excluded.next_at",
        (message_id, provider, now_ms))


def pulls_of(conn: Connection, message_id: int) -> int:
    """How many times the message was asked about (a read unit)."""
    row = conn.execute("SELECT pulls FROM message_pulls WHERE message_id = ?",
                       (message_id,)).fetchone()
    return 0 if row is None else as_int(row[0])
