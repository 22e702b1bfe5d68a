"""TEAM-2 and TEAM-3 in the store: which receiver each event is written for.

An account with a receiver of its own gets its events there whatever ``[webhooks]``
says; an account without one gets them at ``[webhooks]`` while it is on and has none
written while it is off. Each receiver's heads, backoff and *Try now* are its own.
Clearing a receiver hands its waiting events to ``[webhooks]``. An inbound message is
forwarded once per receiver of the accounts it is listed to, and to nobody when no
account lists it. Real SQLite, the real units.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from appliance.inbound.store import InboundRules
from appliance.optout.keywords import Keywords
from appliance.providers.base import InboundMessage
from appliance.sending.accept import NewMessage, insert_message
from appliance.store.schema import migrate, open_connection
from appliance.webhooks.health import outbox_health
from appliance.webhooks.outbox import (
    Gate,
    due_events,
    mark_delivered,
    record_failure,
    set_receiver,
    try_now,
)
from appliance.webhooks.receivers import clear_account_receiver, set_account_receiver

NOW = 1_700_000_000_000
URL = "http://127.0.0.1:9/hooks"
ALPHA, BETA, GAMMA = 1, 2, 3


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[apsw.Connection]:
    path = str(tmp_path / "appliance.db")
    migrate(path)
    c = open_connection(path)
    c.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'alpha', 0),"
              " (2, 'beta', 0), (3, 'gamma', 0)")
    try:
        yield c
    finally:
        c.close()


def accept(conn: apsw.Connection, account: int, ref: str, to: str) -> None:
    insert_message(conn, NewMessage(account, "sim", to, "hello"), ref, NOW)


def receivers(conn: apsw.Connection) -> dict[str, int]:
    return {str(ref): int(r) for ref, r in conn.execute(
        "SELECT ref, receiver FROM webhook_outbox WHERE inbound_id IS NULL")}


def test_an_account_receiver_takes_its_events_whatever_webhooks_says(
        conn: apsw.Connection) -> None:
    set_receiver(conn, None, NOW)  # a start without [webhooks]
    set_account_receiver(conn, ALPHA, URL + "/a", "sa", NOW)
    accept(conn, ALPHA, "a1", "+905321230001")
    accept(conn, BETA, "b1", "+905321230002")
    assert receivers(conn) == {"a1": ALPHA}  # beta: [webhooks] is off, nothing written
    set_receiver(conn, URL, NOW + 1)  # a start with it
    accept(conn, BETA, "b2", "+905321230003")
    accept(conn, ALPHA, "a2", "+905321230004")
    assert receivers(conn) == {"a1": ALPHA, "b2": 0, "a2": ALPHA}
    # A start without [webhooks] keeps the triggers for alpha's receiver.
    set_receiver(conn, None, NOW + 2)
    accept(conn, ALPHA, "a3", "+905321230005")
    accept(conn, BETA, "b3", "+905321230006")
    assert set(receivers(conn)) == {"a1", "b2", "a2", "a3"}


def test_each_receiver_has_its_own_heads_backoff_and_try_now(conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    set_account_receiver(conn, ALPHA, URL + "/a", "sa", NOW)
    for n in range(5):
        accept(conn, ALPHA, f"a{n}", f"+9053212300{n:02d}")
    accept(conn, BETA, "b0", "+905321239900")
    due_a, _ = due_events(conn, NOW, 2, ALPHA)
    due_b, _ = due_events(conn, NOW, 2, 0)
    assert [e.ref for e in due_a] == ["a0", "a1"] and [e.ref for e in due_b] == ["b0"]
    # alpha's receiver fails: its backoff is its own.
    record_failure(conn, due_a[0], "cannot connect", NOW + 5000, Gate(1, NOW + 5000), NOW)
    assert (outbox_health(conn, NOW, ALPHA).consecutive_failures,
            outbox_health(conn, NOW, 0).consecutive_failures) == (1, 0)
    assert mark_delivered(conn, due_b[0], NOW + 1)
    assert outbox_health(conn, NOW + 1, 0).delivered == 1
    assert outbox_health(conn, NOW + 1, ALPHA).waiting == 5
    assert try_now(conn, NOW + 2, 0) == 0  # beta's [webhooks] receiver: nothing held
    assert outbox_health(conn, NOW + 2, ALPHA).paused_until == NOW + 5000
    assert try_now(conn, NOW + 2, ALPHA) == 1
    assert outbox_health(conn, NOW + 2, ALPHA).paused_until == 0


def test_clearing_a_receiver_hands_its_waiting_events_to_webhooks(
        conn: apsw.Connection) -> None:
    set_receiver(conn, URL, NOW)
    set_account_receiver(conn, ALPHA, URL + "/a", "sa", NOW)
    accept(conn, ALPHA, "a1", "+905321230001")
    assert clear_account_receiver(conn, ALPHA) == 1
    assert clear_account_receiver(conn, ALPHA) is None
    accept(conn, ALPHA, "a2", "+905321230002")
    assert receivers(conn) == {"a1": 0, "a2": 0}


def test_an_inbound_message_goes_to_the_receivers_of_the_accounts_that_messaged_it(
        conn: apsw.Connection) -> None:
    from appliance.inbound.store import file_message

    set_receiver(conn, URL, NOW)
    set_account_receiver(conn, ALPHA, URL + "/a", "sa", NOW)
    accept(conn, ALPHA, "a1", "+905321230001")
    accept(conn, BETA, "b1", "+905321230001")
    accept(conn, GAMMA, "g1", "+905321230001")
    rules = InboundRules(Keywords(["STOP"]), "TR")

    def mo(sender: str, msg_id: str) -> int:
        msg = InboundMessage(msisdn=sender, to="ACME", text="hi", provider_msg_id=msg_id)
        return file_message(conn, rules, "sim", msg, 0, NOW + 10).inbound_id

    listed = mo("905321230001", "m1")
    # alpha's own receiver; beta and gamma share [webhooks]: one event there.
    rows = conn.execute("SELECT receiver FROM webhook_outbox WHERE inbound_id = ?"
                        " ORDER BY receiver", (listed,)).fetchall()
    assert rows == [(0,), (ALPHA,)]
    due, _ = due_events(conn, NOW + 10, 10, ALPHA)
    [event] = [e for e in due if e.inbound is not None]
    assert event.payload() | {"event_id": ""} == {
        "event_id": "", "type": "inbound.received", "from": "+905321230001", "to": "ACME",
        "text": "hi", "provider": "sim", "received_at": "2023-11-14T22:13:20.010Z"}
    assert mark_delivered(conn, event, NOW + 11)
    unlisted = mo("905321239999", "m2")
    assert conn.execute("SELECT count(*) FROM webhook_outbox WHERE inbound_id = ?",
                        (unlisted,)).fetchall() == [(0,)]
    before = conn.execute("SELECT count(*) FROM webhook_outbox").fetchall()
    mo("905321230001", "m1")  # the provider's retry: stored once, forwarded once
    assert conn.execute("SELECT count(*) FROM webhook_outbox").fetchall() == before
