"""Counting the rows statements changed themselves, when triggers write too.

``changes()`` counts the last statement only, and SQLite's ``total_changes()`` counts
every row since the connection opened, *the rows triggers wrote included*: the status
webhook triggers (OPS-5, :mod:`appliance.webhooks.outbox`) add an outbox row for each
message state change, and any summary kept by triggers adds its own. So a count over an
``executemany`` is taken from what the statements return: each changed row returns
one (``RETURNING 1``), and a trigger's rows return nothing. On PostgreSQL a cursor's
row count never includes a trigger's rows, so the driver's count is the answer there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from appliance.store import dialect
from appliance.store.connection import Connection


def executemany_changes(conn: Connection, sql: str, rows: Iterable[Sequence[Any]]) -> int:
    """Run ``sql`` (an ``INSERT``, ``UPDATE`` or ``DELETE`` without ``RETURNING``) once
    per row; return how many rows the statements themselves inserted, changed or
    deleted."""
    if dialect.of(conn).is_postgresql:
        rows = list(rows)
        if not rows:  # nothing ran: changes() would be the statement before's
            return 0
        conn.executemany(sql, rows)
        return conn.changes()
    return len(conn.executemany(sql + " RETURNING 1", rows).fetchall())
