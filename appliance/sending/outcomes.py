"""Outcomes: what the provider said about each message of a batch, recorded in one unit.

After the call, one write unit per batch records every outcome with updates guarded
by ``state = 'SENDING'`` (a state a report already set is never overwritten), stores
one ``message_parts`` row per part the provider took, with its id (and, for providers
that report only their own id, the id -> (ref, part) mapping), sets the message's
state from its parts (:mod:`appliance.reports.aggregate`), and applies at once
whatever reports wait in the inbox for those refs (DLR-6):

* a refusal of every message until the provider's operator acts (``Outcome.blocked``)
  gives the attempt back and the message returns to ``QUEUED`` (``RETRY`` after an
  earlier attempt), due as it was: its provider's lane holds meanwhile;
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from appliance.providers.base import Outcome, PartOutcome, SubmitResult
from appliance.reports.aggregate import message_state
from appliance.reports.apply import apply_waiting_for_refs
from appliance.reports.states import FINAL_STATES
from appliance.sending.attempt_log import APPEND_SQL, entry, outcome_word
from appliance.sending.claims import PART_TO_SEND, Claimed
from appliance.sending.failover import Moved, Router, move_tried
from appliance.store.changes import executemany_changes
from appliance.store.connection import Connection

# Backoff for transient failures: 2 s x 2^(attempt-1), capped, plus up to 25% jitter.
BACKOFF_BASE_S = 2.0
BACKOFF_CAP_S = 600.0
_PART_STATE = {
    SubmitResult.ACCEPTED: "SUBMITTED",
    SubmitResult.REJECTED: "REJECTED",
    SubmitResult.UNCERTAIN: "UNCERTAIN",
    SubmitResult.RETRY: PART_TO_SEND,
}


@dataclass(frozen=True)
class Recorded:
    """What one batch came to."""

    submitted: int = 0
    retry: int = 0
    rejected: int = 0
    uncertain: int = 0
    applied_reports: int = 0
    moved: tuple[Moved, ...] = ()  # ROUTE-3: to the next provider of their route


def backoff_ms(attempts: int, rng: random.Random | None = None) -> int:
    """Delay before attempt ``attempts + 1`` after a transient failure."""
    base = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** max(0, attempts - 1))
    jitter = (rng or random).uniform(0, 0.25 * base)
    return int((base + jitter) * 1000)


# One statement for every outcome of a kind, so a batch is one executemany a kind.
# Guarded by SENDING: a state set by anything else is never overwritten. An attempt the
# provider took is not added to the message's log (ROUTE-3): its submitted_at and
# provider say it (appliance.sending.attempt_log), so the common case writes what it did
# before; every other outcome is appended.
_SET_OUTCOME = (
    "UPDATE messages SET state = ?, error = ?, error_kind = ?,"
    " next_attempt_at = coalesce(?, next_attempt_at),"
    " provider_msg_id = coalesce(?, provider_msg_id), submitted_at = coalesce(submitted_at, ?),"
    " finalised_at = coalesce(finalised_at, ?), updated_at = ?"
)
_RECORD_MESSAGE = _SET_OUTCOME + " WHERE id = ? AND state = 'SENDING'"
_RECORD_LOGGED = _SET_OUTCOME + ", " + APPEND_SQL + " WHERE id = ? AND state = 'SENDING'"
# A part row is written once per attempt that tried it: new, or a part left to send.
# A part the provider has (or may have) is never overwritten by the sender.
RECORD_PART = (
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
    if outcome.blocked is not None and unreached:
        # The provider refuses every message until its operator acts: the message goes
        # back where it was before this attempt (QUEUED on a first one), due as it was;
        # its lane holds (appliance.sending.provider_holds).
        back = "QUEUED" if msg.attempts <= 1 else "RETRY"
        batch.messages.append((back, outcome.error, None, None, None, None, None, now_ms,
                               msg.id))
        return
    if not tried:  # nothing is known of any part: the message as a whole
        if result is SubmitResult.RETRY and not out_of_tries:
            again = now_ms + _wait_ms(msg, outcome.retry_after_s, rng)
            batch.messages.append(("RETRY", outcome.error, None, again, None, None, None,
                                   now_ms, msg.id))
        else:
            error = gave_up if result is SubmitResult.RETRY else outcome.error
            kind = outcome.error_kind if result is SubmitResult.REJECTED else None
            batch.messages.append(("REJECTED", error, kind, None, None, None, now_ms, now_ms,
                                   msg.id))
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
    kind = outcome.error_kind if state == "REJECTED" and error == outcome.error else None
    batch.messages.append((state, error, kind, at, first_id, now_ms if any_taken else None,
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
    router: Router | None = None,
    moving: Mapping[int, str] | None = None,
) -> Recorded:
    """Record one batch's outcomes and apply the reports waiting for it (a write unit).

    Every part the provider took is recorded with its id in this same unit, and the
    message's state is the aggregate of its parts (:mod:`appliance.reports.aggregate`).
    Each outcome is added to its message's log (:mod:`appliance.sending.attempt_log`).
    The messages in ``moving`` (id: why) go to the next provider of their route instead,
    where it has one (:func:`appliance.sending.failover.move_tried`).
    """
    batch = _Batch()
    refs: list[str] = []
    done = list(results)
    moved: list[Moved] = []
    if router is not None and moving:
        moved = move_tried(conn, router, provider,
                           [(m, o, moving[m.id]) for m, o in done if m.id in moving], now_ms)
    gone = {m.message_id for m in moved}
    for msg, outcome in done:
        if msg.id in gone:
            continue
        refs.append(msg.ref)
        start = len(batch.messages)
        _plan(batch, provider, msg, outcome, now_ms, max_attempts=max_attempts,
              dedupes_on_ref=dedupes_on_ref, reports_per_part=reports_per_part,
              map_provider_ids=map_provider_ids, rng=rng)
        line = entry(provider, outcome_word(outcome), now_ms)
        batch.messages[start:] = [(*row[:-1], line, row[-1])
                                  for row in batch.messages[start:]]
    if batch.parts:
        conn.executemany(RECORD_PART, batch.parts)
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
        kind = ("retry" if state in ("RETRY", "QUEUED") else "uncertain" if state == "UNCERTAIN"
                else "rejected" if state in FINAL_STATES else "submitted")
        groups.setdefault(kind, []).append(row)
    counts = {"submitted": 0, "retry": 0, "rejected": 0, "uncertain": 0}
    for kind, rows in groups.items():
        if kind == "submitted":  # taken: the log's entry is its submitted_at
            counts[kind] = executemany_changes(conn, _RECORD_MESSAGE,
                                               [(*r[:-2], r[-1]) for r in rows])
        else:
            counts[kind] = executemany_changes(conn, _RECORD_LOGGED, rows)
    id_pairs = [(p, pid) for p, pid, _ref, _part in batch.mapped]
    applied = apply_waiting_for_refs(conn, refs, now_ms, id_pairs, provider=provider) \
        if refs else 0
    return Recorded(applied_reports=applied, moved=tuple(moved), **counts)
