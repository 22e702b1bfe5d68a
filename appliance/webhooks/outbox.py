"""The webhook outbox in the store (OPS-5): its events, their delivery, its health.

The events themselves are written by the triggers on ``messages``
(:mod:`appliance.store.webhook_triggers`), in the transaction of the state change,
whichever code made it. The triggers exist
only while webhooks are on: :func:`set_receiver` creates them at a start with
``[webhooks]`` configured and drops them at a start without, so an appliance without
webhooks pays nothing per state change. Per message only the oldest undelivered event has a
``next_try_at`` (it is the message's *head*); the unit that records a head's ``2xx``
also makes the message's next event the head. So a message's events go out one after
the other, in the order they were written, and different messages' heads go out side
by side.

Every function here is a read unit or a write unit (a function of a connection).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from appliance.clock import iso
from appliance.store import dialect, webhook_triggers
from appliance.store.connection import Connection
from appliance.store.rows import as_int

ERROR_CHARS = 300
# The events are written by triggers defined once for both engines (see that module for
# which state changes are events); on SQLite they are made and dropped here.
TRIGGER_NAMES = webhook_triggers.NAMES
TRIGGERS = webhook_triggers.sqlite_ddl()


@dataclass(frozen=True)
class Event:
    """One outbox row: an event to deliver."""

    id: int  # the outbox row: the order events were written in
    event_id: str
    message_id: int
    ref: str
    state: str
    previous: str | None
    campaign_id: int | None
    at: int
    attempts: int = 0
    next_try_at: int | None = None
    last_error: str | None = None

    def payload(self) -> dict[str, Any]:
        return {"event_id": self.event_id, "ref": self.ref, "state": self.state,
                "previous": self.previous, "at": iso(self.at), "campaign_id": self.campaign_id}

    def body(self) -> bytes:
        """The request body: compact UTF-8 JSON, the bytes the signature covers."""
        return json.dumps(self.payload(), separators=(",", ":"), ensure_ascii=False).encode()


_EVENT_COLUMNS = ("id, event_id, message_id, ref, state, previous, campaign_id, at, attempts,"
                  " next_try_at, last_error")


def _event(row: Any) -> Event:
    return Event(int(row[0]), str(row[1]), int(row[2]), str(row[3]), str(row[4]),
                 None if row[5] is None else str(row[5]),
                 None if row[6] is None else int(row[6]), int(row[7]), int(row[8]),
                 None if row[9] is None else int(row[9]),
                 None if row[10] is None else str(row[10]))


@dataclass(frozen=True)
class Gate:
    """The receiver's backoff: failures since the last ``2xx``, and no new POST before
    ``paused_until`` (our clock)."""

    failures: int = 0
    paused_until: int = 0


def set_receiver(conn: Connection, url: str | None, now_ms: int) -> Gate:
    """Turn events on for ``url`` (the triggers made), or off (``None``: the triggers
    dropped): a write unit, run at each start.

    A new URL starts with a clean backoff; the same one keeps where it was, so a restart
    does not hammer a receiver that is down. Events already written stay either way.
    """
    sqlite = not dialect.of(conn).is_postgresql  # PostgreSQL's: store.pg_triggers.install
    for name in TRIGGER_NAMES if sqlite else ():  # made afresh: a new version's take over
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    if url is None:
        conn.execute("UPDATE webhook_receiver SET enabled = 0, updated_at = ? WHERE id = 1",
                     (now_ms,))
        return Gate()
    if sqlite:
        conn.execute(TRIGGERS)
    conn.execute(
        "INSERT INTO webhook_receiver (id, url, enabled, updated_at) VALUES (1, ?, 1, ?)"
        " ON CONFLICT (id) DO UPDATE SET enabled = 1, updated_at = excluded.updated_at,"
        " consecutive_failures = CASE WHEN webhook_receiver.url = excluded.url"
        "  THEN webhook_receiver.consecutive_failures ELSE 0 END,"
        " paused_until = CASE WHEN webhook_receiver.url = excluded.url"
        "  THEN webhook_receiver.paused_until ELSE 0 END,"
        " url = excluded.url",
        (url, now_ms))
    row = conn.execute("SELECT consecutive_failures, paused_until FROM webhook_receiver"
                       " WHERE id = 1").fetchone()
    assert row is not None
    return Gate(as_int(row[0]), as_int(row[1]))


def due_events(conn: Connection, now_ms: int, limit: int) -> tuple[list[Event], int | None]:
    """Up to ``limit`` heads due now, longest due first, and when the next one not due
    yet is (a read unit)."""
    due = [_event(r) for r in conn.execute(
        f"SELECT {_EVENT_COLUMNS} FROM webhook_outbox"
        " WHERE next_try_at IS NOT NULL AND next_try_at <= ? ORDER BY next_try_at, id LIMIT ?",
        (now_ms, limit))]
    row = conn.execute("SELECT MIN(next_try_at) FROM webhook_outbox WHERE next_try_at IS NOT NULL"
                       " AND next_try_at > ?", (now_ms,)).fetchone()
    return due, None if row is None or row[0] is None else int(row[0])


def mark_delivered(conn: Connection, event: Event, now_ms: int) -> bool:
    """The receiver answered ``2xx`` for ``event`` (a write unit): it is delivered, and
    its message's next event becomes the head. False if it was delivered already."""
    if dialect.of(conn).is_postgresql:
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
    # The next head is due at once: at its own time, so the oldest events go first.
    conn.execute(
        "UPDATE webhook_outbox SET next_try_at = CASE WHEN at < ? THEN at ELSE ? END"
        " WHERE id = (SELECT MIN(id) FROM webhook_outbox WHERE message_id = ?"
        " AND delivered_at IS NULL)", (now_ms, now_ms, event.message_id))
    conn.execute(
        "UPDATE webhook_receiver SET delivered = delivered + 1, consecutive_failures = 0,"
        " paused_until = 0, last_success_at = ?, updated_at = ? WHERE id = 1",
        (now_ms, now_ms))
    return True


def record_failure(conn: Connection, event: Event, error: str, retry_at: int,
                   gate: Gate, now_ms: int) -> None:
    """A POST of ``event`` got no ``2xx`` (a write unit): it is tried again at
    ``retry_at``, and the receiver's backoff is ``gate``."""
    conn.execute(
        "UPDATE webhook_outbox SET attempts = attempts + 1, last_error = ?, next_try_at = ?"
        " WHERE id = ? AND delivered_at IS NULL", (error[:ERROR_CHARS], retry_at, event.id))
    conn.execute(
        "UPDATE webhook_receiver SET failed_attempts = failed_attempts + 1,"
        " consecutive_failures = ?, paused_until = ?, last_error = ?, last_error_at = ?,"
        " updated_at = ? WHERE id = 1",
        (gate.failures, gate.paused_until, error[:ERROR_CHARS], now_ms, now_ms))


def try_now(conn: Connection, now_ms: int) -> int:
    """The operator's *Try now* (a write unit): every waiting head is due now and the
    receiver's backoff is over. Returns how many heads were waiting on a backoff."""
    conn.execute("UPDATE webhook_outbox SET next_try_at = ? WHERE next_try_at IS NOT NULL"
                 " AND next_try_at > ?", (now_ms, now_ms))
    moved = int(conn.changes())
    conn.execute("UPDATE webhook_receiver SET consecutive_failures = 0, paused_until = 0,"
                 " updated_at = ? WHERE id = 1", (now_ms,))
    return moved


def prune_delivered(conn: Connection, cutoff_ms: int, batch: int) -> int:
    """Delivered events older than ``cutoff_ms`` (a retention write unit); undelivered
    ones are never pruned."""
    conn.execute(
        "DELETE FROM webhook_outbox WHERE id IN (SELECT id FROM webhook_outbox"
        " WHERE delivered_at IS NOT NULL AND delivered_at < ? ORDER BY delivered_at LIMIT ?)",
        (cutoff_ms, batch))
    return int(conn.changes())


# -- health ------------------------------------------------------------------------

@dataclass(frozen=True)
class OutboxHealth:
    """How delivering goes: what the console, ``/api/stats``, metrics and alerts show."""

    enabled: bool = False  # events are being written (webhooks configured at the last start)
    url: str | None = None
    waiting: int = 0  # events not delivered yet
    oldest_waiting_at: int | None = None  # when the oldest of them happened
    oldest_waiting_age_s: float | None = None
    delivered: int = 0  # ever
    failed_attempts: int = 0  # ever
    consecutive_failures: int = 0
    paused_until: int = 0
    last_success_at: int | None = None
    last_error: str | None = None
    last_error_at: int | None = None

    @property
    def written(self) -> int:
        """Events ever written: each one is delivered or waiting."""
        return self.delivered + self.waiting

    def as_json(self) -> dict[str, Any]:
        return {"enabled": self.enabled, "waiting": self.waiting,
                "oldest_waiting_at": iso(self.oldest_waiting_at),
                "oldest_waiting_age_s": self.oldest_waiting_age_s,
                "written": self.written, "delivered": self.delivered,
                "failed_attempts": self.failed_attempts,
                "consecutive_failures": self.consecutive_failures,
                "paused_until": iso(self.paused_until or None),
                "last_success_at": iso(self.last_success_at),
                "last_error": self.last_error, "last_error_at": iso(self.last_error_at)}


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def outbox_health(conn: Connection, now_ms: int) -> OutboxHealth:
    """The outbox's health as of ``now_ms`` (a read unit; index reads only)."""
    count: Any = conn.execute(
        "SELECT count(*) FROM webhook_outbox WHERE delivered_at IS NULL").fetchone()
    oldest: Any = conn.execute(
        "SELECT at FROM webhook_outbox WHERE delivered_at IS NULL ORDER BY id LIMIT 1").fetchone()
    row: Any = conn.execute(
        "SELECT enabled, url, delivered, failed_attempts, consecutive_failures, paused_until,"
        " last_success_at, last_error, last_error_at FROM webhook_receiver WHERE id = 1"
    ).fetchone()
    oldest_at = None if oldest is None else int(oldest[0])
    age = None if oldest_at is None else round(max(0, now_ms - oldest_at) / 1000, 1)
    waiting = int(count[0]) if count else 0
    if row is None:
        return OutboxHealth(waiting=waiting, oldest_waiting_at=oldest_at,
                            oldest_waiting_age_s=age)
    return OutboxHealth(
        enabled=bool(row[0]), url=str(row[1]), waiting=waiting, oldest_waiting_at=oldest_at,
        oldest_waiting_age_s=age, delivered=int(row[2]), failed_attempts=int(row[3]),
        consecutive_failures=int(row[4]), paused_until=int(row[5]),
        last_success_at=_int(row[6]), last_error=None if row[7] is None else str(row[7]),
        last_error_at=_int(row[8]))


def waiting_events(conn: Connection, limit: int) -> list[Event]:
    """The oldest undelivered events, oldest first (a read unit), for people."""
    return [_event(r) for r in conn.execute(
        f"SELECT {_EVENT_COLUMNS} FROM webhook_outbox WHERE delivered_at IS NULL"
        " ORDER BY id LIMIT ?", (limit,))]
