"""Messages in the store: accepting one, claiming due ones, recording outcomes.

Every function is a read unit or a write unit (a function of an apsw connection).
The sender's contract with the report side lives here:

* a message is committed ``QUEUED`` when accepted and ``SENDING`` when claimed, both
  before the provider call (DLR-1);
* after the call, one write unit per batch records every outcome with updates guarded
  by ``state = 'SENDING'`` (a state a report already set is never overwritten), stores
  the provider's id (and, for providers that report only their own id, the
  id -> ref mapping), and applies at once whatever reports wait in the inbox for
  those refs (DLR-6);
* a transient failure becomes ``RETRY`` with backoff, never a final state, until
  ``max_attempts`` attempts have failed (then ``REJECTED``); an unknown outcome
  becomes ``UNCERTAIN`` and is not sent again unless the provider drops repeats of
  our ref (DLR-8).
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import apsw

from appliance.optout.suppressions import IS_SUPPRESSED_SQL, SUPPRESSED
from appliance.providers.base import Outcome, SubmitResult
from appliance.reports.apply import apply_waiting_for_refs

# Backoff for transient failures: 2 s x 2^(attempt-1), capped, plus up to 25% jitter.
BACKOFF_BASE_S = 2.0
BACKOFF_CAP_S = 600.0
RESENDABLE = ("QUEUED", "RETRY")
INTERRUPTED = "interrupted while sending: the provider may have it"
CLAIM_ROUNDS = 4  # claims per unit when whole batches turn out suppressed


class IdempotencyConflict(ValueError):
    """The idempotency key was used before for a different message."""


@dataclass(frozen=True)
class NewMessage:
    account_id: int
    provider: str
    msisdn: str
    body: str
    idempotency_key: str | None = None


@dataclass(frozen=True)
class Accepted:
    ref: str
    state: str
    created: bool


@dataclass(frozen=True)
class Claimed:
    """A message claimed for one submission attempt (state ``SENDING``)."""

    id: int
    ref: str
    msisdn: str
    body: str
    attempts: int


@dataclass(frozen=True)
class Recorded:
    """What one batch came to."""

    submitted: int = 0
    retry: int = 0
    rejected: int = 0
    uncertain: int = 0
    applied_reports: int = 0


def insert_message(conn: apsw.Connection, new: NewMessage, ref: str, now_ms: int) -> Accepted:
    """Accept one message as ``QUEUED`` (a write unit), honouring the idempotency key.

    The same key with the same recipient, body and provider gives back the first
    message; with anything else it is an :class:`IdempotencyConflict`.
    """
    if new.idempotency_key is not None:
        row = conn.execute(
            "SELECT ref, state, msisdn, body, provider FROM messages"
            " WHERE account_id = ? AND idempotency_key = ?",
            (new.account_id, new.idempotency_key),
        ).fetchone()
        if row is not None:
            if (row[2], row[3], row[4]) != (new.msisdn, new.body, new.provider):
                raise IdempotencyConflict(
                    "this Idempotency-Key was used for a different message; "
                    "use a new key for a new message"
                )
            return Accepted(str(row[0]), str(row[1]), False)
    conn.execute(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, idempotency_key,"
        " state, attempts, next_attempt_at, created_at, updated_at)"
        " VALUES (?, ?, ?, ?, ?, ?, 'QUEUED', 0, ?, ?, ?)",
        (ref, new.account_id, new.provider, new.msisdn, new.body, new.idempotency_key,
         now_ms, now_ms, now_ms),
    )
    return Accepted(ref, "QUEUED", True)


def claim_due(conn: apsw.Connection, provider: str, now_ms: int, limit: int) -> list[Claimed]:
    """Move up to ``limit`` due messages of ``provider`` to ``SENDING`` (a write unit).

    Due: ``RETRY`` whose ``next_attempt_at`` has come (first), then ``QUEUED``. ``attempts``
    counts the claim. Only ``QUEUED`` and ``RETRY`` rows are ever claimed, so a
    message that is ``SENDING``, ``SUBMITTED`` or ``UNCERTAIN`` is never sent again.

    A due message whose number is on its account's suppression list (OPS-4: suppressed
    after it was queued) becomes ``CANCELLED`` (error ``suppressed``) in the same unit
    instead: never submitted. A batch that was all suppressed is followed by the next
    due messages, a few batches at most per unit.
    """
    for _ in range(CLAIM_ROUNDS):
        ids: list[int] = []
        for state in ("RETRY", "QUEUED"):  # each an in-order index range scan (messages_due)
            if len(ids) >= limit:
                break
            ids += [int(r[0]) for r in conn.execute(
                "SELECT id FROM messages WHERE state = ? AND next_attempt_at <= ?"
                " AND provider = ? ORDER BY next_attempt_at LIMIT ?",
                (state, now_ms, provider, limit - len(ids)))]
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        conn.execute(
            "UPDATE messages SET state = 'CANCELLED', error = ?, updated_at = ?,"
            " finalised_at = COALESCE(finalised_at, ?)"
            f" WHERE id IN ({marks}) AND state IN ('QUEUED', 'RETRY') AND {IS_SUPPRESSED_SQL}",
            (SUPPRESSED, now_ms, now_ms, *ids),
        )
        cancelled = conn.changes()
        rows: list[Any] = conn.execute(
            "UPDATE messages SET state = 'SENDING', attempts = attempts + 1, updated_at = ?"
            f" WHERE id IN ({marks}) AND state IN ('QUEUED', 'RETRY')"
            " RETURNING id, ref, msisdn, body, attempts",
            (now_ms, *ids),
        ).fetchall()
        if rows or not cancelled:
            claimed = [Claimed(int(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]))
                       for r in rows]
            claimed.sort(key=lambda c: c.id)
            return claimed
    return []


def next_due_ms(conn: apsw.Connection) -> int | None:
    """The earliest ``next_attempt_at`` among resendable messages (a read unit).

    One index lookup per state (``messages_due``), whatever the provider: at worst the
    loop looks once more than it needed to.
    """
    found: list[int] = []
    for state in ("RETRY", "QUEUED"):
        row: Any = conn.execute(
            "SELECT MIN(next_attempt_at) FROM messages WHERE state = ?", (state,)).fetchone()
        if row is not None and row[0] is not None:
            found.append(int(row[0]))
    return min(found) if found else None


def backoff_ms(attempts: int, rng: random.Random | None = None) -> int:
    """Delay before attempt ``attempts + 1`` after a transient failure."""
    base = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** max(0, attempts - 1))
    jitter = (rng or random).uniform(0, 0.25 * base)
    return int((base + jitter) * 1000)


def _finalise(conn: apsw.Connection, ref: str, error: str | None, now_ms: int) -> int:
    conn.execute(
        "UPDATE messages SET state = 'REJECTED', error = ?, updated_at = ?,"
        " finalised_at = COALESCE(finalised_at, ?) WHERE ref = ? AND state = 'SENDING'",
        (error, now_ms, now_ms, ref),
    )
    return conn.changes()


def _retry(conn: apsw.Connection, ref: str, error: str | None, at_ms: int, now_ms: int) -> int:
    conn.execute(
        "UPDATE messages SET state = 'RETRY', error = ?, next_attempt_at = ?, updated_at = ?"
        " WHERE ref = ? AND state = 'SENDING'",
        (error, at_ms, now_ms, ref),
    )
    return conn.changes()


def record_outcomes(
    conn: apsw.Connection,
    provider: str,
    results: Iterable[tuple[Claimed, Outcome]],
    now_ms: int,
    *,
    max_attempts: int,
    dedupes_on_ref: bool,
    map_provider_ids: bool,
    rng: random.Random | None = None,
) -> Recorded:
    """Record one batch's outcomes and apply the reports waiting for it (a write unit)."""
    counts = {"submitted": 0, "retry": 0, "rejected": 0, "uncertain": 0}
    refs: list[str] = []
    id_pairs: list[tuple[str, str]] = []
    for msg, outcome in results:
        refs.append(msg.ref)
        result = outcome.result
        if result is SubmitResult.UNCERTAIN and dedupes_on_ref:
            # The provider drops a second submission of the same ref: resending is safe.
            result = SubmitResult.RETRY
        if result is SubmitResult.ACCEPTED:
            pid = outcome.provider_msg_id
            conn.execute(
                "UPDATE messages SET provider_msg_id = COALESCE(?, provider_msg_id),"
                " submitted_at = COALESCE(submitted_at, ?), updated_at = ? WHERE ref = ?",
                (pid, now_ms, now_ms, msg.ref),
            )
            conn.execute(
                "UPDATE messages SET state = 'SUBMITTED', error = ?"
                " WHERE ref = ? AND state = 'SENDING'",
                (outcome.error, msg.ref),
            )
            counts["submitted"] += 1
            if pid and map_provider_ids:
                conn.execute(
                    "INSERT INTO provider_ids (provider, provider_msg_id, ref) VALUES (?, ?, ?)"
                    " ON CONFLICT (provider, provider_msg_id) DO NOTHING",
                    (provider, pid, msg.ref),
                )
                id_pairs.append((provider, pid))
        elif result is SubmitResult.RETRY:
            if msg.attempts >= max_attempts:
                error = f"gave up after {msg.attempts} attempts; last: {outcome.error or 'retry'}"
                counts["rejected"] += _finalise(conn, msg.ref, error, now_ms)
            else:
                wait_ms = backoff_ms(msg.attempts, rng)
                if outcome.retry_after_s is not None:
                    wait_ms = int(min(outcome.retry_after_s, 24 * 3600.0) * 1000)
                counts["retry"] += _retry(conn, msg.ref, outcome.error, now_ms + wait_ms, now_ms)
        elif result is SubmitResult.REJECTED:
            counts["rejected"] += _finalise(conn, msg.ref, outcome.error, now_ms)
        else:
            conn.execute(
                "UPDATE messages SET state = 'UNCERTAIN', error = ?, updated_at = ?"
                " WHERE ref = ? AND state = 'SENDING'",
                (outcome.error or "outcome unknown", now_ms, msg.ref),
            )
            counts["uncertain"] += conn.changes()
    applied = apply_waiting_for_refs(conn, refs, now_ms, id_pairs) if refs else 0
    return Recorded(applied_reports=applied, **counts)


def recover_interrupted(conn: apsw.Connection, provider: str, now_ms: int,
                        dedupes_on_ref: bool) -> int:
    """Messages left ``SENDING`` by a crash (a write unit, run once at start).

    Nobody can know whether the provider got them, so they become ``UNCERTAIN``
    (never resent) or, where the provider drops repeats of our ref, ``RETRY``.
    """
    state = "RETRY" if dedupes_on_ref else "UNCERTAIN"
    rows = conn.execute(
        "UPDATE messages SET state = ?, error = ?, updated_at = ?, next_attempt_at = ?"
        " WHERE state = 'SENDING' AND provider = ? RETURNING ref",
        (state, INTERRUPTED, now_ms, now_ms, provider),
    ).fetchall()
    refs = [str(r[0]) for r in rows]
    if refs:
        apply_waiting_for_refs(conn, refs, now_ms, [])
    return len(refs)


# -- reading -----------------------------------------------------------------------

MESSAGE_COLUMNS = (
    "id, ref, account_id, campaign_id, provider, msisdn, body, state, state_at, attempts,"
    " next_attempt_at, provider_msg_id, error, created_at, updated_at, submitted_at,"
    " finalised_at"
)


@dataclass(frozen=True)
class Message:
    id: int
    ref: str
    account_id: int
    campaign_id: int | None
    provider: str
    msisdn: str
    body: str
    state: str
    state_at: int
    attempts: int
    next_attempt_at: int
    provider_msg_id: str | None
    error: str | None
    created_at: int
    updated_at: int
    submitted_at: int | None
    finalised_at: int | None


@dataclass(frozen=True)
class HistoryEntry:
    status: str
    state: str
    reported_at: int
    received_at: int
    repeats: int
    outcome: str | None
    error_code: str | None


def _message(row: Any) -> Message:
    return Message(*row)


def get_message(conn: apsw.Connection, ref: str, account_id: int) -> Message | None:
    row = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE ref = ? AND account_id = ?",
        (ref, account_id),
    ).fetchone()
    return None if row is None else _message(row)


def message_history(conn: apsw.Connection, message: Message) -> list[HistoryEntry]:
    """Every report kept for the message: applied, stale, or still waiting."""
    rows: list[Any] = conn.execute(
        "SELECT status, state, reported_at, received_at, repeats, outcome, error_code"
        " FROM report_inbox WHERE (ref = ? AND provider = ?) OR message_id = ?"
        " ORDER BY received_at, id",
        (message.ref, message.provider, message.id),
    ).fetchall()
    return [HistoryEntry(*r) for r in rows]


def messages_for_msisdn(conn: apsw.Connection, account_id: int, msisdn: str,
                        limit: int = 50) -> list[Message]:
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE account_id = ? AND msisdn = ?"
        " ORDER BY id DESC LIMIT ?",
        (account_id, msisdn, limit),
    ).fetchall()
    return [_message(r) for r in rows]
