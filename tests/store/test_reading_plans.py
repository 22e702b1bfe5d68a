"""Statements that run all day read the few rows they are about, not the whole table.

The appliance never runs ``ANALYZE``, so SQLite plans without statistics. Pruning runs
all day and on most runs finds nothing, or a little, old: pruning ``raw_inbound`` in
the order of its ids once read every raw request on each run to find them. The
console's inbox page counted the waiting reports by reading every report kept, applied
or not, through the provider's index.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.inbound.store import prune_raw
from appliance.reports.inbox_view import waiting_by_provider
from appliance.reports.pruning import prune_inbox, prune_raw_reports
from appliance.store.schema import migrate, open_connection
from tests.query_plans import Ran, table_reads, traced

NOW = 1_800_000_000_000
DAY = 86_400_000


@pytest.mark.parametrize(("table", "prune"), [
    ("raw_inbound", prune_raw), ("raw_reports", prune_raw_reports),
    ("report_inbox", prune_inbox)])
def test_pruning_reads_the_old_rows_by_their_time(tmp_path: Path, table: str,
                                                  prune: Any) -> None:
    conn = empty_store(tmp_path)
    ran = traced(conn)
    with conn:
        assert prune(conn, NOW - 30 * DAY, 500) == 0
    reads = plans(conn, ran, table)
    assert reads, ran
    assert not [r for r in reads if r.startswith(f"SCAN {table}")], reads


def test_the_inbox_page_counts_only_the_waiting_reports(tmp_path: Path) -> None:
    conn = empty_store(tmp_path)
    ran = traced(conn)
    assert waiting_by_provider(conn) == []
    reads = plans(conn, ran, "report_inbox")
    assert reads and all("report_inbox_waiting_since" in r for r in reads), reads


def empty_store(tmp_path: Path) -> apsw.Connection:
    migrate(str(tmp_path / "p.db"))
    return open_connection(str(tmp_path / "p.db"))


def plans(conn: apsw.Connection, ran: Ran, table: str) -> list[str]:
    """How each statement that ran reads ``table``."""
    conn.exec_trace = None
    return [r for sql, bindings in ran if table in sql
            for r in table_reads(conn, sql, bindings, table)]
