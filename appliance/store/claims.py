"""Claims with leases: work that several processes share without doing a unit twice.

A claimable row carries who holds it and until when (``lease_owner``, ``lease_until``,
epoch ms). :func:`claim` takes up to ``limit`` rows that are ready and not held (never
leased, or their lease ran out) and leases them to ``owner`` in the same statement. On
PostgreSQL the selection is ``FOR UPDATE SKIP LOCKED``: two processes claiming at once
never wait for each other and never get the same row, and a row one of them has just
leased is not ready for the other once that commit is seen. On SQLite the one writer
serialises every claim, so the same statement without the clause is enough.

A process that dies keeps its leases until they run out; then the rows are ready again
for whoever claims next. A holder that is still working extends its lease
(:func:`renew`), and every unit that finishes a claimed row checks it still holds it
(``AND lease_owner = ?``), so a holder whose lease ran out and was taken over changes
nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.rows import as_int


@dataclass(frozen=True)
class Claimable:
    """Where the claimable rows are and which of them are ready (SQL, trusted text)."""

    table: str
    ready: str = "1 = 1"  # e.g. "state IN ('QUEUED', 'RETRY') AND next_attempt_at <= ?"
    order_by: str = "id"
    key: str = "id"
    owner_column: str = "lease_owner"
    until_column: str = "lease_until"


def claim(conn: Connection, what: Claimable, *, owner: str, now_ms: int, lease_ms: int,
          limit: int, ready_params: Sequence[Any] = ()) -> list[int]:
    """Lease up to ``limit`` ready rows, the first by ``order_by``, to ``owner`` until
    ``now_ms + lease_ms``; their keys, in key order (a write unit)."""
    t, key = what.table, what.key
    sql = (f"UPDATE {t} SET {what.owner_column} = ?, {what.until_column} = ?"
           f" WHERE {key} IN (SELECT {key} FROM {t} WHERE ({what.ready})"
           f" AND ({what.until_column} IS NULL OR {what.until_column} <= ?)"
           f" ORDER BY {what.order_by} LIMIT ?{dialect.of(conn).skip_locked})"
           f" RETURNING {key}")
    rows = conn.execute(sql, (owner, now_ms + lease_ms, *ready_params, now_ms, limit)).fetchall()
    return sorted(as_int(r[0]) for r in rows)


def renew(conn: Connection, what: Claimable, keys: Sequence[int], *, owner: str,
          until_ms: int) -> int:
    """Extend ``owner``'s leases on ``keys`` to ``until_ms``; how many it still held."""
    if not keys:
        return 0
    marks = ",".join("?" * len(keys))
    conn.execute(f"UPDATE {what.table} SET {what.until_column} = ?"
                 f" WHERE {what.key} IN ({marks}) AND {what.owner_column} = ?",
                 (until_ms, *keys, owner))
    return conn.changes()


def release(conn: Connection, what: Claimable, keys: Sequence[int], *, owner: str) -> int:
    """Give back ``owner``'s leases on ``keys`` (ready again at once); how many it held."""
    if not keys:
        return 0
    marks = ",".join("?" * len(keys))
    conn.execute(f"UPDATE {what.table} SET {what.owner_column} = NULL,"
                 f" {what.until_column} = NULL"
                 f" WHERE {what.key} IN ({marks}) AND {what.owner_column} = ?", (*keys, owner))
    return conn.changes()
