"""A status answer stored as a callback is (ROUTE-2, DLR-2): raw first, then its reports.

The puller (:mod:`appliance.reports.puller`) hands each answer to :func:`store_answer`,
one write unit: the answer is kept in ``raw_reports`` exactly as it came (``method =
"PULL"``, the request's query, the answer's content type and body; ``parsed = 0`` with
the reason when it could not be read), its reports go through the inbox with
``source = "pull"`` and are applied where newer wins (:func:`appliance.reports.apply.receive`,
the very unit a callback uses), and each message asked about gets its outcome on its
schedule (:func:`appliance.reports.pull_schedule.record_outcomes`). A report pulled and
the same report pushed have the same inbox key, so whichever comes second is a repeat of
one fact, never a second one.

An answer that says nothing readable about a message (``unknown_id``, ``pending``,
``error``) moves no state: it is an attempt, counted on the message's row. A request
that got no answer at all (a timeout, a refused connection) stores no raw row, only the
attempts (:func:`store_no_answer`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from appliance.providers.status_query import PullAnswer, PullTarget, PullVerdict
from appliance.reports.apply import receive
from appliance.reports.inbox import RawCallback, from_parsed, storable
from appliance.reports.pull_schedule import record_outcomes
from appliance.store.connection import Connection

METHOD = "PULL"  # raw_reports.method of a stored status answer


@dataclass(frozen=True)
class StoredAnswer:
    """What one answer came to: the outcome per ref asked about, and its raw row."""

    outcomes: dict[str, str]
    raw_id: int | None
    filed: int = 0  # new reports (not repeats of ones already in the inbox)


def outcomes_of(answer: PullAnswer, targets: Sequence[PullTarget]) -> dict[str, str]:
    """Each target's outcome label, as the answer reads (``error`` for every one when
    the answer as a whole could not be read)."""
    if answer.error is not None:
        return {t.ref: PullVerdict.ERROR.value for t in targets}
    return {t.ref: answer.verdict(t.ref).value for t in targets}


def store_answer(conn: Connection, provider: str, raw: RawCallback, answer: PullAnswer,
                 targets: Sequence[PullTarget], now_ms: int) -> StoredAnswer:
    """The answer's write unit: raw row, reports through the inbox, outcomes."""
    reports = [from_parsed(provider, p, source="pull") for p in answer.reports]
    error = answer.error
    if error is None and not storable(reports):
        error = "a report field is not valid Unicode text"
    receipt = receive(conn, raw, reports if error is None else [], error, now_ms)
    outcomes = outcomes_of(answer, targets)
    if receipt.error is not None:  # kept raw, not read: an attempt for every message
        outcomes = {t.ref: PullVerdict.ERROR.value for t in targets}
    record_outcomes(conn, provider, outcomes)
    return StoredAnswer(outcomes, receipt.raw_id, receipt.filed)


def store_no_answer(conn: Connection, provider: str,
                    targets: Sequence[PullTarget]) -> StoredAnswer:
    """A request that got no answer (timeout, connection refused): attempts only."""
    outcomes = {t.ref: PullVerdict.ERROR.value for t in targets}
    record_outcomes(conn, provider, outcomes)
    return StoredAnswer(outcomes, None)


def store_replies(conn: Connection, provider: str,
                  replies: Sequence[tuple[RawCallback, PullAnswer]],
                  outcomes: Mapping[str, str], now_ms: int) -> StoredAnswer:
    """The write unit of answers that came over a session (SMPP ``query_sm_resp``, one
    per part asked about): each reply raw, then its reports through the inbox; then
    each message's outcome (``error`` for one whose reply could not be interpreted).
    No reply: attempts only."""
    final = dict(outcomes)
    raw_id: int | None = None
    filed = 0
    for raw, answer in replies:
        reports = [from_parsed(provider, p, source="pull") for p in answer.reports]
        error = answer.error
        if error is None and not storable(reports):
            error = "a report field is not valid Unicode text"
        receipt = receive(conn, raw, reports if error is None else [], error, now_ms)
        raw_id, filed = receipt.raw_id, filed + receipt.filed
        if receipt.error is not None:
            for ref in answer.verdicts:
                if ref in final:
                    final[ref] = PullVerdict.ERROR.value
    record_outcomes(conn, provider, final)
    return StoredAnswer(final, raw_id, filed)
