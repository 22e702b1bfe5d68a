"""Units that judge a row and then write it, run at once by two processes on one
PostgreSQL database (SCALE-1): each locks the row it judges first (the dialect's
``for_update``), so the second waits and judges what the first left, as with SQLite's
one writer.

* Two reports of one message: newer-wins holds; the older intermediate report never
  overwrites the final one, in the part or the message.
* The cut-off, or an operator's decision on an UNCERTAIN message, beside a report being
  settled: the same locks in the same order (the message, then its parts), so neither
  deadlocks, and each judges the message as the report left it.
* A pause beside a cancel: a cancelled campaign is never paused back into life.
"""

from __future__ import annotations

import threading
from typing import Any

from appliance.imports.import_job import ensure_list
from appliance.reports.apply import settle
from appliance.reports.cutoff import cut_off
from appliance.reports.inbox import InboxReport, file_report
from appliance.reports.states import Verdict
from appliance.sending.campaigns import (
    NewCampaign,
    NotAllowed,
    cancel_campaign,
    create_campaign,
    pause_campaign,
)
from appliance.sending.messages import RESEND, NotUncertain, resolve_campaign, resolve_message
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


def test_an_operators_decision_beside_a_report_being_settled_sees_the_report(
        pg_url: str) -> None:
    a, b = PgConnection.connect(pg_url), PgConnection.connect(pg_url)
    try:
        submitted_message(a)
        a.execute("UPDATE messages SET state = 'UNCERTAIN'")
        a.execute("UPDATE message_parts SET state = 'UNCERTAIN'")
        delivered = report(a, "delivered", "DELIVERED", 2000)
        paused = PausedAfter(a, "SELECT part, provider_msg_id, state")
        outcome: dict[str, Any] = {}

        def settling() -> None:
            paused.execute("BEGIN")
            outcome["verdict"] = settle(paused, delivered, 10)
            paused.execute("COMMIT")

        def resending() -> None:
            b.execute("BEGIN")
            try:
                outcome["state"] = resolve_message(b, 1, RESEND, "alice", 20)
                b.execute("COMMIT")
            except Exception as exc:
                outcome["error"] = exc
                b.execute("ROLLBACK")

        first = threading.Thread(target=settling)
        first.start()
        assert paused.reached.wait(10)
        second = threading.Thread(target=resending)
        second.start()
        second.join(0.3)
        assert second.is_alive(), "the decision waits for the message's lock"
        paused.go.set()
        first.join(10)
        second.join(10)
        assert outcome["verdict"] is Verdict.APPLY
        # The provider had it after all: nothing to decide, nothing resent, no action
        # recorded that did not happen.
        assert isinstance(outcome.get("error"), NotUncertain), outcome
        assert tuple(a.execute("SELECT state FROM messages").fetchone()) == ("DELIVERED",)
        assert tuple(a.execute("SELECT state FROM message_parts").fetchone()) == ("DELIVERED",)
        assert a.execute("SELECT count(*) FROM message_actions").fetchone()[0] == 0
    finally:
        a.close()
        b.close()


def test_a_campaigns_decision_leaves_out_a_message_a_report_settled_meanwhile(
        pg_url: str) -> None:
    a, b = PgConnection.connect(pg_url), PgConnection.connect(pg_url)
    try:
        submitted_message(a)
        ensure_list(a, 1, "people", 0)
        create_campaign(a, NewCampaign(1, "people", "sim", "hi", "key-1"), 0)
        a.execute("INSERT INTO messages (ref, account_id, provider, msisdn, body, state,"
                  " next_attempt_at, created_at, updated_at) VALUES"
                  " ('ref-2', 1, 'sim', '+905321000002', 'hi', 'UNCERTAIN', 0, 0, 0)")
        a.execute("UPDATE messages SET state = 'UNCERTAIN', campaign_id = 1")
        a.execute("UPDATE message_parts SET state = 'UNCERTAIN'")
        delivered = report(a, "delivered", "DELIVERED", 2000)
        # A has found the campaign's two uncertain messages; then B settles one's report.
        paused = PausedAfter(a, "SELECT id FROM messages WHERE campaign_id")
        outcome: dict[str, Any] = {}

        def deciding() -> None:
            paused.execute("BEGIN")
            outcome["resolved"] = resolve_campaign(paused, 1, RESEND, "alice", 20)
            paused.execute("COMMIT")

        first = threading.Thread(target=deciding)
        first.start()
        assert paused.reached.wait(10)
        b.execute("BEGIN")
        assert settle(b, delivered, 10) is Verdict.APPLY
        b.execute("COMMIT")
        paused.go.set()
        first.join(10)
        assert outcome == {"resolved": 1}
        states = a.execute("SELECT ref, state FROM messages ORDER BY ref").fetchall()
        assert [tuple(r) for r in states] == [("ref-1", "DELIVERED"), ("ref-2", "RETRY")]
        actions = a.execute("SELECT message_id, action FROM message_actions").fetchall()
        assert [tuple(r) for r in actions] == [(2, "resend")]
    finally:
        a.close()
        b.close()


def test_a_pause_sent_beside_a_cancel_never_brings_the_campaign_back(pg_url: str) -> None:
    a, b = PgConnection.connect(pg_url), PgConnection.connect(pg_url)
    try:
        submitted_message(a)
        ensure_list(a, 1, "people", 0)
        create_campaign(a, NewCampaign(1, "people", "sim", "hi", "key-1"), 0)
        a.execute("INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn,"
                  " body, state, next_attempt_at, created_at, updated_at) VALUES"
                  " ('ref-2', 1, 1, 'sim', '+905321000002', 'hi', 'QUEUED', 0, 0, 0)")
        a.execute("BEGIN")
        cancel_campaign(a, 1, 1, 10)  # A cancels and holds its unit open
        outcome: dict[str, Any] = {}

        def pausing() -> None:
            b.execute("BEGIN")
            try:
                outcome["state"] = pause_campaign(b, 1, 1, 11).state
                b.execute("COMMIT")
            except NotAllowed as exc:
                outcome["refused"] = str(exc)
                b.execute("ROLLBACK")

        thread = threading.Thread(target=pausing)
        thread.start()
        thread.join(0.3)
        assert thread.is_alive(), "the pause waits for the cancel's unit"
        a.execute("COMMIT")
        thread.join(10)
        assert outcome == {"refused": "the campaign is cancelled"}, outcome
        assert tuple(a.execute("SELECT state FROM campaigns").fetchone()) == ("CANCELLED",)
    finally:
        a.close()
        b.close()
