"""Retention finds what is old from the index on its time, never by reading the table.

Pruning runs all day; on most runs nothing, or a little, is old. The appliance never
runs ``ANALYZE``, so SQLite plans without statistics: pruning ``raw_inbound`` in the
order of its ids once read every raw request of the table on each run to find them.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.inbound.store import prune_raw
from appliance.reports.pruning import prune_inbox, prune_raw_reports
from appliance.store.schema import migrate, open_connection

NOW = 1_800_000_000_000
DAY = 86_400_000


@pytest.mark.parametrize(("table", "prune"), [
    ("raw_inbound", prune_raw), ("raw_reports", prune_raw_reports),
    ("report_inbox", prune_inbox)])
def test_pruning_reads_the_old_rows_by_their_time(tmp_path: Path, table: str,
                                                  prune: Any) -> None:
    migrate(str(tmp_path / "p.db"))
    conn = open_connection(str(tmp_path / "p.db"))
    ran: list[tuple[str, Any]] = []

    def trace(_cursor: apsw.Cursor, sql: str, bindings: Any) -> bool:
        ran.append((sql, bindings))
        return True

    conn.exec_trace = trace
    with conn:
        assert prune(conn, NOW - 30 * DAY, 500) == 0
    conn.exec_trace = None
    reads = [str(r[-1]) for sql, bindings in ran if table in sql
             for r in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings)
             if re.match(rf"(SCAN|SEARCH) {table}\b", str(r[-1]))]
    assert reads, ran
    assert not [r for r in reads if r.startswith(f"SCAN {table}")], reads
