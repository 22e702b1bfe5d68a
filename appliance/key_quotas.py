"""Quotas per API key (TEAM-1): a rate of requests and a daily number of messages.

A key may carry ``rate_per_s`` (requests a second that create messages or campaigns)
and ``daily_limit`` (messages a UTC day, a campaign's included); a key without them,
as every key made before they existed, is unlimited, and the console (no key) is never
counted.

- **The rate** is a token bucket per key held by each process (:class:`KeyRates`):
  ``rate_per_s`` a second sustained, up to one second's worth (at least one) at once
  after a quiet spell. With several processes on PostgreSQL each holds its own
  buckets, so the rate a key gets is per process.
- **The daily limit** is exact, across restarts and processes: the count is a row per
  key and day (``key_daily_counts``) moved by :func:`charge_messages` in the same write
  unit that accepts the messages. Its one statement adds only while the sum stays
  within the limit (``INSERT ... ON CONFLICT DO UPDATE ... WHERE``): on PostgreSQL the
  second of two processes waits for the first's row and judges the committed sum, so
  the day's count never passes the limit, and a refused unit rolls back whole, so
  nothing refused is queued or counted. A campaign is charged its whole size when it
  is created (``total``, every contact it was made from), on the day it is created.

Past either: :class:`~appliance.refusals.TooMany` (``429``), ``rate_limited`` with the
seconds until the next token, ``daily_limit`` with the seconds until 00:00 UTC.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from appliance.rate import TokenBucket
from appliance.refusals import TooMany
from appliance.store.connection import Connection

DAY_MS = 86_400_000


@dataclass(frozen=True)
class KeyQuota:
    """The limits of the key a request came with (``None``: no such limit)."""

    key_id: int
    rate_per_s: float | None = None
    daily_limit: int | None = None


def utc_day(now_ms: int) -> int:
    """The UTC day of ``now_ms``, in days since 1970-01-01."""
    return now_ms // DAY_MS


def seconds_to_next_day(now_ms: int) -> int:
    """Whole seconds until 00:00 UTC next (at least 1): a daily refusal's Retry-After."""
    return max(1, math.ceil(((utc_day(now_ms) + 1) * DAY_MS - now_ms) / 1000))


def used_today(conn: Connection, key_id: int, now_ms: int) -> int:
    """Messages the key had accepted on ``now_ms``'s UTC day (a read)."""
    row: Any = conn.execute("SELECT messages FROM key_daily_counts WHERE key_id = ? AND day = ?",
                            (key_id, utc_day(now_ms))).fetchone()
    return 0 if row is None else int(row[0])


def charge_messages(conn: Connection, quota: KeyQuota | None, count: int, now_ms: int,
                    what: str = "this message") -> None:
    """Count ``count`` messages against the key's daily limit, in the caller's write
    unit; past the limit raise ``TooMany("daily_limit")`` (the unit then rolls back
    and nothing is queued nor counted). Nothing to do without a limit."""
    if quota is None or quota.daily_limit is None or count <= 0:
        return
    limit = quota.daily_limit
    day = utc_day(now_ms)
    row = None
    if count <= limit:
        row = conn.execute(
            "INSERT INTO key_daily_counts (key_id, day, messages) VALUES (?, ?, ?)"
            " ON CONFLICT (key_id, day) DO UPDATE"
            " SET messages = key_daily_counts.messages + excluded.messages"
            " WHERE key_daily_counts.messages + excluded.messages <= ?"
            " RETURNING messages",
            (quota.key_id, day, count, limit)).fetchone()
    if row is None:
        used = used_today(conn, quota.key_id, now_ms)
        raise TooMany(
            "daily_limit",
            f"{what} would pass this key's daily limit of {limit} messages ({used} accepted"
            " today, UTC); nothing was queued. The count starts again at 00:00 UTC",
            retry_after_s=seconds_to_next_day(now_ms), limit=limit, used=used,
            requested=count)


class KeyRates:
    """This process's token bucket for each key with a rate (the event loop's own)."""

    def __init__(self) -> None:
        self._buckets: dict[int, TokenBucket] = {}

    def take(self, quota: KeyQuota | None) -> None:
        """Count one request that creates messages or a campaign against the key's
        rate; past it raise ``TooMany("rate_limited")`` with the seconds until the
        next token. Nothing to do without a rate."""
        if quota is None or quota.rate_per_s is None:
            return
        bucket = self._buckets.get(quota.key_id)
        if bucket is None or bucket.rate != quota.rate_per_s:  # new, or its rate changed
            bucket = TokenBucket(quota.rate_per_s, burst=quota.rate_per_s)
            self._buckets[quota.key_id] = bucket
        wait = bucket.try_take()
        if wait > 0:
            raise TooMany(
                "rate_limited",
                f"this key may create messages or campaigns {quota.rate_per_s:g} times a"
                " second; nothing was queued: try again shortly",
                retry_after_s=max(1, math.ceil(wait)), rate_per_s=quota.rate_per_s)
