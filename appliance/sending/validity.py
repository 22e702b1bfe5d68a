"""Validity (ROUTE-4): how long a message stays worth sending.

A request's ``validity_s`` (else ``[sending] validity_s``; 0: none of our own, the
provider's default) is counted from when the message may first be sent: a single
message from its acceptance, a campaign's message from its due time (its campaign's
``send_at``, or its creation when later). The message carries the moment it runs out
(``expires_at``, our clock, epoch ms). Past it, the sender never submits it: its claim
and its mark just before sending (:mod:`appliance.sending.claims`) make it
``CANCELLED`` with error :data:`EXPIRED_BEFORE_SENDING` instead, counted with the other
cancelled messages of its campaign. This holds for every kind; the kinds whose API
takes a validity also carry what is left of it on the wire (:func:`remaining_s`).
"""

from __future__ import annotations

from typing import Any, Final

from appliance.refusals import Invalid
from appliance.store import dialect
from appliance.store.connection import Connection

EXPIRED_BEFORE_SENDING: Final = "expired before sending"

# A message's validity ran out (parameter: now).
EXPIRED_SQL: Final = "(expires_at IS NOT NULL AND expires_at <= ?)"
# The condition a message must meet to expire now: its validity ran out and no part of
# it has gone out (a message part-way sent goes on).
_EXPIRED_SQL: Final = (
    f"{EXPIRED_SQL} AND state IN ('QUEUED', 'RETRY')"
    " AND NOT EXISTS (SELECT 1 FROM message_parts p WHERE p.message_id = messages.id"
    " AND p.state <> 'RETRY')")


def check_validity(value: Any, default_s: int, provider: str,
                   range_s: tuple[int, int] | None) -> int:
    """A request's ``validity_s``: whole seconds, 0 (the provider's own) or more; absent,
    ``default_s`` (``[sending] validity_s``). A value outside ``range_s`` (what the
    provider's kind can carry; None: any, kept locally only) is refused with the range."""
    if value is None:
        value = default_s
    elif isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Invalid("invalid_validity", "'validity_s' must be whole seconds, 0 (the"
                      " provider's own validity) or more")
    if value and range_s is not None and not range_s[0] <= value <= range_s[1]:
        raise Invalid("invalid_validity", f"'validity_s' {value} is outside provider"
                      f" {provider}'s range, {range_s[0]} to {range_s[1]} seconds (0: the"
                      " provider's own validity)", range_s=list(range_s))
    return int(value)


def expires_at(validity_s: int, due_ms: int) -> int | None:
    """When a message due at ``due_ms`` stops being worth sending (None: no validity)."""
    return due_ms + validity_s * 1000 if validity_s > 0 else None


def remaining_s(expires_at_ms: int | None, now_ms: int) -> int | None:
    """Whole seconds of validity left at ``now_ms``, at least 1 (None: none of our own):
    what goes on the wire, so the provider gives up when we would."""
    if expires_at_ms is None:
        return None
    return max(1, -(-(expires_at_ms - now_ms) // 1000))


def cancel_expired(conn: Connection, ids: list[int], now_ms: int) -> int:
    """Make those of ``ids`` (at most one ``IN`` list) whose validity ran out
    ``CANCELLED`` (:data:`EXPIRED_BEFORE_SENDING`), never submitted (a write unit's
    part); returns how many. Their reservation goes with them."""
    if not ids:
        return 0
    conn.execute(
        f"UPDATE messages{dialect.of(conn).by_rowid} SET state = 'CANCELLED', error = ?,"
        " updated_at = ?, claimed_at = NULL, finalised_at = COALESCE(finalised_at, ?)"
        f" WHERE id IN ({','.join('?' * len(ids))}) AND {_EXPIRED_SQL}",
        (EXPIRED_BEFORE_SENDING, now_ms, now_ms, *ids, now_ms))
    return conn.changes()
