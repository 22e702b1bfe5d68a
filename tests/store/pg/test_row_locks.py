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

from typing import Any

from appliance.imports.import_job import ensure_list
from appliance.reports.apply import settle
from appliance.reports.cutoff import cut_off
from appliance.reports.inbox import InboxReport, file_report
from appliance.reports.states import Verdict
from appliance.sending.campaigns import NewCampaign, NotAllowed, create_campaign
from appliance.sending.resolution import (
    RESEND,
    NotUncertain,
    resolve_campaign,
    resolve_message,
)
from appliance.sending.steering import cancel_campaign, pause_campaign
from appliance.store.pg import PgConnection
from tests.store.pg.paused import PausedAfter, UnitThread

Two = tuple[PgConnection, PgConnection]
READ_PARTS = "SELECT part, provider_msg_id, state"  # where settle has judged, not written


def submitted_message(conn: PgConnection, state: str = "SUBMITTED") -> None:
    conn.execute(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, state_at,"
        " next_attempt_at, provider_msg_id, created_at, updated_at, submitted_at)"
        " VALUES ('ref-1', 1, 'sim', '+905321000001', 'hi', ?, 0, 0, 'pid-1', 0, 0, 1)",
        (state,))
    conn.execute("INSERT INTO message_parts (message_id, part, provider_msg_id, state,"
                 " state_at, updated_at) VALUES (1, 1, 'pid-1', ?, 0, 0)", (state,))


def report(conn: PgConnection, status: str, state: str, at: int) -> Any:
    waiting = file_report(conn, InboxReport("sim", "ref-1", "pid-1", status, at, state),
                          None, 5)
    assert waiting is not None
    return waiting


def one(conn: PgConnection, sql: str) -> tuple[Any, ...]:
    return tuple(conn.execute(sql).fetchone())


def with_campaign(conn: PgConnection, second_state: str) -> None:
    """Campaign 1 of list "people", its second message (ref-2) in ``second_state``."""
    ensure_list(conn, 1, "people", 0)
    create_campaign(conn, NewCampaign(1, "people", "sim", "hi", "key-1"), 0)
    conn.execute("INSERT INTO messages (ref, account_id, campaign_id, provider, msisdn,"
                 " body, state, next_attempt_at, created_at, updated_at) VALUES"
                 " ('ref-2', 1, 1, 'sim', '+905321000002', 'hi', ?, 0, 0, 0)",
                 (second_state,))


def test_an_older_intermediate_settled_beside_the_final_one_never_wins(two: Two) -> None:
    a, b = two
    submitted_message(a)
    delivered = report(a, "delivered", "DELIVERED", 2000)
    enroute = report(a, "buffered", "ENROUTE", 1000)
    a.execute("BEGIN")
    assert settle(a, delivered, 10) is Verdict.APPLY  # A holds its unit open
    other = UnitThread(b, lambda c: settle(c, enroute, 11)).start()
    assert other.waits(), "B waits for the message's lock"
    a.execute("COMMIT")
    assert other.finish().value is Verdict.STALE
    assert one(a, "SELECT state, state_at FROM message_parts") == ("DELIVERED", 2000)
    assert one(a, "SELECT state, state_at FROM messages") == ("DELIVERED", 2000)
    outcomes = a.execute("SELECT status, outcome FROM report_inbox ORDER BY id").fetchall()
    assert [tuple(r) for r in outcomes] == [("delivered", "APPLIED"), ("buffered", "STALE")]


def test_the_cut_off_beside_a_report_being_settled_waits_and_finds_it_final(
        two: Two) -> None:
    a, b = two
    submitted_message(a)
    delivered = report(a, "delivered", "DELIVERED", 2000)
    # A has locked the message and read its parts; it has not written them yet.
    paused = PausedAfter(a, READ_PARTS)
    settling = UnitThread(paused, lambda c: settle(c, delivered, 10)).start()
    assert paused.reached.wait(10)
    cutting_off = UnitThread(b, lambda c: cut_off(c, [1], 20)).start()
    assert cutting_off.waits(), "the cut-off waits for the message's lock"
    paused.go.set()
    assert settling.finish().value is Verdict.APPLY
    cutting_off.finish()
    assert (cutting_off.value, cutting_off.error) == (0, None)  # no deadlock, nothing cut
    assert one(a, "SELECT state FROM messages") == ("DELIVERED",)


def test_an_operators_decision_beside_a_report_being_settled_sees_the_report(
        two: Two) -> None:
    a, b = two
    submitted_message(a, "UNCERTAIN")
    delivered = report(a, "delivered", "DELIVERED", 2000)
    paused = PausedAfter(a, READ_PARTS)
    settling = UnitThread(paused, lambda c: settle(c, delivered, 10)).start()
    assert paused.reached.wait(10)
    resending = UnitThread(b, lambda c: resolve_message(c, 1, RESEND, "alice", 20)).start()
    assert resending.waits(), "the decision waits for the message's lock"
    paused.go.set()
    assert settling.finish().value is Verdict.APPLY
    # The provider had it after all: nothing to decide, nothing resent, no action
    # recorded that did not happen.
    assert isinstance(resending.finish().error, NotUncertain), resending.error
    assert one(a, "SELECT state FROM messages") == ("DELIVERED",)
    assert one(a, "SELECT state FROM message_parts") == ("DELIVERED",)
    assert one(a, "SELECT count(*) FROM message_actions") == (0,)


def test_a_campaigns_decision_leaves_out_a_message_a_report_settled_meanwhile(
        two: Two) -> None:
    a, b = two
    submitted_message(a, "UNCERTAIN")
    with_campaign(a, "UNCERTAIN")
    a.execute("UPDATE messages SET campaign_id = 1")
    delivered = report(a, "delivered", "DELIVERED", 2000)
    # A has found the campaign's two uncertain messages; then B settles one's report.
    paused = PausedAfter(a, "SELECT id FROM messages WHERE campaign_id")
    deciding = UnitThread(paused, lambda c: resolve_campaign(c, 1, RESEND, "alice", 20))
    deciding.start()
    assert paused.reached.wait(10)
    assert UnitThread(b, lambda c: settle(c, delivered, 10)).start().finish().value \
        is Verdict.APPLY
    paused.go.set()
    assert deciding.finish().value == 1
    states = a.execute("SELECT ref, state FROM messages ORDER BY ref").fetchall()
    assert [tuple(r) for r in states] == [("ref-1", "DELIVERED"), ("ref-2", "RETRY")]
    actions = a.execute("SELECT message_id, action FROM message_actions").fetchall()
    assert [tuple(r) for r in actions] == [(2, "resend")]


def test_a_pause_sent_beside_a_cancel_never_brings_the_campaign_back(two: Two) -> None:
    a, b = two
    submitted_message(a)
    with_campaign(a, "QUEUED")
    a.execute("BEGIN")
    cancel_campaign(a, 1, 1, 10)  # A cancels and holds its unit open
    pausing = UnitThread(b, lambda c: pause_campaign(c, 1, 1, 11)).start()
    assert pausing.waits(), "the pause waits for the cancel's unit"
    a.execute("COMMIT")
    assert isinstance(pausing.finish().error, NotAllowed), pausing.value
    assert str(pausing.error) == "the campaign is cancelled"
    assert one(a, "SELECT state FROM campaigns") == ("CANCELLED",)
