"""Accepting one message: the row written ``QUEUED`` in one write unit (MSG-1).

The idempotency key makes a repeat give back the first message; a send to a number on
the account's suppression list is refused in the same unit, so nothing is queued
(OPS-4). The sender takes it from there (:mod:`appliance.sending.claims`).
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.message_text.segments import STANDARD, Counting, Segmentation, segment
from appliance.optout.consents import refuse_without_consent
from appliance.optout.suppressions import refuse_if_suppressed
from appliance.sending.campaigns import PRIORITY_HIGH
from appliance.sending.duplicates import DuplicateToday, live_keys
from appliance.sending.validity import expires_at
from appliance.store.connection import Connection
from appliance.store.rows import as_int
from appliance.store.singleton import one_at_a_time


class IdempotencyConflict(ValueError):
    """The idempotency key was used before for a different message."""


@dataclass(frozen=True)
class NewMessage:
    account_id: int
    provider: str
    msisdn: str
    body: str
    idempotency_key: str | None = None
    priority: int = PRIORITY_HIGH
    # ENC-1: how the provider sends to this number (its Turkish tables there, its count).
    counting: Counting = STANDARD
    message_type: str | None = None  # IYS-1: commercial or transactional
    consent_required: bool = False  # IYS-2: a commercial message in Turkey
    dup_key: str | None = None  # IYS-4: the same text to the number today (duplicates.py)
    validity_s: int = 0  # ROUTE-4: from acceptance; 0: the provider's own (validity.py)
    route: str | None = None  # ROUTE-3: the route's prefix that chose provider; None: pinned


@dataclass(frozen=True)
class Accepted:
    ref: str
    state: str
    created: bool
    encoding: str = "GSM-7"
    parts: int = 1
    ucs2_because: str | None = None
    ucs2_parts: int | None = None



def insert_message(conn: Connection, new: NewMessage, ref: str, now_ms: int,
                   seg: Segmentation | None = None) -> Accepted:
    """Accept one message as ``QUEUED`` (a write unit), honouring the idempotency key.

    The same key with the same recipient, body and provider gives back the first
    message; with anything else it is an :class:`IdempotencyConflict`. The encoding and
    parts are our segmentation of the body (``seg``, computed here when not given).
    """
    if new.idempotency_key is not None:
        # The same key at two processes at once: the second waits for the first's unit.
        one_at_a_time(conn, f"idempotency:messages:{new.account_id}:{new.idempotency_key}")
        row = conn.execute(
            "SELECT ref, state, msisdn, body, provider, encoding, parts, ucs2_because,"
            " ucs2_parts FROM messages WHERE account_id = ? AND idempotency_key = ?",
            (new.account_id, new.idempotency_key),
        ).fetchone()
        if row is not None:
            # A routed message's provider is the route's choice at the time (ROUTE-3):
            # a repeat may find another provider lowered, and is still the same message.
            if (row[2], row[3]) != (new.msisdn, new.body) or (
                    new.route is None and row[4] != new.provider):
                raise IdempotencyConflict(
                    "this Idempotency-Key was used for a different message; "
                    "use a new key for a new message"
                )
            return Accepted(str(row[0]), str(row[1]), False, str(row[5]), as_int(row[6]),
                            None if row[7] is None else str(row[7]),
                            None if row[8] is None else int(row[8]))
    seg = seg or segment(new.body, new.counting)
    if new.dup_key is not None and live_keys(conn, new.account_id,
                                             [(new.msisdn, new.dup_key)]):
        raise DuplicateToday(new.msisdn)
    conn.execute(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, idempotency_key,"
        " state, attempts, next_attempt_at, created_at, updated_at, encoding, parts,"
        " ucs2_because, priority, ucs2_parts, message_type, dup_key, expires_at, route)"
        " VALUES (?, ?, ?, ?, ?, ?, 'QUEUED', 0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        (ref, new.account_id, new.provider, new.msisdn, new.body, new.idempotency_key,
         now_ms, now_ms, now_ms, seg.encoding, seg.count, seg.ucs2_because, new.priority,
         seg.ucs2_parts, new.message_type, new.dup_key, expires_at(new.validity_s, now_ms),
         new.route),
    )
    if not conn.changes():  # another writer's message took the key meanwhile
        raise DuplicateToday(new.msisdn)
    return Accepted(ref, "QUEUED", True, seg.encoding, seg.count, seg.ucs2_because,
                    seg.ucs2_parts)


def insert_unless_suppressed(conn: Connection, new: NewMessage, ref: str,
                             now_ms: int) -> Accepted:
    """Queue one message (a write unit), unless its number is on the account's
    suppression list: then :class:`~appliance.optout.suppressions.Suppressed` is raised
    and the unit rolls back, so nothing is queued. A repeat of an idempotent send gives
    back the message it made, as :func:`insert_message` does."""
    accepted = insert_message(conn, new, ref, now_ms)
    if accepted.created:
        refuse_if_suppressed(conn, new.account_id, new.msisdn)
        if new.consent_required:
            refuse_without_consent(conn, new.account_id, new.msisdn)
    return accepted
