"""OPS-5 in the store: the triggers write one event per state change, in the state
change's own transaction, and only while webhooks are on; heads keep each message's
events in order; delivered events are pruned, waiting ones never.

Real SQLite through the real units that change states (accept, claim, record the
outcome, apply a report, cut off, cancel at claim), on a fresh file each.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.providers.base import Outcome, SubmitResult
from appliance.reports.apply import receive
from appliance.reports.cutoff import cut_off
from appliance.reports.inbox import InboxReport, RawCallback
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.claims import claim_due, mark_sending
from appliance.sending.outcomes import Recorded, record_outcomes
from appliance.store.schema import migrate, open_connection
from appliance.webhooks.outbox import (
    Event,
    Gate,
    due_events,
    mark_delivered,
    outbox_health,
    prune_delivered,
    record_failure,
    set_receiver,
    try_now,
)

NOW = 1_700_000_000_000
P = "sim"
URL = "http://127.0.0.1:9/hooks"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    path = str(tmp_path / "appliance.db")
    migrate(path)
    c = open_connection(path)
    c.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'acme', 0)")
    try:
        yield c
    finally:
        c.close()


def accept(conn: apsw.Connection, ref: str, now: int = NOW, to: str = "+905321230001") -> int:
    insert_message(conn, NewMessage(1, P, to, "hello"), ref, now)
    row = conn.execute("SELECT id FROM messages WHERE ref = ?", (ref,)).fetchone()
    assert row is not None
    return int(row[0])


def attempt(conn: apsw.Connection, result: SubmitResult, now: int, pid: str | None = None
            ) -> Recorded:
    # The sender's two steps: reserve a batch, then make each SENDING as it goes.
    claimed = mark_sending(conn, claim_due(conn, P, now, 10), now)
    assert claimed, "nothing was due"
    return record_outcomes(conn, P, [(m, Outcome(result, pid)) for m in claimed], now,
                           max_attempts=8, dedupes_on_ref=False, map_provider_ids=False)


def report(conn: apsw.Connection, ref: str, state: str, now: int) -> None:
    raw = RawCallback(P, "POST", "application/json", "", b"{}")
    receive(conn, raw, [InboxReport(P, ref, "", state.lower(), now, state)], None, now)


def events(conn: apsw.Connection, ref: str | None = None) -> list[dict[str, Any]]:
    names = [str(r[0]) for r in
             conn.execute("SELECT name FROM pragma_table_info('webhook_outbox')")]
    where = " WHERE ref = ?" if ref else ""
    rows = conn.execute(f"SELECT * FROM webhook_outbox{where} ORDER BY id",
                        (ref,) if ref else ())
    return [dict(zip(names, r, strict=True)) for r in rows]


def chain(conn: apsw.Connection, ref: str) -> list[tuple[str | None, str]]:
    return [(e["previous"], e["state"]) for e in events(conn, ref)]


def test_nothing_is_written_while_webhooks_are_off(conn: apsw.Connection) -> None:
    accept(conn, "off1")
    attempt(conn, SubmitResult.ACCEPTED, NOW + 1, "P1")
    report(conn, "off1", "DELIVERED", NOW + 2)
    assert events(conn) == []
    set_receiver(conn, URL, NOW)
    accept(conn, "on1")
    set_receiver(conn, None, NOW + 3)  # configured once, then taken out of the config
    attempt(conn, SubmitResult.ACCEPTED, NOW + 4, "P2")
    assert chain(conn, "on1") == [(None, "QUEUED")]
    assert outbox_health(conn, NOW + 5).enabled is False
    # Off, a state change costs what it did before OPS-5: there is no webhook trigger.
    assert conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'"
                        " AND name LIKE '%webhook%'").fetchall() == []


def test_every_state_change_is_an_event_with_the_state_before_it(conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    accept(conn, "d1")
    attempt(conn, SubmitResult.ACCEPTED, NOW + 10, "P1")
    report(conn, "d1", "ENROUTE", NOW + 20)
    report(conn, "d1", "DELIVERED", NOW + 30)
    assert chain(conn, "d1") == [(None, "QUEUED"), ("QUEUED", "SUBMITTED"),
                                 ("SUBMITTED", "ENROUTE"), ("ENROUTE", "DELIVERED")]
    got = events(conn, "d1")
    assert [e["at"] for e in got] == [NOW, NOW + 10, NOW + 20, NOW + 30]
    assert len({e["event_id"] for e in got}) == 4
    assert all(e["event_id"].startswith("evt_") and len(e["event_id"]) == 36 for e in got)

    accept(conn, "u1", to="+905321230002")
    attempt(conn, SubmitResult.UNCERTAIN, NOW + 40)
    assert chain(conn, "u1") == [(None, "QUEUED"), ("QUEUED", "UNCERTAIN")]
    accept(conn, "s1", to="+905321230003")
    attempt(conn, SubmitResult.ACCEPTED, NOW + 50, "P3")
    assert cut_off(conn, [int(e["message_id"]) for e in events(conn, "s1")][:1], NOW + 60) == 1
    assert chain(conn, "s1")[-1] == ("SUBMITTED", "UNKNOWN")


def test_the_outcome_counts_are_the_messages_not_the_events_beside_them(
        conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    accept(conn, "c1")
    accept(conn, "c2", to="+905321230002")
    recorded = attempt(conn, SubmitResult.ACCEPTED, NOW + 1, "P1")
    assert (recorded.submitted, len(events(conn))) == (2, 4)


def test_sending_is_no_event_and_a_retry_that_stays_a_retry_is_no_change(
        conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    accept(conn, "r1")
    attempt(conn, SubmitResult.RETRY, NOW + 1)
    conn.execute("UPDATE messages SET next_attempt_at = 0")
    attempt(conn, SubmitResult.RETRY, NOW + 2)  # RETRY, SENDING, RETRY again
    conn.execute("UPDATE messages SET next_attempt_at = 0")
    attempt(conn, SubmitResult.REJECTED, NOW + 3)
    assert chain(conn, "r1") == [(None, "QUEUED"), ("QUEUED", "RETRY"), ("RETRY", "REJECTED")]


def test_the_event_is_part_of_the_state_change_transaction(conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    conn.execute("BEGIN")
    accept(conn, "gone")
    conn.execute("ROLLBACK")
    assert events(conn) == []
    conn.execute("BEGIN")
    accept(conn, "kept")
    conn.execute("COMMIT")
    assert chain(conn, "kept") == [(None, "QUEUED")]


def test_a_message_cancelled_at_claim_as_suppressed_says_so(conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    accept(conn, "sup")
    conn.execute("INSERT INTO suppressions (account_id, msisdn, source, created_at)"
                 " VALUES (1, '+905321230001', 'api', 0)")
    assert claim_due(conn, P, NOW + 5, 10) == []
    assert chain(conn, "sup") == [(None, "QUEUED"), ("QUEUED", "CANCELLED")]


def as_event(row: dict[str, Any]) -> Event:
    return Event(row["id"], row["event_id"], row["message_id"], row["ref"], row["state"],
                 row["previous"], row["campaign_id"], row["at"], row["attempts"])


def test_only_the_oldest_waiting_event_of_a_message_is_due(conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    accept(conn, "a")
    accept(conn, "b", NOW + 1, to="+905321230002")
    attempt(conn, SubmitResult.ACCEPTED, NOW + 10, "P1")  # both SUBMITTED
    due, later = due_events(conn, NOW + 100, 10)
    assert [(e.ref, e.state) for e in due] == [("a", "QUEUED"), ("b", "QUEUED")]
    assert later is None
    first = due[0]
    assert mark_delivered(conn, first, NOW + 200)
    assert not mark_delivered(conn, first, NOW + 201)  # a second 2xx changes nothing
    due, _ = due_events(conn, NOW + 300, 10)  # the oldest first: by when each happened
    assert [(e.ref, e.state) for e in due] == [("b", "QUEUED"), ("a", "SUBMITTED")]
    # A failure moves that head back on the ladder; the message's next event still waits.
    record_failure(conn, due[0], "answered 503", NOW + 1300, Gate(1, NOW + 1300), NOW + 300)
    due, later = due_events(conn, NOW + 300, 10)
    assert [(e.ref, e.state) for e in due] == [("a", "SUBMITTED")]
    assert later == NOW + 1300
    health = outbox_health(conn, NOW + 300)
    assert (health.waiting, health.delivered, health.failed_attempts, health.written) == \
        (3, 1, 1, 4)
    assert health.last_error == "answered 503" and health.paused_until == NOW + 1300
    assert try_now(conn, NOW + 400) == 1
    due, _ = due_events(conn, NOW + 400, 10)
    assert {e.ref for e in due} == {"a", "b"}
    assert outbox_health(conn, NOW + 400).paused_until == 0


def test_an_event_written_after_every_earlier_one_was_delivered_is_due_at_once(
        conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    accept(conn, "x")
    (queued,), _ = due_events(conn, NOW, 10)
    mark_delivered(conn, queued, NOW + 1)
    attempt(conn, SubmitResult.ACCEPTED, NOW + 2, "P1")
    due, _ = due_events(conn, NOW + 2, 10)
    assert [(e.state, e.previous) for e in due] == [("SUBMITTED", "QUEUED")]


def test_the_receiver_keeps_its_backoff_across_a_restart_unless_its_url_changed(
        conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    accept(conn, "g")
    (event,), _ = due_events(conn, NOW, 10)
    record_failure(conn, event, "cannot connect", NOW + 5000, Gate(2, NOW + 5000), NOW)
    assert set_receiver(conn, URL, NOW + 10) == Gate(2, NOW + 5000)
    assert set_receiver(conn, URL + "/new", NOW + 20) == Gate()


def test_retention_prunes_delivered_events_only(conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    accept(conn, "old")
    accept(conn, "waiting", to="+905321230002")
    due, _ = due_events(conn, NOW, 10)
    mark_delivered(conn, due[0], NOW + 1)
    assert prune_delivered(conn, NOW + 1, 100) == 0  # not older than the cut-off yet
    assert prune_delivered(conn, NOW + 2, 100) == 1
    assert [e["ref"] for e in events(conn)] == ["waiting"]
    health = outbox_health(conn, NOW + 60_000)
    assert (health.waiting, health.delivered, health.oldest_waiting_age_s) == (1, 1, 60.0)


def test_the_body_is_the_designed_json() -> None:
    event = Event(1, "evt_" + "0" * 32, 7, "REF1", "DELIVERED", "SUBMITTED", None, NOW + 5)
    assert event.body() == (b'{"event_id":"evt_00000000000000000000000000000000",'
                            b'"type":"message.status","ref":"REF1",'
                            b'"state":"DELIVERED","previous":"SUBMITTED",'
                            b'"at":"2023-11-14T22:13:20.005Z","campaign_id":null}')
