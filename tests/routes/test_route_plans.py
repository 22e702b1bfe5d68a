"""The statements of failover and of the providers' health read the rows they name
(ROUTE-3): moving a provider's waiting messages reads its lane of ``messages_lanes``,
judging its live delivery reads the messages it took by id, never a scan of every
message. Without statistics, as the appliance runs."""

from __future__ import annotations

from pathlib import Path

from appliance.config import ProviderSettings, Settings
from appliance.config.routes import RouteSettings
from appliance.sending.failover import Router, move_waiting
from appliance.sending.provider_health import judge
from tests.query_plans import table_reads, traced
from tests.sending.test_query_plans import NOW, PER_CAMPAIGN, backlog


def test_moving_waiting_messages_and_judging_delivery_read_their_indexes(
        tmp_path: Path) -> None:
    conn = backlog(tmp_path / "plans.db")
    with conn:  # the backlog's messages follow the route +9053 -> sim, other
        conn.execute("UPDATE messages SET route = '+9053' WHERE id % 2 = 0")
        conn.execute("UPDATE messages SET submitted_at = ?, state = 'SUBMITTED'"
                     " WHERE id % 7 = 0", (NOW - 60_000,))
    settings = Settings(
        providers={"sim": ProviderSettings(name="sim", kind="simulator"),
                   "other": ProviderSettings(name="other", kind="simulator")},
        routes=(RouteSettings("+9053", ("sim", "other")),))
    router = Router(settings, frozenset)
    ran = traced(conn)
    with conn:
        moved = move_waiting(conn, router, "sim", NOW, limit=500)
    sent = [(NOW - 60_000, int(r[0])) for r in conn.execute(
        "SELECT id FROM messages WHERE submitted_at IS NOT NULL")]
    figures = judge(conn, "sim", sent, NOW, 900_000, 30_000)
    conn.exec_trace = None
    assert len(moved) == 500 and {m.target for m in moved} == {"other"}
    assert figures.judged > 0 and figures.late == figures.judged
    selects = [(sql, b) for sql, b in ran if sql.lstrip().upper().startswith("SELECT")
               and " messages" in sql and "submitted_at IS NOT NULL" not in sql]
    assert len(selects) >= 2 and any("id IN (" in s for s, _ in selects), selects
    for sql, bindings in selects:
        reads = table_reads(conn, sql, bindings, "messages")
        assert reads and not any(r.startswith("SCAN messages") for r in reads), (sql, reads)
        index = "INTEGER PRIMARY KEY" if "id IN (" in sql else "messages_lanes"
        assert all(index in r for r in reads), (sql, reads)
    left = conn.execute("SELECT count(*) FROM messages WHERE provider = 'sim'"
                        " AND route IS NOT NULL AND state = 'QUEUED'").fetchone()
    assert left is not None and left[0] < PER_CAMPAIGN
