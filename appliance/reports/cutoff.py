"""The cut-off (DLR-7): no final report within the delivery window means ``UNKNOWN``.

A message submitted (or possibly submitted) more than ``[sending]
delivery_window_hours`` ago that still has no final state moves to ``UNKNOWN``, so the
set of open messages cannot grow forever. ``UNKNOWN`` is final for the queue but not
for the truth: a final report that arrives later still applies (see
:mod:`appliance.reports.states`). For a message in several parts, the cut-off closes
each part still open, and a part's late final report still lands on that part.
Messages never submitted (``QUEUED``, ``RETRY``) are the sender's business and are
left alone.
"""

from __future__ import annotations

from typing import Any

from appliance.reports.aggregate import Aggregate, PartView, aggregate, finalised_at
from appliance.reports.states import CUT_OFF, OPEN_AFTER_SUBMIT
from appliance.runtime import Runtime
from appliance.store import dialect
from appliance.store.changes import executemany_changes
from appliance.store.connection import Connection
from appliance.store.rows import as_int, as_str, opt_str

LOOP = "cutoff"
HOUR_MS = 3_600_000
_OPEN = tuple(sorted(OPEN_AFTER_SUBMIT))
_MARKS = ",".join("?" * len(_OPEN))
CUT_OFF_ERROR = "no final report within the delivery window"


def overdue_ids(conn: Connection, submitted_before: int, limit: int) -> list[int]:
    """Open messages submitted before ``submitted_before`` (a read unit)."""
    ids = [as_int(r[0]) for r in conn.execute(
        f"SELECT id FROM messages WHERE state IN ({_MARKS}) AND submitted_at < ? LIMIT ?",
        (*_OPEN, submitted_before, limit))]
    if len(ids) < limit:
        ids += [as_int(r[0]) for r in conn.execute(
            f"SELECT id FROM messages WHERE state IN ({_MARKS}) AND submitted_at IS NULL"
            " AND created_at < ? LIMIT ?", (*_OPEN, submitted_before, limit - len(ids)))]
    return ids


def cut_off(conn: Connection, ids: list[int], now_ms: int) -> int:
    """Move these messages to ``UNKNOWN`` unless a report closed them meanwhile;
    returns how many moved (a write unit).

    Their open parts are closed to ``UNKNOWN`` and the message takes the aggregate of
    its parts (:mod:`appliance.reports.aggregate`): ``UNKNOWN``, or the worse final state
    a part already reported (a part ``FAILED`` and one never heard of: ``FAILED``).
    """
    if not ids:
        return 0
    marks = ",".join("?" * len(ids))
    # On PostgreSQL the messages are locked first, in id order, as a report's settling
    # locks its message before its parts: the same order, so the two never deadlock.
    lock = dialect.of(conn).for_update
    if lock:
        lock = " ORDER BY id" + lock
    still: list[Any] = conn.execute(
        f"SELECT id, state, finalised_at FROM messages{dialect.of(conn).by_rowid}"
        f" WHERE id IN ({marks})"
        f" AND state IN ({_MARKS}){lock}", (*ids, *_OPEN)).fetchall()
    if not still:
        return 0
    open_ids = [int(r[0]) for r in still]
    id_marks = ",".join("?" * len(open_ids))
    conn.execute(
        f"UPDATE message_parts SET state = ?, finalised_at = ?, updated_at = ?,"
        f" error = coalesce(error, ?) WHERE message_id IN ({id_marks}) AND state IN ({_MARKS})",
        (CUT_OFF, now_ms, now_ms, CUT_OFF_ERROR, *open_ids, *_OPEN))
    parts: dict[int, list[PartView]] = {}
    for message_id, part, state, state_at, error in conn.execute(
            "SELECT message_id, part, state, state_at, error FROM message_parts"
            f" WHERE message_id IN ({id_marks})", tuple(open_ids)):
        parts.setdefault(as_int(message_id), []).append(
            PartView(as_int(part), as_str(state), as_int(state_at), opt_str(error)))
    updates: list[tuple[Any, ...]] = []
    for message_id, state, was_finalised in still:
        found = parts.get(int(message_id))
        agg = aggregate(found) if found else Aggregate(CUT_OFF, True, 0, None)
        updates.append((agg.state, finalised_at(str(state), was_finalised, agg, now_ms), now_ms,
                        agg.error or CUT_OFF_ERROR, int(message_id), *_OPEN))
    return executemany_changes(
        conn, "UPDATE messages SET state = ?, finalised_at = ?, updated_at = ?,"
        f" error = coalesce(error, ?) WHERE id = ? AND state IN ({_MARKS})", updates)


class CutOff:
    def __init__(self, appliance: Runtime, batch: int = 500, interval_s: float = 5.0) -> None:
        self.appliance = appliance
        self.batch = batch
        self.interval_s = interval_s
        self.total = 0

    async def step(self) -> float | None:
        store = self.appliance.store
        now = self.appliance.now_ms()
        window_ms = int(self.appliance.settings.sending.delivery_window_hours * HOUR_MS)
        ids = await store.readers.run(lambda c: overdue_ids(c, now - window_ms, self.batch))
        if not ids:
            return self.interval_s
        self.total += await store.writer.run(lambda c: cut_off(c, ids, now))
        return 0 if len(ids) >= self.batch else self.interval_s
