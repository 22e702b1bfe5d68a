"""The webhook outbox in the store (OPS-5, TEAM-2, TEAM-3): its events, their delivery.

Status events are written by the triggers on ``messages``
(:mod:`appliance.store.webhook_triggers`), in the transaction of the state change,
whichever code made it; an inbound message is forwarded by :func:`forward_inbound`, in
the unit that files it. Every event names its receiver (``receiver``: an account's own,
or ``0``, the ``[webhooks]`` one; :mod:`appliance.webhooks.receivers`). The triggers
exist only while some receiver does: :func:`set_receiver` makes them at a start with
``[webhooks]`` configured or an account with a receiver, and drops them at a start with
neither, so an appliance without webhooks pays nothing per state change. Per message
only the oldest undelivered event has a ``next_try_at`` (it is the message's *head*);
the unit that records a head's ``2xx`` also makes the message's next event the head. So
a message's events go out one after the other, in the order they were written, and
different messages' heads go out side by side. An inbound event is a head of its own.

Every function here is a read unit or a write unit (a function of a connection).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from appliance.store import dialect, webhook_triggers
from appliance.store.connection import Connection
from appliance.store.rows import as_int
from appliance.webhooks import triggers
from appliance.webhooks.events import (
    DEFAULT_RECEIVER,
    EVENT_COLUMNS,
    EVENT_FROM,
    Event,
    event_of,
)
from appliance.webhooks.health import OutboxHealth, outbox_health, waiting_events
from appliance.webhooks.receivers import health_row, receiver_for

__all__ = ["Event", "Gate", "OutboxHealth", "due_events", "forward_inbound",
           "mark_delivered", "outbox_health", "prune_delivered", "record_failure",
           "set_receiver", "try_now", "waiting_events"]

ERROR_CHARS = 300


@dataclass(frozen=True)
class Gate:
    """A receiver's backoff: failures since the last ``2xx``, and no new POST before
    ``paused_until`` (our clock)."""

    failures: int = 0
    paused_until: int = 0


def set_receiver(conn: Connection, url: str | None, now_ms: int) -> Gate:
    """Turn the ``[webhooks]`` receiver on for ``url``, or off (``None``): a write unit,
    run at each start. The triggers are made while some receiver is on (this one, or an
    account's own) and dropped while none is (on PostgreSQL the start's
    :func:`appliance.runtime.install_postgresql_triggers` does it).

    A new URL starts with a clean backoff; the same one keeps where it was, so a restart
    does not hammer a receiver that is down. Events already written stay either way.
    """
    if not dialect.of(conn).is_postgresql:  # made afresh: a new version's take over
        triggers.switch(conn, webhook_triggers.wanted(conn, url is not None))
    if url is None:  # its row says off, so an account's receiver takes no one else's events
        conn.execute("INSERT INTO webhook_receiver (id, url, enabled, updated_at)"
                     " VALUES (1, '', 0, ?) ON CONFLICT (id) DO UPDATE SET enabled = 0,"
                     " updated_at = excluded.updated_at", (now_ms,))
        return Gate()
    conn.execute(
        "INSERT INTO webhook_receiver (id, url, enabled, updated_at) VALUES (1, ?, 1, ?)"
        " ON CONFLICT (id) DO UPDATE SET enabled = 1, updated_at = excluded.updated_at,"
        " consecutive_failures = CASE WHEN webhook_receiver.url = excluded.url"
        "  THEN webhook_receiver.consecutive_failures ELSE 0 END,"
        " paused_until = CASE WHEN webhook_receiver.url = excluded.url"
        "  THEN webhook_receiver.paused_until ELSE 0 END,"
        " url = excluded.url",
        (url, now_ms))
    return stored_gate(conn, DEFAULT_RECEIVER)


def stored_gate(conn: Connection, receiver: int) -> Gate:
    """The receiver's backoff as stored (a clean one when it has no row)."""
    where = health_row(receiver)
    row = conn.execute(f"SELECT consecutive_failures, paused_until FROM {where.table}"
                       f" WHERE {where.where}", where.args).fetchone()
    return Gate() if row is None else Gate(as_int(row[0]), as_int(row[1]))


def due_events(conn: Connection, now_ms: int, limit: int, receiver: int | None = None
               ) -> tuple[list[Event], int | None]:
    """Up to ``limit`` heads due now for ``receiver`` (``None``: any), longest due
    first, and when its next one not due yet is (a read unit). One receiver's heads are
    read by its own index range: another's backlog is never in the way."""
    which, args = ("", ()) if receiver is None else ("w.receiver = ? AND ", (receiver,))
    due = [event_of(r) for r in conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM {EVENT_FROM} WHERE {which}w.next_try_at IS NOT NULL"
        " AND w.next_try_at <= ? ORDER BY w.next_try_at, w.id LIMIT ?",
        (*args, now_ms, limit))]
    row = conn.execute(f"SELECT MIN(w.next_try_at) FROM webhook_outbox w WHERE {which}"
                       "w.next_try_at IS NOT NULL AND w.next_try_at > ?",
                       (*args, now_ms)).fetchone()
    return due, None if row is None or row[0] is None else int(row[0])


def mark_delivered(conn: Connection, event: Event, now_ms: int) -> bool:
    """The receiver answered ``2xx`` for ``event`` (a write unit): it is delivered, and
    its message's next event becomes the head. False if it was delivered already."""
    status = event.inbound is None
    if status and dialect.of(conn).is_postgresql:
        # A unit that changes this message writes its next event in the same transaction
        # (store/pg_triggers.py), holding the message's row: wait for it to commit, so the
        # next head below sees that event, or it sees this one delivered and makes its
        # own event the head. Without the lock, each misses the other's change and the
        # event is never sent (two writers at once: several processes, each with its own).
        conn.execute("SELECT id FROM messages WHERE id = ? FOR UPDATE",
                     (event.message_id,)).fetchall()
    conn.execute("UPDATE webhook_outbox SET delivered_at = ?, next_try_at = NULL"
                 " WHERE id = ? AND delivered_at IS NULL", (now_ms, event.id))
    if conn.changes() == 0:
        return False
    if status:  # an inbound event is a head of its own: nothing waits behind it
        # The next head is due at once: at its own time, so the oldest events go first.
        conn.execute(
            "UPDATE webhook_outbox SET next_try_at = CASE WHEN at < ? THEN at ELSE ? END"
            " WHERE id = (SELECT MIN(id) FROM webhook_outbox WHERE message_id = ?"
            " AND delivered_at IS NULL)", (now_ms, now_ms, event.message_id))
    where = health_row(event.receiver)
    conn.execute(
        f"UPDATE {where.table} SET delivered = delivered + 1, consecutive_failures = 0,"
        f" paused_until = 0, last_success_at = ?, updated_at = ? WHERE {where.where}",
        (now_ms, now_ms, *where.args))
    return True


def record_failure(conn: Connection, event: Event, error: str, retry_at: int,
                   gate: Gate, now_ms: int) -> None:
    """A POST of ``event`` got no ``2xx`` (a write unit): it is tried again at
    ``retry_at``, and its receiver's backoff is ``gate``."""
    conn.execute(
        "UPDATE webhook_outbox SET attempts = attempts + 1, last_error = ?, next_try_at = ?"
        " WHERE id = ? AND delivered_at IS NULL", (error[:ERROR_CHARS], retry_at, event.id))
    where = health_row(event.receiver)
    conn.execute(
        f"UPDATE {where.table} SET failed_attempts = failed_attempts + 1,"
        " consecutive_failures = ?, paused_until = ?, last_error = ?, last_error_at = ?,"
        f" updated_at = ? WHERE {where.where}",
        (gate.failures, gate.paused_until, error[:ERROR_CHARS], now_ms, now_ms, *where.args))


def try_now(conn: Connection, now_ms: int, receiver: int = DEFAULT_RECEIVER) -> int:
    """The operator's *Try now* (a write unit): every waiting head of ``receiver`` is due
    now and its backoff is over. Returns how many heads were waiting on a backoff."""
    conn.execute("UPDATE webhook_outbox SET next_try_at = ? WHERE receiver = ?"
                 " AND next_try_at IS NOT NULL AND next_try_at > ?",
                 (now_ms, receiver, now_ms))
    moved = int(conn.changes())
    where = health_row(receiver)
    conn.execute(f"UPDATE {where.table} SET consecutive_failures = 0, paused_until = 0,"
                 f" updated_at = ? WHERE {where.where}", (now_ms, *where.args))
    return moved


def forward_inbound(conn: Connection, inbound_id: int, accounts: Iterable[int],
                    now_ms: int) -> list[int]:
    """An inbound message filed whole goes, as an ``inbound.received`` event, to the
    receiver of each account it is listed to (a part of the filing unit): one event per
    receiver (two accounts without their own share the ``[webhooks]`` one), none for a
    message no account lists. Returns the receivers it goes to."""
    receivers = sorted({r for a in accounts if (r := receiver_for(conn, a)) is not None})
    for receiver in receivers:
        conn.execute(
            "INSERT INTO webhook_outbox (event_id, message_id, ref, state, previous,"
            " campaign_id, at, next_try_at, receiver, inbound_id)"
            " VALUES (?, 0, '', 'RECEIVED', NULL, NULL, ?, ?, ?, ?)",
            ("evt_" + secrets.token_hex(16), now_ms, now_ms, receiver, inbound_id))
    return receivers


def prune_delivered(conn: Connection, cutoff_ms: int, batch: int) -> int:
    """Delivered events older than ``cutoff_ms`` (a retention write unit); undelivered
    ones are never pruned."""
    conn.execute(
        "DELETE FROM webhook_outbox WHERE id IN (SELECT id FROM webhook_outbox"
        " WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?)",
        (cutoff_ms, batch))
    return int(conn.changes())
