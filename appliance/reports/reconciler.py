"""The reconciler (DLR-4): retries matching waiting reports, with growing delays.

Each step asks a reader when the earliest waiting row is due; when rows are due it
hands the writer one unit that tries each of them once (at most ``batch`` whose
message is still not there, moved on in one statement, then ``batch`` others:
:func:`reconcile_due`): matched rows leave the waiting set
(applied, or kept as history), the others move on along
:data:`appliance.reports.inbox.BACKOFF_S` (1 s, 5 s, 15 s, 1 min, 5 min, 30 min,
2 h, 6 h, then every 6 h until retention removes them).
"""

from __future__ import annotations

from appliance.reports.apply import settle_due
from appliance.reports.inbox import BACKOFF_S, due_rows, next_delay_ms, next_due_at
from appliance.reports.states import NOT_YET_SENT, Verdict
from appliance.runtime import Runtime
from appliance.store import dialect
from appliance.store.connection import Connection

LOOP = "reconciler"
# Longest sleep between looks: the clock may be moved (tests) and rows may be added.
POLL_S = 1.0


class Reconciler:
    def __init__(self, appliance: Runtime, batch: int = 500) -> None:
        self.appliance = appliance
        self.batch = batch
        self.totals: dict[str, int] = {}

    async def step(self) -> float | None:
        store = self.appliance.store
        now = self.appliance.now_ms()
        due_at = await store.readers.run(next_due_at)
        if due_at is None:
            return POLL_S
        if due_at > now:
            return min(POLL_S, (due_at - now) / 1000)
        counts = await store.writer.run(lambda c: reconcile_due(c, now, self.batch))
        for verdict, n in counts.items():
            self.totals[verdict] = self.totals.get(verdict, 0) + n
        return 0 if sum(counts.values()) >= self.batch else POLL_S


def reconcile_due(conn: Connection, now_ms: int, limit: int) -> dict[str, int]:
    """The reconciler's unit: try due rows once each, at most ``limit`` of those whose
    message is still not there and, once none of those is left due, ``limit`` others;
    counts by verdict.

    The first are moved along the ladder by :func:`defer_unsent` in one statement;
    the rest are read and settled as :func:`~appliance.reports.apply.settle_due` does
    (those it finds still waiting are deferred there, as one that came in since). The
    outcome of each row is the one ``settle_due`` would give it: settling a row never
    makes a message or sends one, so no row's verdict depends on another's.

    Why the others wait while the statement fills its ``limit``: the rows read next
    would be, oldest due first, more of the same (under a flood of reports for messages
    not recorded yet, half of each unit was read into Python only to be deferred);
    the loop runs the next unit at once, so the others come as soon as those are moved.
    """
    deferred = defer_unsent(conn, now_ms, limit)
    if deferred >= limit:
        return {Verdict.WAIT.value: deferred}
    counts = settle_due(conn, due_rows(conn, now_ms, limit, claim=True), now_ms)
    if deferred:
        counts[Verdict.WAIT.value] = counts.get(Verdict.WAIT.value, 0) + deferred
    return counts


# A row's next delay on the ladder, of its ``attempts`` so far, as SQL
# (:func:`appliance.reports.inbox.next_delay_ms`).
_NEXT_DELAY_SQL = ("CASE attempts " + " ".join(
    f"WHEN {n} THEN {next_delay_ms(n)}" for n in range(len(BACKOFF_S) - 1))
    + f" ELSE {next_delay_ms(len(BACKOFF_S) - 1)} END")


def defer_unsent(conn: Connection, now_ms: int, limit: int) -> int:
    """Due rows (the ``limit`` first due) naming by ``ref`` a message that is not
    there, or not sent yet (:func:`~appliance.reports.apply.not_ready`), moved to their
    next try in one statement; returns how many.

    Why in SQL: under a flood of reports for messages not recorded yet, each row came
    back to the writer at 1 s and 5 s, and reading each one into Python to learn that
    its message is still not there cost more than the statement that defers it.
    ``claim`` as :func:`~appliance.reports.inbox.due_rows`: on PostgreSQL a row another
    process's reconciler holds is passed over."""
    unsent = ",".join("?" * len(NOT_YET_SENT))
    conn.execute(
        f"UPDATE report_inbox SET attempts = attempts + 1, next_try_at = ? + {_NEXT_DELAY_SQL}"
        " WHERE id IN (SELECT r.id FROM report_inbox r"
        " WHERE r.applied_at IS NULL AND r.next_try_at <= ? AND r.ref <> ''"
        " AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.ref = r.ref"
        f" AND m.provider = r.provider AND m.state NOT IN ({unsent}))"
        f" ORDER BY r.next_try_at LIMIT ?{dialect.of(conn).skip_locked})",
        (now_ms, now_ms, *sorted(NOT_YET_SENT), limit))
    return conn.changes()
