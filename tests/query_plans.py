"""The statements a store unit runs, and how SQLite reads a table for each.

The appliance never runs ``ANALYZE``: the tests that read plans run on a database
without statistics, as the appliance does.
"""

from __future__ import annotations

import re
from typing import Any

import apsw

Ran = list[tuple[str, Any]]


def traced(conn: apsw.Connection) -> Ran:
    """Every statement ``conn`` runs from now on, with its bindings."""
    ran: Ran = []

    def trace(_cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        ran.append((sql, bindings))
        return True

    conn.exec_trace = trace
    return ran


def table_reads(conn: apsw.Connection, sql: str, bindings: Any, table: str) -> list[str]:
    """How the plan of ``sql`` reads ``table`` (``SEARCH ...`` / ``SCAN ...`` lines)."""
    return [str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings)
            if re.match(rf"(SCAN|SEARCH) {table}\b", str(r[-1]))]
