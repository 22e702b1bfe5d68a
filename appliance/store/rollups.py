"""Counts kept beside the rows they count, so summaries read a few hundred rows instead
of scanning.

Two tables (``schema.sql``):

* ``message_counts``: messages per account, minute of creation and state. Each message
  row says which state it is counted under (``counted_state``, NULL before it is
  counted). A message whose state differs from it (a new one, or one whose state
  changed since) is in the partial index ``messages_uncounted``; every reader adds
  those in (:func:`created_between`), so the figures are exact in every snapshot
  whichever write path changed the state, and :func:`fold` (a bounded write unit, the
  ``rollups`` loop) moves them into the counts. No trigger on ``messages`` updates: a
  trigger's row changes count in SQLite's ``total_changes()``, which the sender's
  outcome unit uses to count what its guarded updates changed.
* ``row_counts``: rows by one column's value: messages by state (kept like the above),
  and, kept by triggers in the same transaction as every insert, update and delete,
  reports by outcome, raw callbacks and raw inbound requests by parsed/quarantined,
  suppressions by source, inbound messages (STOP keywords or other).

Coverage, delivery rate, open-by-hour and the live figures
(:mod:`appliance.reports.coverage`) sum the whole minutes of a window from
``message_counts`` and read the two partial minutes at its edges from the covering
index ``messages_created``: exact to the millisecond, as a scan of the window would be.

:data:`RECOUNTS` and :data:`MESSAGE_RECOUNT` are the same figures counted from the rows
themselves: :func:`fill` builds the tables from them (the schema migration that brought
them), :func:`drift` compares them (the randomised test).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.count_triggers import STRIPE_SEPARATOR
from appliance.store.rows import as_int, as_str

MINUTE_MS = 60_000
HOUR_MS = 3_600_000
FOLD_BATCH = 5000

_PARSED = "CASE parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END"
# row_counts name -> the recount of its keys.
RECOUNTS: dict[str, str] = {
    "messages": "SELECT state, count(*) FROM messages GROUP BY state",
    "report_inbox": "SELECT coalesce(outcome, 'WAITING'), count(*) FROM report_inbox GROUP BY 1",
    "raw_reports": f"SELECT {_PARSED}, count(*) FROM raw_reports GROUP BY 1",
    "raw_inbound": f"SELECT {_PARSED}, count(*) FROM raw_inbound GROUP BY 1",
    "suppressions": "SELECT source, count(*) FROM suppressions GROUP BY source",
    "inbound_messages": "SELECT CASE WHEN keyword IS NULL THEN 'other' ELSE 'stop' END,"
                        " count(*) FROM inbound_messages GROUP BY 1",
}
MESSAGE_RECOUNT = ("SELECT account_id, created_at / 60000, state, count(*) FROM messages"
                   " GROUP BY 1, 2, 3")
# The messages not counted under their state (the partial index messages_uncounted).
_UNCOUNTED = "counted_state IS DISTINCT FROM state"


def fill(conn: Connection) -> None:
    """Rebuild both tables from the rows they count (a write unit)."""
    conn.execute("DELETE FROM message_counts")
    conn.execute("DELETE FROM row_counts")
    conn.execute(f"UPDATE messages SET counted_state = state WHERE {_UNCOUNTED}")
    conn.execute("INSERT INTO message_counts (account_id, minute, state, n) " + MESSAGE_RECOUNT)
    for name, sql in RECOUNTS.items():
        conn.execute(f"INSERT INTO row_counts (name, key, n) SELECT '{name}', counted.*"
                     f" FROM ({sql}) AS counted")


def _add(conn: Connection, table_key: tuple[Any, ...], delta: int) -> None:
    if table_key[0] == "row":
        _, name, key = table_key
        conn.execute("INSERT INTO row_counts (name, key, n) VALUES (?, ?, ?)"
                     " ON CONFLICT (name, key) DO UPDATE SET n = row_counts.n + excluded.n",
                     (name, key, delta))
        return
    _, account_id, minute, state = table_key
    if delta > 0:
        conn.execute("INSERT INTO message_counts (account_id, minute, state, n)"
                     " VALUES (?, ?, ?, ?) ON CONFLICT (account_id, minute, state)"
                     " DO UPDATE SET n = message_counts.n + excluded.n",
                     (account_id, minute, state, delta))
        return
    conn.execute("UPDATE message_counts SET n = n + ? WHERE account_id = ? AND minute = ?"
                 " AND state = ?", (delta, account_id, minute, state))
    conn.execute("DELETE FROM message_counts WHERE account_id = ? AND minute = ? AND state = ?"
                 " AND n = 0", (account_id, minute, state))


def fold(conn: Connection, limit: int = FOLD_BATCH) -> int:
    """Count up to ``limit`` messages under their current state (a write unit); how
    many it moved. Readers give the same figures before and after."""
    # On PostgreSQL the rows are locked as they are read, and those another process's
    # unit holds are passed over (folded next time): the fold never waits for a message
    # row, so it is never one side of a deadlock with a batch that changes messages in
    # another order (two processes, each folding or sending, deadlocked every few
    # seconds and the fold failed).
    rows: list[Any] = conn.execute(
        "SELECT id, account_id, created_at / 60000, counted_state, state FROM messages"
        f" WHERE {_UNCOUNTED} LIMIT ?{dialect.of(conn).skip_locked}", (limit,)).fetchall()
    deltas: dict[tuple[Any, ...], int] = {}
    for _id, account_id, minute, counted, state in rows:
        if counted is not None:
            old = ("msg", account_id, minute, counted)
            deltas[old] = deltas.get(old, 0) - 1
            deltas["row", "messages", counted] = deltas.get(("row", "messages", counted), 0) - 1
        new = ("msg", account_id, minute, state)
        deltas[new] = deltas.get(new, 0) + 1
        deltas["row", "messages", state] = deltas.get(("row", "messages", state), 0) + 1
    for key, delta in deltas.items():
        if delta:
            _add(conn, key, delta)
    conn.executemany("UPDATE messages SET counted_state = ? WHERE id = ?",
                     [(r[4], r[0]) for r in rows])
    return len(rows)


def key_of(stored: str) -> str:
    """The key a ``row_counts`` row counts: its own, or the one before a PostgreSQL
    session's stripe (``parsed#4711`` counts ``parsed``)."""
    head, sep, tail = stored.rpartition(STRIPE_SEPARATOR)
    return head if sep and tail.isdigit() else stored


def _summed(conn: Connection, name: str) -> dict[str, int]:
    """``row_counts`` of ``name`` by key, each key's stripes added up (one statement:
    one snapshot, so a fold moving a stripe into its key is seen whole or not at all)."""
    out: dict[str, int] = {}
    for k, n in conn.execute("SELECT key, n FROM row_counts WHERE name = ?", (name,)):
        key = key_of(str(k))
        out[key] = out.get(key, 0) + as_int(n)
    return out


def counts(conn: Connection, name: str) -> dict[str, int]:
    """Rows of table ``name`` by key, from ``row_counts`` (keys with none left out);
    for ``messages``, :func:`message_states`."""
    if name == "messages":
        return message_states(conn)
    return {k: n for k, n in _summed(conn, name).items() if n}


def fold_stripes(conn: Connection) -> int:
    """Fold the count rows of PostgreSQL sessions that have ended into their keys' own
    rows (a write unit; how many rows it folded). A live session's rows stay: it may be
    counting into them now. Each row is deleted before its count is added, with the
    count the delete returns, so an increment committed in between is never lost."""
    if not dialect.of(conn).is_postgresql:
        return 0
    live = {str(pid) for (pid,) in conn.execute("SELECT pid FROM pg_stat_activity")}
    ended = [(str(name), str(key)) for name, key in conn.execute(
        "SELECT name, key FROM row_counts WHERE key LIKE ?", (f"%{STRIPE_SEPARATOR}%",))
        if key_of(str(key)) != key and str(key).rpartition(STRIPE_SEPARATOR)[2] not in live]
    for name, key in ended:
        row = conn.execute("DELETE FROM row_counts WHERE name = ? AND key = ? RETURNING n",
                           (name, key)).fetchone()
        if row is not None and as_int(row[0]):
            _add(conn, ("row", name, key_of(key)), as_int(row[0]))
    return len(ended)


def _uncounted(conn: Connection, lo: int | None, hi: int | None,
               account_id: int | None) -> Iterator[tuple[int, str | None, str, int]]:
    """(minute, counted state or None, state, messages) of the uncounted messages
    created in ``[lo, hi)`` (``None``: unbounded)."""
    where = [_UNCOUNTED]
    args: list[Any] = []
    if lo is not None:
        where.append("created_at >= ?")
        args.append(lo)
    if hi is not None:
        where.append("created_at < ?")
        args.append(hi)
    if account_id is not None:
        where.append("+account_id = ?")
        args.append(account_id)
    for minute, counted, state, n in conn.execute(
            "SELECT created_at / 60000, counted_state, state, count(*) FROM messages"
            f" WHERE {' AND '.join(where)} GROUP BY 1, 2, 3", tuple(args)):
        yield as_int(minute), None if counted is None else str(counted), str(state), as_int(n)


def message_states(conn: Connection) -> dict[str, int]:
    """Messages by state, every account (for ``/metrics``)."""
    out = _summed(conn, "messages")
    for _minute, counted, state, n in _uncounted(conn, None, None, None):
        if counted is not None:
            out[counted] = out.get(counted, 0) - n
        out[state] = out.get(state, 0) + n
    return {k: n for k, n in out.items() if n}


def _scan(conn: Connection, lo: int, hi: int, account_id: int | None
          ) -> Iterator[tuple[int, str, int]]:
    """(hour, state, messages) created in ``[lo, hi)``, from the covering index."""
    if lo >= hi:
        return
    where, args = ("", ()) if account_id is None else (" AND +account_id = ?", (account_id,))
    sql = (f"SELECT created_at / {HOUR_MS}, state, count(*) FROM messages"
           f" WHERE created_at >= ? AND created_at < ?{where} GROUP BY 1, 2")
    for hour, state, n in conn.execute(sql, (lo, hi, *args)):
        yield as_int(hour), str(state), as_int(n)


def _minutes(conn: Connection, first: int, stop: int, account_id: int | None
             ) -> Iterator[tuple[int, str, int]]:
    """(hour, state, messages) of the whole minutes ``[first, stop)``: the counts, and
    the messages not counted under their state yet."""
    if account_id is None:
        sql = ("SELECT minute / 60, state, sum(n) FROM message_counts"
               " WHERE account_id IN (SELECT id FROM accounts) AND minute >= ? AND minute < ?"
               " GROUP BY 1, 2")
        params: tuple[Any, ...] = (first, stop)
    else:
        sql = ("SELECT minute / 60, state, sum(n) FROM message_counts"
               " WHERE account_id = ? AND minute >= ? AND minute < ? GROUP BY 1, 2")
        params = (account_id, first, stop)
    for hour, state, n in conn.execute(sql, params):
        yield as_int(hour), str(state), as_int(n)
    for minute, counted, state, n in _uncounted(conn, first * MINUTE_MS, stop * MINUTE_MS,
                                                account_id):
        if counted is not None:
            yield minute // 60, counted, -n
        yield minute // 60, state, n


def created_between(conn: Connection, lo: int, hi: int, account_id: int | None = None
                    ) -> dict[tuple[int, str], int]:
    """Messages created in ``[lo, hi)`` (epoch ms), by (hour, state): exactly what
    ``GROUP BY created_at / 3600000, state`` over those messages gives.

    The whole minutes come from ``message_counts`` (plus the messages not counted under
    their state yet); the partial minutes at either end from the covering index. The
    cost is the minutes of the window plus the messages of its first and last minute.
    """
    out: dict[tuple[int, str], int] = {}
    if lo >= hi:
        return out
    first = -(-lo // MINUTE_MS)  # the first whole minute
    stop = hi // MINUTE_MS  # the minute after the last whole one
    parts: Iterable[Iterator[tuple[int, str, int]]]
    if first >= stop:
        parts = [_scan(conn, lo, hi, account_id)]
    else:
        parts = [_scan(conn, lo, first * MINUTE_MS, account_id),
                 _minutes(conn, first, stop, account_id),
                 _scan(conn, stop * MINUTE_MS, hi, account_id)]
    for part in parts:
        for hour, state, n in part:
            out[hour, state] = out.get((hour, state), 0) + n
    return {key: n for key, n in out.items() if n}


def drift(conn: Connection) -> list[str]:
    """Where the kept counts (with the messages not folded in yet) differ from a full
    recount; ``[]`` when they agree. Scans every counted table: for tests, not for
    a page."""
    problems: list[str] = []
    kept: dict[tuple[int, int, str], int] = {}
    for a, m, s, n in conn.execute("SELECT account_id, minute, state, n FROM message_counts"):
        kept[as_int(a), as_int(m), str(s)] = as_int(n)
    for a, m, counted, s in conn.execute(
            "SELECT account_id, created_at / 60000, counted_state, state FROM messages"
            f" WHERE {_UNCOUNTED}"):
        if counted is not None:
            was = (as_int(a), as_int(m), as_str(counted))
            kept[was] = kept.get(was, 0) - 1
        now = (as_int(a), as_int(m), as_str(s))
        kept[now] = kept.get(now, 0) + 1
    real = {(as_int(a), as_int(m), as_str(s)): as_int(n)
            for a, m, s, n in conn.execute(MESSAGE_RECOUNT)}
    for where in sorted(set(kept) | set(real)):
        if kept.get(where, 0) != real.get(where, 0):
            problems.append(f"message_counts {where}: kept {kept.get(where, 0)},"
                            f" counted {real.get(where, 0)}")
    for name, sql in RECOUNTS.items():
        have = counts(conn, name)
        want = {str(k): as_int(n) for k, n in conn.execute(sql)}
        for key in sorted(set(have) | set(want)):
            if have.get(key, 0) != want.get(key, 0):
                problems.append(f"row_counts {name}/{key}: kept {have.get(key, 0)},"
                                f" counted {want.get(key, 0)}")
    return problems
