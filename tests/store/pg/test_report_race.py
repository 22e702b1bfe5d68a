"""Two reports for one message settled at once by two processes (DLR-5 on SCALE-1):
newer-wins holds as it does with one writer. The older, intermediate report never
overwrites the final one, in the part or the message, whichever process commits last.
And the cut-off, running in one process while another settles a report of the same
message, takes the same locks in the same order: neither deadlocks."""

from __future__ import annotations

import threading
from typing import Any

from appliance.reports.apply import settle
from appliance.reports.cutoff import cut_off
from appliance.reports.inbox import InboxReport, file_report
from appliance.reports.states import Verdict
from appliance.store import pg_schema
from appliance.store.pg import PgConnection
from tests.store.pg.paused import PausedAfter


def submitted_message(conn: PgConnection) -> None:
    pg_schema.migrate(conn)
    conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
    conn.execute(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, state_at,"
        " next_attempt_at, provider_msg_id, created_at, updated_at, submitted_at)"
        " VALUES ('ref-1', 1, 'sim', '+905321000001', 'hi', 'SUBMITTED', 0, 0,"
        " 'pid-1', 0, 0, 1)")
    conn.execute("INSERT INTO message_parts (message_id, part, provider_msg_id, state,"
                 " state_at, updated_at) VALUES (1, 1, 'pid-1', 'SUBMITTED', 0, 0)")


def report(conn: PgConnection, status: str, state: str, at: int) -> Any:
    waiting = file_report(conn, InboxReport("sim", "ref-1", "pid-1", status, at, state),
                          None, 5)
    assert waiting is not None
    return waiting


def test_an_older_intermediate_settled_beside_the_final_one_never_wins(pg_url: str) -> None:
    a, b = PgConnection.connect(pg_url), PgConnection.connect(pg_url)
    try:
        submitted_message(a)
        delivered = report(a, "delivered", "DELIVERED", 2000)
        enroute = report(a, "buffered", "ENROUTE", 1000)
        a.execute("BEGIN")
        assert settle(a, delivered, 10) is Verdict.APPLY  # A holds its unit open
        verdicts: list[Verdict] = []

        def other() -> None:
            b.execute("BEGIN")
            verdicts.append(settle(b, enroute, 11))
            b.execute("COMMIT")

        thread = threading.Thread(target=other)
        thread.start()
        thread.join(0.3)
        a.execute("COMMIT")
        thread.join(10)
        assert not thread.is_alive()
        assert verdicts == [Verdict.STALE]
        part = a.execute("SELECT state, state_at FROM message_parts").fetchone()
        message = a.execute("SELECT state, state_at FROM messages").fetchone()
        assert tuple(part) == ("DELIVERED", 2000) and tuple(message) == ("DELIVERED", 2000)
        outcomes = a.execute("SELECT status, outcome FROM report_inbox ORDER BY id").fetchall()
        assert [tuple(r) for r in outcomes] == [("delivered", "APPLIED"),
                                                ("buffered", "STALE")]
    finally:
        a.close()
        b.close()


def test_the_cut_off_beside_a_report_being_settled_waits_and_finds_it_final(
        pg_url: str) -> None:
    a, b = PgConnection.connect(pg_url), PgConnection.connect(pg_url)
    try:
        submitted_message(a)
        delivered = report(a, "delivered", "DELIVERED", 2000)
        # A has locked the message and read its parts; it has not written them yet.
        paused = PausedAfter(a, "SELECT part, provider_msg_id, state")
        outcome: dict[str, Any] = {}

        def settling() -> None:
            paused.execute("BEGIN")
            outcome["verdict"] = settle(paused, delivered, 10)
            paused.execute("COMMIT")

        def cutting_off() -> None:
            b.execute("BEGIN")
            try:
                outcome["cut"] = cut_off(b, [1], 20)
                b.execute("COMMIT")
            except Exception as exc:  # a deadlock: one of the two would be refused
                outcome["error"] = exc
                b.execute("ROLLBACK")

        first = threading.Thread(target=settling)
        first.start()
        assert paused.reached.wait(10)
        second = threading.Thread(target=cutting_off)
        second.start()
        second.join(0.3)
        assert second.is_alive(), "the cut-off waits for the message's lock"
        paused.go.set()
        first.join(10)
        second.join(10)
        assert outcome == {"verdict": Verdict.APPLY, "cut": 0}, outcome
        message = a.execute("SELECT state FROM messages").fetchone()
        assert tuple(message) == ("DELIVERED",)
    finally:
        a.close()
        b.close()
