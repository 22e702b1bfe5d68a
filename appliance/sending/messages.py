"""Messages in the store: accepting one, claiming due ones, recording outcomes.

Every function is a read unit or a write unit (a function of an apsw connection).
The sender's contract with the report side lives here:

* a message is committed ``QUEUED`` when accepted; the sender's claim reserves due ones
  (``claimed_at``, the state stays ``QUEUED``/``RETRY``: nothing is sent yet, and a crash
  gives them back), and each becomes ``SENDING`` in a small group-committed unit just
  before the transport takes it (:func:`mark_sending`), so the messages a crash leaves
  ``SENDING`` are only those that may really have reached the provider (DLR-1, OPS-6);
* after the call, one write unit per batch records every outcome with updates guarded
  by ``state = 'SENDING'`` (a state a report already set is never overwritten), stores
  one ``message_parts`` row per part the provider took, with its id (and, for providers
  that report only their own id, the id -> (ref, part) mapping), sets the message's
  state from its parts (:mod:`appliance.reports.aggregate`), and applies at once
  whatever reports wait in the inbox for those refs (DLR-6);
* a transient failure becomes ``RETRY`` with backoff, never a final state, until
  ``max_attempts`` attempts have failed (then ``REJECTED``); an unknown outcome
  becomes ``UNCERTAIN`` and is not sent again unless the provider drops repeats of
  our ref (DLR-8);
* the same holds per part, for a transport that answers per part (SMPP): a part the
  provider took keeps its id, a part it refused is ``REJECTED``, a part not taken is
  sent again by the next attempt, which skips every other part (``skip_parts``), and a
  part that may have been taken is ``UNCERTAIN`` and never sent blindly.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from appliance.message_text.segments import Segmentation, segment
from appliance.optout.suppressions import IS_SUPPRESSED_SQL, SUPPRESSED
from appliance.providers.base import Outcome, PartOutcome, SubmitResult
from appliance.reports.aggregate import message_state
from appliance.reports.apply import apply_waiting_for_refs
from appliance.reports.states import FINAL_STATES
from appliance.sending.campaigns import (
    PRIORITY_HIGH,
    PRIORITY_NORMAL,
    release_claimed_sql,
    sendable_campaigns,
)
from appliance.sending.windows import SendWindow
from appliance.store import dialect
from appliance.store.changes import executemany_changes
from appliance.store.connection import Connection
from appliance.store.owner import OWNER, dead_owners
from appliance.store.singleton import one_at_a_time

# Backoff for transient failures: 2 s x 2^(attempt-1), capped, plus up to 25% jitter.
BACKOFF_BASE_S = 2.0
BACKOFF_CAP_S = 600.0
RESENDABLE = ("QUEUED", "RETRY")
INTERRUPTED = "interrupted while sending: the provider may have it"
# A part row in this state is not taken yet: the next attempt sends it.
PART_TO_SEND = "RETRY"
_PART_STATE = {
    SubmitResult.ACCEPTED: "SUBMITTED",
    SubmitResult.REJECTED: "REJECTED",
    SubmitResult.UNCERTAIN: "UNCERTAIN",
    SubmitResult.RETRY: PART_TO_SEND,
}
_IN_CHUNK = 500
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
    priority: int = PRIORITY_HIGH
    turkish: bool = False  # the provider sends the Turkish tables to this number (ENC-1)


@dataclass(frozen=True)
class Accepted:
    ref: str
    state: str
    created: bool
    encoding: str = "GSM-7"
    parts: int = 1
    ucs2_because: str | None = None
    ucs2_parts: int | None = None


@dataclass(frozen=True)
class Claimed:
    """A message claimed for one submission attempt: reserved by :func:`claim_due`,
    ``SENDING`` once :func:`mark_sending` took it (``attempts`` then counts this one).

    ``known_parts`` are ``(part, state)`` of the part rows an earlier attempt left
    (empty on a first attempt): parts in ``RETRY`` are sent by this attempt, the others
    (:attr:`skip_parts`) the provider has or may have, and are never sent again.
    ``window`` is its campaign's sending window, checked again just before sending.
    """

    id: int
    ref: str
    msisdn: str
    body: str
    attempts: int
    parts: int = 1
    known_parts: tuple[tuple[int, str], ...] = ()
    campaign_id: int | None = None
    priority: int = PRIORITY_HIGH
    window: SendWindow | None = None

    @property
    def skip_parts(self) -> frozenset[int]:
        return frozenset(p for p, s in self.known_parts if s != PART_TO_SEND)

    @property
    def parts_to_send(self) -> tuple[int, ...]:
        """Parts an earlier attempt left to send (empty: the whole message)."""
        return tuple(p for p, s in self.known_parts if s == PART_TO_SEND)


@dataclass(frozen=True)
class Recorded:
    """What one batch came to."""

    submitted: int = 0
    retry: int = 0
    rejected: int = 0
    uncertain: int = 0
    applied_reports: int = 0


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
            if (row[2], row[3], row[4]) != (new.msisdn, new.body, new.provider):
                raise IdempotencyConflict(
                    "this Idempotency-Key was used for a different message; "
                    "use a new key for a new message"
                )
            return Accepted(str(row[0]), str(row[1]), False, str(row[5]), int(row[6]),
                            None if row[7] is None else str(row[7]),
                            None if row[8] is None else int(row[8]))
    seg = seg or segment(new.body, new.turkish)
    conn.execute(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, idempotency_key,"
        " state, attempts, next_attempt_at, created_at, updated_at, encoding, parts,"
        " ucs2_because, priority, ucs2_parts)"
        " VALUES (?, ?, ?, ?, ?, ?, 'QUEUED', 0, ?, ?, ?, ?, ?, ?, ?, ?)",
        (ref, new.account_id, new.provider, new.msisdn, new.body, new.idempotency_key,
         now_ms, now_ms, now_ms, seg.encoding, seg.count, seg.ucs2_because, new.priority,
         seg.ucs2_parts),
    )
    return Accepted(ref, "QUEUED", True, seg.encoding, seg.count, seg.ucs2_because,
                    seg.ucs2_parts)


def _chunks(values: list[int]) -> Iterable[list[int]]:
    for start in range(0, len(values), _IN_CHUNK):
        yield values[start:start + _IN_CHUNK]


def known_parts(conn: Connection, ids: list[int]) -> dict[int, list[tuple[int, str]]]:
    """``(part, state)`` of the part rows of these messages, by message id."""
    out: dict[int, list[tuple[int, str]]] = {}
    for chunk in _chunks(ids):
        marks = ",".join("?" * len(chunk))
        for message_id, part, state in conn.execute(
                "SELECT message_id, part, state FROM message_parts"
                f" WHERE message_id IN ({marks}) ORDER BY message_id, part", tuple(chunk)):
            out.setdefault(int(message_id), []).append((int(part), str(state)))
    return out


# Every lane query repeats the partial index's condition (messages_lanes) and, on
# SQLite, names the index: an in-order range scan of the one lane. Left to choose
# without statistics, SQLite reads messages_due instead, in next_attempt_at order over
# every lane, so a campaign queued after another one's backlog had its claim walk that
# whole backlog first (33 ms a claim of 200 behind two campaigns of 100,000, not 4).
_WAITING = "state IN ('QUEUED', 'RETRY') AND claimed_at IS NULL"


@dataclass(frozen=True)
class Lane:
    """Messages claimed in turn: single messages of one priority, or one campaign."""

    priority: int
    campaign_id: int | None


HIGH_LANE = Lane(PRIORITY_HIGH, None)
NORMAL_SINGLES = Lane(PRIORITY_NORMAL, None)


def _reserve(conn: Connection, provider: str, lane: Lane, now_ms: int, stamp: int,
             limit: int) -> list[int]:
    """Reserve up to ``limit`` due messages of one lane: ``RETRY`` first, then
    ``QUEUED``, each oldest first (a write unit's part). On PostgreSQL the rows another
    process is reserving are passed over (``SKIP LOCKED``)."""
    ids: list[int] = []
    lanes = dialect.of(conn).indexed_by("messages_lanes")
    camp = "campaign_id IS NULL" if lane.campaign_id is None else "campaign_id = ?"
    lane_args: tuple[Any, ...] = () if lane.campaign_id is None else (lane.campaign_id,)
    for state in ("RETRY", "QUEUED"):
        if len(ids) >= limit:
            break
        ids += [int(r[0]) for r in conn.execute(
            f"SELECT id FROM messages{lanes} WHERE {_WAITING} AND state = ? AND provider = ?"
            f" AND priority = ? AND {camp} AND next_attempt_at <= ?"
            f" ORDER BY next_attempt_at LIMIT ?{dialect.of(conn).skip_locked}",
            (state, provider, lane.priority, *lane_args, now_ms, limit - len(ids)))]
    for chunk in _chunks(ids):
        conn.execute(f"UPDATE messages{dialect.of(conn).by_rowid} SET claimed_at = ?,"
                     " lease_owner = ? WHERE id IN"
                     f" ({','.join('?' * len(chunk))})", (stamp, OWNER, *chunk))
    return ids


def campaigns_waiting(conn: Connection, provider: str) -> list[int]:
    """Campaigns of ``provider`` with messages waiting to be claimed: one index seek per
    campaign (a skip over ``messages_lanes``), whatever their backlog."""
    found: list[int] = []
    last = 0
    while True:
        row = conn.execute(
            f"SELECT campaign_id FROM messages WHERE {_WAITING} AND provider = ?"
            " AND priority = ? AND campaign_id > ? ORDER BY campaign_id LIMIT 1",
            (provider, PRIORITY_NORMAL, last)).fetchone()
        if row is None:
            return found
        last = int(row[0])
        found.append(last)


def _fair_shares(conn: Connection, provider: str, lanes: list[Lane], now_ms: int,
                 stamp: int, room: int) -> dict[Lane, list[int]]:
    """Split ``room`` between ``lanes`` evenly (the first lanes get the remainder); what
    a lane cannot use goes to the others."""
    got: dict[Lane, list[int]] = {lane: [] for lane in lanes}
    active = list(lanes)
    while room > 0 and active:
        share, extra = divmod(room, len(active))
        still: list[Lane] = []
        for i, lane in enumerate(active):
            want = share + (1 if i < extra else 0)
            if want == 0:
                still.append(lane)
                continue
            ids = _reserve(conn, provider, lane, now_ms, stamp, want)
            got[lane] += ids
            room -= len(ids)
            if len(ids) == want:
                still.append(lane)
        if len(still) == len(active) and share == 0:
            break  # every lane that was asked gave all it was asked: room is spent
        active = still
    return got


def claim_due(conn: Connection, provider: str, now_ms: int, limit: int,
              turn: int = 0, normal_limit: int | None = None) -> list[Claimed]:
    """Reserve up to ``limit`` due messages of ``provider`` for sending (a write unit).

    The order (OPS-1): high-priority messages first (single sends, by default); then
    the room left is shared evenly, round robin, between the normal lanes: single
    messages sent with ``priority`` normal, and each campaign that may send now
    (running, its ``send_at`` passed, its window open). ``turn`` rotates which lane gets
    the remainder, so over successive claims every lane gets the same. Within a lane:
    ``RETRY`` whose ``next_attempt_at`` has come, then ``QUEUED``, oldest first. At most
    ``limit`` in all, and at most ``normal_limit`` (when given) of normal priority.

    Reserving writes ``claimed_at`` only: the messages stay ``QUEUED``/``RETRY`` (nothing
    is sent yet) and :func:`mark_sending` makes each ``SENDING`` just before it goes. The
    result is in sending order: high first, then the lanes interleaved.

    A due message whose number is on its account's suppression list (OPS-4: suppressed
    after it was queued) and of which no part has gone out becomes ``CANCELLED`` (error
    ``suppressed``) in the same unit instead: never submitted. A batch that was all
    suppressed is followed by the next due messages, a few batches at most per unit.
    """
    stamp = max(1, now_ms)
    for _ in range(CLAIM_ROUNDS):
        high = _reserve(conn, provider, HIGH_LANE, now_ms, stamp, limit)
        by_lane: dict[Lane, list[int]] = {HIGH_LANE: high}
        campaigns: dict[int, Any] = {}
        room = limit - len(high) if normal_limit is None else min(normal_limit,
                                                                  limit - len(high))
        if room > 0:
            waiting = campaigns_waiting(conn, provider)
            campaigns = {cid: c for cid, c in sendable_campaigns(conn, waiting).items()
                         if c.sendable(now_ms)}
            lanes = [NORMAL_SINGLES] + [Lane(PRIORITY_NORMAL, cid) for cid in sorted(campaigns)]
            k = turn % len(lanes)
            by_lane.update(_fair_shares(conn, provider, lanes[k:] + lanes[:k], now_ms, stamp,
                                        room))
        ids = [i for got in by_lane.values() for i in got]
        if not ids:
            return []
        cancelled = 0
        by_id = dialect.of(conn).by_rowid
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            conn.execute(
                f"UPDATE messages{by_id} SET state = 'CANCELLED', error = ?, updated_at = ?,"
                " claimed_at = NULL, finalised_at = COALESCE(finalised_at, ?)"
                f" WHERE id IN ({marks}) AND state IN ('QUEUED', 'RETRY') AND"
                f" {IS_SUPPRESSED_SQL} AND NOT EXISTS (SELECT 1 FROM message_parts p"
                f" WHERE p.message_id = messages.id AND p.state <> '{PART_TO_SEND}')",
                (SUPPRESSED, now_ms, now_ms, *chunk),
            )
            cancelled += conn.changes()
        rows: dict[int, Any] = {}
        for chunk in _chunks(ids):
            marks = ",".join("?" * len(chunk))
            for r in conn.execute(
                    "SELECT id, ref, msisdn, body, attempts, parts, campaign_id, priority,"
                    f" state FROM messages{by_id} WHERE id IN ({marks}) AND claimed_at = ?",
                    (*chunk, stamp)):
                rows[int(r[0])] = r
        if rows or not cancelled:
            retried = [i for i, r in rows.items() if r[8] == "RETRY"]
            earlier = known_parts(conn, retried) if retried else {}

            order = [i for i in high if i in rows]
            lanes_left = [[i for i in got if i in rows]
                          for lane, got in by_lane.items() if lane != HIGH_LANE]
            for n in range(max((len(g) for g in lanes_left), default=0)):
                order += [g[n] for g in lanes_left if n < len(g)]
            return [_claimed(rows[i], earlier, campaigns) for i in order]
    return []


def _claimed(r: Any, earlier: dict[int, list[tuple[int, str]]],
             campaigns: dict[int, Any]) -> Claimed:
    cid = None if r[6] is None else int(r[6])
    camp = campaigns.get(cid) if cid is not None else None
    return Claimed(int(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), int(r[5]),
                   tuple(earlier.get(int(r[0]), ())), cid, int(r[7]),
                   camp.window if camp is not None else None)


def mark_sending(conn: Connection, claimed: list[Claimed], now_ms: int) -> list[Claimed]:
    """Make reserved messages ``SENDING`` just before their bytes go (a write unit).

    Only messages still reserved and still ``QUEUED``/``RETRY`` are taken, and a campaign
    message only while its campaign is ``RUNNING``: a pause or a cancel committed before
    this unit keeps them from being sent. Returns those taken, ``attempts`` counting
    this one (the money rule: each is durably ``SENDING`` before anything leaves).
    """
    by_id = {m.id: m for m in claimed}
    out: list[Claimed] = []
    each = dialect.of(conn).by_rowid
    for chunk in _chunks(list(by_id)):
        marks = ",".join("?" * len(chunk))
        rows: list[Any] = conn.execute(
            f"UPDATE messages{each} SET state = 'SENDING', attempts = attempts + 1,"
            f" claimed_at = NULL, lease_owner = ?, updated_at = ? WHERE id IN ({marks})"
            " AND claimed_at IS NOT NULL"
            " AND state IN ('QUEUED', 'RETRY') AND (campaign_id IS NULL OR EXISTS"
            " (SELECT 1 FROM campaigns c WHERE c.id = messages.campaign_id"
            " AND c.state = 'RUNNING')) RETURNING id, attempts",
            (OWNER, now_ms, *chunk)).fetchall()
        out += [replace(by_id[int(r[0])], attempts=int(r[1])) for r in rows]
    out.sort(key=lambda m: m.id)
    return out


def release_claimed(conn: Connection, ids: list[int] | None = None,
                    provider: str | None = None) -> int:
    """Give reserved messages back, unsent (a write unit): these ``ids``, or every one of
    ``provider`` (at start, after a crash). They are claimed again in their turn."""
    released = 0
    if provider is not None and dialect.of(conn).is_postgresql:
        released += _release_orphaned(conn, provider, None)  # not live processes' own
    elif provider is not None:
        conn.execute(release_claimed_sql(False), (provider,))
        released += conn.changes()
    each = dialect.of(conn).by_rowid
    for chunk in _chunks(ids or []):
        conn.execute(f"UPDATE messages{each} SET claimed_at = NULL WHERE claimed_at IS NOT NULL"
                     f" AND id IN ({','.join('?' * len(chunk))})", tuple(chunk))
        released += conn.changes()
    return released


def next_due_ms(conn: Connection) -> int | None:
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


# One statement for every outcome, so a batch is one executemany. Guarded by SENDING: a
# state set by anything else is never overwritten.
_RECORD_MESSAGE = (
    "UPDATE messages SET state = ?, error = ?, next_attempt_at = coalesce(?, next_attempt_at),"
    " provider_msg_id = coalesce(?, provider_msg_id), submitted_at = coalesce(submitted_at, ?),"
    " finalised_at = coalesce(finalised_at, ?), updated_at = ?"
    " WHERE id = ? AND state = 'SENDING'"
)
# A part row is written once per attempt that tried it: new, or a part left to send.
# A part the provider has (or may have) is never overwritten by the sender.
_RECORD_PART = (
    "INSERT INTO message_parts (message_id, part, provider_msg_id, state, error,"
    " submitted_at, finalised_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (message_id, part) DO UPDATE SET"
    " provider_msg_id = coalesce(excluded.provider_msg_id, message_parts.provider_msg_id),"
    " state = excluded.state, error = excluded.error,"
    " submitted_at = coalesce(message_parts.submitted_at, excluded.submitted_at),"
    " finalised_at = excluded.finalised_at, updated_at = excluded.updated_at"
    f" WHERE message_parts.state = '{PART_TO_SEND}'"
)
_MAP_ID = (
    "INSERT INTO provider_ids (provider, provider_msg_id, ref, part) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (provider, provider_msg_id) DO NOTHING"
)


@dataclass
class _Batch:
    """The rows one batch's outcomes come to, written with one executemany each."""

    messages: list[tuple[Any, ...]] = field(default_factory=list)
    parts: list[tuple[Any, ...]] = field(default_factory=list)
    mapped: list[tuple[str, str, str, int]] = field(default_factory=list)
    given_back: list[tuple[int]] = field(default_factory=list)  # attempts not counted


def _tried_parts(msg: Claimed, outcome: Outcome, result: SubmitResult,
                 reports_per_part: bool) -> list[PartOutcome]:
    """The parts this attempt tried, with what came of each (empty: none is known).

    A transport that answers per part lists them (:attr:`Outcome.parts`). Otherwise the
    message-level result is each tried part's: on a later attempt the parts left to
    send; on a first attempt one part carrying the message's id when accepted, and, when
    uncertain, every part the provider would report on (each of our parts for a
    provider that reports per part, else one), still without ids, which its reports
    fill in.
    """
    if outcome.parts:
        return list(outcome.parts)
    left = msg.parts_to_send
    if left:
        return [PartOutcome(p, result, outcome.provider_msg_id if i == 0 else None,
                            outcome.error, outcome.retry_after_s) for i, p in enumerate(left)]
    if result is SubmitResult.ACCEPTED:
        return [PartOutcome(1, result, outcome.provider_msg_id, outcome.error)]
    if result is SubmitResult.UNCERTAIN:
        count = msg.parts if reports_per_part else 1
        return [PartOutcome(p, result, None, outcome.error) for p in range(1, count + 1)]
    return []


def _wait_ms(msg: Claimed, retry_after_s: float | None, rng: random.Random | None) -> int:
    if retry_after_s is not None:
        return int(min(retry_after_s, 24 * 3600.0) * 1000)
    return backoff_ms(msg.attempts, rng)


def _plan(batch: _Batch, provider: str, msg: Claimed, outcome: Outcome, now_ms: int, *,
          max_attempts: int, dedupes_on_ref: bool, reports_per_part: bool,
          map_provider_ids: bool, rng: random.Random | None) -> None:
    """Add one message's rows to ``batch``: its part rows and its new state."""
    def settled(result: SubmitResult) -> SubmitResult:
        # The provider drops a second submission of the same ref: resending is safe.
        if result is SubmitResult.UNCERTAIN and dedupes_on_ref:
            return SubmitResult.RETRY
        return result

    result = settled(outcome.result)
    tried = [PartOutcome(p.part, settled(p.result), p.provider_msg_id, p.error,
                         p.retry_after_s)
             for p in _tried_parts(msg, outcome, result, reports_per_part)]
    gave_up = f"gave up after {msg.attempts} attempts; last: {outcome.error or 'retry'}"
    # The provider was not reached: the attempt is given back, so an outage never runs a
    # message out of tries (the sender holds the provider meanwhile).
    unreached = outcome.unreached and result is SubmitResult.RETRY
    if unreached:
        batch.given_back.append((msg.id,))
    out_of_tries = msg.attempts >= max_attempts and not unreached
    if not tried:  # nothing is known of any part: the message as a whole
        if result is SubmitResult.RETRY and not out_of_tries:
            again = now_ms + _wait_ms(msg, outcome.retry_after_s, rng)
            batch.messages.append(("RETRY", outcome.error, again, None, None, None, now_ms,
                                   msg.id))
        else:
            error = gave_up if result is SubmitResult.RETRY else outcome.error
            batch.messages.append(("REJECTED", error, None, None, None, now_ms, now_ms, msg.id))
        return
    skip = msg.skip_parts
    states = dict(msg.known_parts)
    written: list[PartOutcome] = []
    for p in tried:
        if p.part < 1 or p.part in skip:
            continue  # a part the provider already has is never sent, nor overwritten
        if p.result is SubmitResult.RETRY and out_of_tries:
            p = PartOutcome(p.part, SubmitResult.REJECTED, None, gave_up)
        states[p.part] = _PART_STATE[p.result]
        written.append(p)
    if not states:
        states = {1: "UNCERTAIN"}
        written = [PartOutcome(1, SubmitResult.UNCERTAIN, None, outcome.error)]
    for p in written:
        state = _PART_STATE[p.result]
        accepted = p.result is SubmitResult.ACCEPTED
        batch.parts.append((msg.id, p.part, p.provider_msg_id, state, p.error,
                            now_ms if accepted else None,
                            now_ms if state in FINAL_STATES else None, now_ms))
        if accepted and p.provider_msg_id and map_provider_ids:
            batch.mapped.append((provider, p.provider_msg_id, msg.ref, p.part))
    state = message_state(states.values())
    any_taken = any(p.result is SubmitResult.ACCEPTED for p in written)
    first_id = outcome.provider_msg_id or next(
        (p.provider_msg_id for p in written if p.provider_msg_id), None)
    at: int | None = None
    error = outcome.error
    if state == PART_TO_SEND:
        waits = [p.retry_after_s for p in written
                 if p.result is SubmitResult.RETRY and p.retry_after_s is not None]
        at = now_ms + _wait_ms(msg, max(waits) if waits else outcome.retry_after_s, rng)
    elif state == "UNCERTAIN":
        error = error or "outcome unknown"
    elif out_of_tries and any(p.error == gave_up for p in written):
        error = gave_up
    batch.messages.append((state, error, at, first_id, now_ms if any_taken else None,
                           now_ms if state in FINAL_STATES else None, now_ms, msg.id))


def record_outcomes(
    conn: Connection,
    provider: str,
    results: Iterable[tuple[Claimed, Outcome]],
    now_ms: int,
    *,
    max_attempts: int,
    dedupes_on_ref: bool,
    map_provider_ids: bool,
    reports_per_part: bool = False,
    rng: random.Random | None = None,
) -> Recorded:
    """Record one batch's outcomes and apply the reports waiting for it (a write unit).

    Every part the provider took is recorded with its id in this same unit, and the
    message's state is the aggregate of its parts (:mod:`appliance.reports.aggregate`).
    """
    batch = _Batch()
    refs: list[str] = []
    for msg, outcome in results:
        refs.append(msg.ref)
        _plan(batch, provider, msg, outcome, now_ms, max_attempts=max_attempts,
              dedupes_on_ref=dedupes_on_ref, reports_per_part=reports_per_part,
              map_provider_ids=map_provider_ids, rng=rng)
    if batch.parts:
        conn.executemany(_RECORD_PART, batch.parts)
    if batch.mapped:
        conn.executemany(_MAP_ID, batch.mapped)
    if batch.given_back:  # before the state changes below: guarded by SENDING as they are
        conn.executemany("UPDATE messages SET attempts = attempts - 1"
                         " WHERE id = ? AND state = 'SENDING' AND attempts > 0",
                         batch.given_back)
    # Counted by what the guarded updates changed, one executemany per kind of result
    # (RETURNING would turn each executemany into a row-by-row walk, three times slower).
    groups: dict[str, list[tuple[Any, ...]]] = {}
    for row in batch.messages:
        state = row[0]
        kind = ("retry" if state == "RETRY" else "uncertain" if state == "UNCERTAIN"
                else "rejected" if state in FINAL_STATES else "submitted")
        groups.setdefault(kind, []).append(row)
    counts = {"submitted": 0, "retry": 0, "rejected": 0, "uncertain": 0}
    for kind, rows in groups.items():
        counts[kind] = executemany_changes(conn, _RECORD_MESSAGE, rows)
    id_pairs = [(p, pid) for p, pid, _ref, _part in batch.mapped]
    applied = apply_waiting_for_refs(conn, refs, now_ms, id_pairs, provider=provider) \
        if refs else 0
    return Recorded(applied_reports=applied, **counts)


def recover_interrupted(conn: Connection, provider: str, now_ms: int,
                        dedupes_on_ref: bool, reports_per_part: bool = False) -> int:
    """Messages left ``SENDING`` by a crash (a write unit, run at start; on PostgreSQL
    also from time to time, for other processes' crashes).

    Messages that were only reserved were never sent: they are given back first and
    sent in their turn. A ``SENDING`` one was handed to the transport (at most the
    transport's concurrency were at any moment): nobody can know whether the provider
    got it, so it becomes ``UNCERTAIN`` (never resent) or, where the provider drops
    repeats of our ref, ``RETRY``. The parts it was sending become ``UNCERTAIN`` with it.
    Returns how many became ``UNCERTAIN`` (or ``RETRY``).

    On PostgreSQL other processes may be sending right now: only the messages whose
    ``lease_owner`` is gone (:func:`appliance.store.owner.dead_owners`) were interrupted.
    """
    release_claimed(conn, provider=provider)
    return _interrupted(conn, provider, now_ms, dedupes_on_ref, reports_per_part)


def recover_orphans(conn: Connection, provider: str, now_ms: int, dedupes_on_ref: bool,
                    reports_per_part: bool = False) -> tuple[int, int]:
    """Several processes on PostgreSQL (a write unit, run from time to time): give back
    the reservations of dead processes and any older than :data:`RESERVATION_TTL_MS`
    (taking one again is safe: :func:`mark_sending` takes a message once), and settle
    what dead processes were sending, as :func:`recover_interrupted` does.
    Returns (reservations given back, messages settled)."""
    released = _release_orphaned(conn, provider, now_ms - RESERVATION_TTL_MS)
    return released, _interrupted(conn, provider, now_ms, dedupes_on_ref, reports_per_part)


RESERVATION_TTL_MS = 60_000


def _release_orphaned(conn: Connection, provider: str, reserved_before: int | None) -> int:
    """Give back the reservations of ``provider`` made by processes that are gone (or by
    none), and those made before ``reserved_before`` when given."""
    gone = tuple(sorted(dead_owners(conn, (str(r[0]) for r in conn.execute(
        "SELECT DISTINCT lease_owner FROM messages WHERE provider = ? AND claimed_at IS NOT"
        " NULL AND state IN ('QUEUED', 'RETRY') AND lease_owner IS NOT NULL", (provider,))))))
    whose = "lease_owner IS NULL" + (
        f" OR lease_owner IN ({','.join('?' * len(gone))})" if gone else "")
    older = "" if reserved_before is None else " OR claimed_at <= ?"
    conn.execute("UPDATE messages SET claimed_at = NULL WHERE provider = ? AND claimed_at"
                 f" IS NOT NULL AND state IN ('QUEUED', 'RETRY') AND ({whose}{older})",
                 (provider, *gone, *(() if reserved_before is None else (reserved_before,))))
    return conn.changes()


def _interrupted(conn: Connection, provider: str, now_ms: int, dedupes_on_ref: bool,
                 reports_per_part: bool) -> int:
    state = "RETRY" if dedupes_on_ref else "UNCERTAIN"
    holders = ""
    held: tuple[str, ...] = ()
    if dialect.of(conn).is_postgresql:  # several processes: only the dead ones' sends
        held = tuple(sorted(dead_owners(conn, (str(r[0]) for r in conn.execute(
            "SELECT DISTINCT lease_owner FROM messages WHERE state = 'SENDING'"
            " AND provider = ? AND lease_owner IS NOT NULL", (provider,))))))
        holders = f" AND (lease_owner IS NULL OR lease_owner IN ({','.join('?' * len(held))}))" \
            if held else " AND lease_owner IS NULL"
    rows: list[Any] = conn.execute(
        "UPDATE messages SET state = ?, error = ?, updated_at = ?, next_attempt_at = ?"
        f" WHERE state = 'SENDING' AND provider = ?{holders} RETURNING id, ref, parts",
        (state, INTERRUPTED, now_ms, now_ms, provider, *held),
    ).fetchall()
    refs = [str(r[1]) for r in rows]
    if rows and not dedupes_on_ref:
        ids = [int(r[0]) for r in rows]
        have = known_parts(conn, ids)
        for chunk in _chunks([i for i in ids if i in have]):
            marks = ",".join("?" * len(chunk))
            conn.execute(
                "UPDATE message_parts SET state = 'UNCERTAIN', error = ?, updated_at = ?"
                f" WHERE message_id IN ({marks}) AND state = '{PART_TO_SEND}'",
                (INTERRUPTED, now_ms, *chunk))
        conn.executemany(_RECORD_PART, [
            (int(r[0]), part, None, "UNCERTAIN", INTERRUPTED, None, None, now_ms)
            for r in rows if int(r[0]) not in have
            for part in range(1, (int(r[2]) if reports_per_part else 1) + 1)])
    if refs:
        apply_waiting_for_refs(conn, refs, now_ms, [], provider=provider)
    return len(refs)


# -- the operator decides (OPS-6) -----------------------------------------------------

RESEND, MARK_FAILED = "resend", "mark_failed"
ACTIONS = (RESEND, MARK_FAILED)
RESEND_WARNING = ("the provider may already have this message: a resend can reach the"
                  " phone twice, and is billed again")


class NotUncertain(ValueError):
    """Only an ``UNCERTAIN`` message can be resolved; ``state`` is the one it has."""

    def __init__(self, state: str) -> None:
        super().__init__(f"the message is {state}, not UNCERTAIN: there is nothing to decide")
        self.state = state


def resolve_message(conn: Connection, message_id: int, action: str, actor: str,
                    now_ms: int) -> str:
    """Decide about one ``UNCERTAIN`` message (a write unit); returns its new state.

    ``resend``: the message and its uncertain parts go back to ``RETRY``, due now, and
    the sender submits them once more, exactly once (a report that arrives first, saying
    the provider had it after all, settles it instead). ``mark_failed``: its uncertain
    parts become ``FAILED``, final, never sent again; the message is the aggregate of
    its parts. Either is recorded in ``message_actions`` with who decided.
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r}")
    # Locked, and read as the last unit left it: a report settled at another process
    # meanwhile either came first (then the message is no longer UNCERTAIN) or waits.
    lock = dialect.of(conn).for_update
    row: Any = conn.execute(f"SELECT state FROM messages WHERE id = ?{lock}",
                            (message_id,)).fetchone()
    state = "MISSING" if row is None else str(row[0])
    if state != "UNCERTAIN":
        raise NotUncertain(state)
    if action == RESEND:
        note = f"resend requested by {actor}: {RESEND_WARNING}"
        conn.execute("UPDATE message_parts SET state = ?, error = NULL, updated_at = ?"
                     " WHERE message_id = ? AND state = 'UNCERTAIN'",
                     (PART_TO_SEND, now_ms, message_id))
        conn.execute("UPDATE messages SET state = 'RETRY', error = ?, next_attempt_at = ?,"
                     " updated_at = ? WHERE id = ? AND state = 'UNCERTAIN'",
                     (note, now_ms, now_ms, message_id))
        new_state = "RETRY"
    else:
        note = f"marked failed by {actor}"
        conn.execute("UPDATE message_parts SET state = 'FAILED', error = ?, updated_at = ?,"
                     " finalised_at = COALESCE(finalised_at, ?)"
                     " WHERE message_id = ? AND state = 'UNCERTAIN'",
                     (note, now_ms, now_ms, message_id))
        states = [str(r[0]) for r in conn.execute(
            "SELECT state FROM message_parts WHERE message_id = ?", (message_id,))]
        new_state = message_state(states) if states else "FAILED"
        conn.execute("UPDATE messages SET state = ?, error = ?, updated_at = ?,"
                     " finalised_at = CASE WHEN ? THEN COALESCE(finalised_at, ?) END"
                     " WHERE id = ? AND state = 'UNCERTAIN'",
                     (new_state, note, now_ms, new_state in FINAL_STATES, now_ms, message_id))
    conn.execute("INSERT INTO message_actions (message_id, action, from_state, to_state, actor,"
                 " at) VALUES (?, ?, 'UNCERTAIN', ?, ?, ?)",
                 (message_id, action, new_state, actor, now_ms))
    return new_state


def resolve_campaign(conn: Connection, campaign_id: int, action: str, actor: str,
                     now_ms: int) -> int:
    """The same decision for every ``UNCERTAIN`` message of a campaign (a write unit);
    returns how many were resolved. One that a report settled at another process since
    it was found is no longer uncertain: it is left as the report made it."""
    ids = [int(r[0]) for r in conn.execute(
        "SELECT id FROM messages WHERE campaign_id = ? AND state = 'UNCERTAIN'", (campaign_id,))]
    resolved = 0
    for message_id in ids:
        try:
            resolve_message(conn, message_id, action, actor, now_ms)
        except NotUncertain:
            continue
        resolved += 1
    return resolved


@dataclass(frozen=True)
class Action:
    """A decision an operator took about a message."""

    action: str
    from_state: str
    to_state: str
    actor: str
    at: int


def message_actions(conn: Connection, message_id: int) -> list[Action]:
    rows: list[Any] = conn.execute(
        "SELECT action, from_state, to_state, actor, at FROM message_actions"
        " WHERE message_id = ? ORDER BY id", (message_id,)).fetchall()
    return [Action(*r) for r in rows]


# -- reading -----------------------------------------------------------------------

MESSAGE_COLUMNS = (
    "id, ref, account_id, campaign_id, provider, msisdn, body, state, state_at, attempts,"
    " next_attempt_at, provider_msg_id, error, created_at, updated_at, submitted_at,"
    " finalised_at, encoding, parts, ucs2_because, priority, ucs2_parts"
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
    encoding: str = "GSM-7"
    parts: int = 1
    ucs2_because: str | None = None
    priority: int = PRIORITY_HIGH
    ucs2_parts: int | None = None  # what UCS-2 would have taken; None: made before ENC-1


@dataclass(frozen=True)
class HistoryEntry:
    status: str
    state: str
    reported_at: int
    received_at: int
    repeats: int
    outcome: str | None
    error_code: str | None
    part: int | None = None  # the part it was about; None: waiting, or the whole message


@dataclass(frozen=True)
class Part:
    """One part as the provider reports on it (``message_parts``)."""

    part: int
    provider_msg_id: str | None
    state: str
    state_at: int
    error: str | None
    submitted_at: int | None
    finalised_at: int | None
    updated_at: int


def _message(row: Any) -> Message:
    return Message(*row)


def get_message(conn: Connection, ref: str, account_id: int) -> Message | None:
    row = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE ref = ? AND account_id = ?",
        (ref, account_id),
    ).fetchone()
    return None if row is None else _message(row)


def message_history(conn: Connection, message: Message) -> list[HistoryEntry]:
    """Every report kept for the message: applied, stale, or still waiting."""
    rows: list[Any] = conn.execute(
        "SELECT status, state, reported_at, received_at, repeats, outcome, error_code, part"
        " FROM report_inbox WHERE (ref = ? AND provider = ?) OR message_id = ?"
        " ORDER BY received_at, id",
        (message.ref, message.provider, message.id),
    ).fetchall()
    return [HistoryEntry(*r) for r in rows]


def message_parts(conn: Connection, message_id: int) -> list[Part]:
    """The message's parts, in order (a read unit); empty before its submission."""
    rows: list[Any] = conn.execute(
        "SELECT part, provider_msg_id, state, state_at, error, submitted_at, finalised_at,"
        " updated_at FROM message_parts WHERE message_id = ? ORDER BY part", (message_id,),
    ).fetchall()
    return [Part(*r) for r in rows]


def messages_for_msisdn(conn: Connection, account_id: int, msisdn: str,
                        limit: int = 50) -> list[Message]:
    rows = conn.execute(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE account_id = ? AND msisdn = ?"
        " ORDER BY id DESC LIMIT ?",
        (account_id, msisdn, limit),
    ).fetchall()
    return [_message(r) for r in rows]
