"""The sender's statements read the rows they name, never a state's whole backlog.

The appliance never runs ``ANALYZE``, so SQLite plans without statistics. Left to itself
it read ``messages_open`` for every ``QUEUED``/``RETRY`` message when marking eight or
more messages ``SENDING`` by id (``state IN (...)`` looked cheaper than the ids), and a
campaign's lane through ``messages_due`` over every lane queued before it. Both cost
time in proportion to the backlog, in the writer, on every batch. These tests run the
sender's units over a backlog of two campaigns, one queued after the other, and read the
plan of every statement they ran.
"""

from __future__ import annotations

import re
from pathlib import Path

import apsw

from appliance.providers.base import Outcome, SubmitResult
from appliance.reports.cutoff import cut_off
from appliance.sending.claims import claim_due, mark_sending, release_claimed
from appliance.sending.outcomes import record_outcomes
from appliance.store.schema import migrate, open_connection
from tests.query_plans import Ran, table_reads, traced

NOW = 1_800_000_000_000
PER_CAMPAIGN = 3_000
BATCH = 64


def backlog(path: Path) -> apsw.Connection:
    migrate(str(path))
    conn = open_connection(str(path))
    with conn:
        conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'plans', 0)")
        for c in (1, 2):
            conn.execute("INSERT INTO lists (id, account_id, name, created_at)"
                         " VALUES (?, 1, ?, 0)", (c, f"l{c}"))
            conn.execute("INSERT INTO campaigns (id, account_id, list_id, provider, body,"
                         " idempotency_key, state, total, queued_through, last_contact_id,"
                         " created_at, updated_at, personalised) VALUES"
                         " (?, 1, ?, 'sim', 'b', ?, 'RUNNING', 0, 0, 0, 0, 0, 1)",
                         (c, c, f"k{c}"))
        # Campaign 2 is queued after the whole of campaign 1: its messages come later in
        # next_attempt_at order.
        conn.executemany(
            "INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn, body,"
            " state, next_attempt_at, created_at, updated_at, priority) VALUES"
            " (?, 1, ?, 'sim', ?, 'b', 'QUEUED', ?, 0, 0, 1)",
            ((f"R{i:020d}", 1 + i // PER_CAMPAIGN, f"+9053{i:08d}", NOW - 10 * PER_CAMPAIGN + i)
             for i in range(2 * PER_CAMPAIGN)))
    stats = conn.execute("SELECT count(*) FROM sqlite_master"
                         " WHERE name LIKE 'sqlite_stat%'").fetchone()
    assert stats is not None and stats[0] == 0  # as the appliance runs: no statistics
    return conn


def message_plans(conn: apsw.Connection, ran: Ran) -> dict[str, list[str]]:
    """Each distinct statement on ``messages`` that ran: how SQLite reads the table."""
    conn.exec_trace = None
    plans: dict[str, list[str]] = {}
    for sql, bindings in ran:
        if sql in plans or not re.search(r"\bmessages\b", sql) or sql.lstrip().upper(
                ).startswith(("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")):
            continue
        plans[sql] = table_reads(conn, sql, bindings, "messages")
    return plans


def test_the_claim_reads_each_lane_by_its_index_and_each_message_by_its_id(
        tmp_path: Path) -> None:
    conn = backlog(tmp_path / "plans.db")
    ran = traced(conn)
    with conn:
        claimed = claim_due(conn, "sim", NOW, BATCH, 0)
    with conn:
        marked = mark_sending(conn, claimed[:-8], NOW)
    with conn:
        release_claimed(conn, [m.id for m in claimed[-8:]])
    outcomes = [(m, Outcome(SubmitResult.ACCEPTED, f"id-{m.id}")) for m in marked]
    with conn:
        record_outcomes(conn, "sim", outcomes, NOW, max_attempts=5, dedupes_on_ref=False,
                        map_provider_ids=True)
    with conn:
        assert cut_off(conn, [m.id for m in marked], NOW + 1) == len(marked)
    plans = message_plans(conn, ran)

    # Both campaigns got their share though one was queued after the other.
    assert {m.campaign_id for m in claimed} == {1, 2}
    assert len(marked) == BATCH - 8
    assert plans, "no statement on messages ran"
    for sql, reads in plans.items():
        assert not any(r.startswith("SCAN messages") and "INDEX" not in r for r in reads), \
            (sql, reads)
        if re.search(r"(?<![_.\w])id IN \(", sql):
            assert reads and all("INTEGER PRIMARY KEY" in r for r in reads), (sql, reads)
        if "ORDER BY next_attempt_at" in sql:
            assert reads and all("messages_lanes" in r for r in reads), (sql, reads)
    by_id = [s for s in plans if re.search(r"(?<![_.\w])id IN \(", s)]
    lanes = [s for s in plans if "ORDER BY next_attempt_at" in s]
    assert len(by_id) >= 5 and lanes, (by_id, lanes)  # the checks above had work to do
