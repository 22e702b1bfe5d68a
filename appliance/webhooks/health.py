"""How delivering goes (OPS-5, TEAM-2): each receiver's health, and the outbox's totals.

A receiver's health is its own: the events waiting for it, and its row's counters and
backoff (``webhook_receiver`` for ``[webhooks]``, ``account_receivers`` for an
account's). ``/api/stats`` and the console show the caller's account's receiver (its
own, else ``[webhooks]``), the ``outbox_stale`` alert looks at each receiver, and the
metrics count every receiver's events together.

Every function here is a read unit (index reads only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from appliance.clock import iso
from appliance.store.connection import Connection
from appliance.webhooks.events import DEFAULT_RECEIVER, EVENT_COLUMNS, EVENT_FROM, Event, event_of
from appliance.webhooks.receivers import health_row


@dataclass(frozen=True)
class OutboxHealth:
    """How delivering to a receiver goes (or, from :func:`outbox_totals`, to all)."""

    enabled: bool = False  # events are being written for it
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
    receiver: int = DEFAULT_RECEIVER

    @property
    def written(self) -> int:
        """Events ever written: each one is delivered or waiting."""
        return self.delivered + self.waiting

    def as_json(self) -> dict[str, Any]:
        return {"receiver": "webhooks" if self.receiver == DEFAULT_RECEIVER else "account",
                "enabled": self.enabled, "waiting": self.waiting,
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


def _age(oldest_at: int | None, now_ms: int) -> float | None:
    return None if oldest_at is None else round(max(0, now_ms - oldest_at) / 1000, 1)


def _waiting(conn: Connection, receiver: int | None) -> tuple[int, int | None]:
    which, args = ("", ()) if receiver is None else ("receiver = ? AND ", (receiver,))
    count: Any = conn.execute(f"SELECT count(*) FROM webhook_outbox WHERE {which}"
                              "delivered_at IS NULL", args).fetchone()
    oldest: Any = conn.execute(f"SELECT at FROM webhook_outbox WHERE {which}"
                               "delivered_at IS NULL ORDER BY id LIMIT 1", args).fetchone()
    return (int(count[0]) if count else 0), (None if oldest is None else int(oldest[0]))


def outbox_health(conn: Connection, now_ms: int,
                  receiver: int = DEFAULT_RECEIVER) -> OutboxHealth:
    """``receiver``'s health as of ``now_ms``."""
    waiting, oldest_at = _waiting(conn, receiver)
    age = _age(oldest_at, now_ms)
    where = health_row(receiver)
    enabled = "enabled" if receiver == DEFAULT_RECEIVER else "1"
    row: Any = conn.execute(
        f"SELECT {enabled}, url, delivered, failed_attempts, consecutive_failures,"
        " paused_until, last_success_at, last_error, last_error_at"
        f" FROM {where.table} WHERE {where.where}", where.args).fetchone()
    if row is None:
        return OutboxHealth(waiting=waiting, oldest_waiting_at=oldest_at,
                            oldest_waiting_age_s=age, receiver=receiver)
    return OutboxHealth(
        enabled=bool(row[0]), url=str(row[1]), waiting=waiting, oldest_waiting_at=oldest_at,
        oldest_waiting_age_s=age, delivered=int(row[2]), failed_attempts=int(row[3]),
        consecutive_failures=int(row[4]), paused_until=int(row[5]),
        last_success_at=_int(row[6]), last_error=None if row[7] is None else str(row[7]),
        last_error_at=_int(row[8]), receiver=receiver)


def outbox_totals(conn: Connection, now_ms: int) -> OutboxHealth:
    """Every receiver's events together (the metrics): written, delivered, waiting and
    failed POSTs summed, the oldest waiting event of any, the last success of any;
    ``enabled`` while some receiver is."""
    waiting, oldest_at = _waiting(conn, None)
    row: Any = conn.execute(
        "SELECT sum(on_), sum(delivered), sum(failed_attempts), max(last_success_at) FROM"
        " (SELECT enabled AS on_, delivered, failed_attempts, last_success_at"
        "  FROM webhook_receiver UNION ALL SELECT 1, delivered, failed_attempts,"
        "  last_success_at FROM account_receivers) AS r").fetchone()
    return OutboxHealth(
        enabled=bool(row and row[0]), waiting=waiting, oldest_waiting_at=oldest_at,
        oldest_waiting_age_s=_age(oldest_at, now_ms), delivered=int(row[1] or 0),
        failed_attempts=int(row[2] or 0), last_success_at=_int(row[3]))


def waiting_events(conn: Connection, limit: int,
                   receiver: int = DEFAULT_RECEIVER) -> list[Event]:
    """``receiver``'s oldest undelivered events, oldest first, for people."""
    return [event_of(r) for r in conn.execute(
        f"SELECT {EVENT_COLUMNS} FROM {EVENT_FROM} WHERE w.receiver = ?"
        " AND w.delivered_at IS NULL ORDER BY w.id LIMIT ?", (receiver, limit))]
