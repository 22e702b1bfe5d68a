"""Matching reports to messages and applying them (DLR-5, DLR-6).

A report names a message by our ref or, for providers that only know their own id,
by ``(provider, provider_msg_id)`` through the mapping the sender records at submit.
:func:`settle` looks the message up, asks :mod:`appliance.reports.states` for a verdict and writes
it: the message's new state (guarded on the state it read) and the inbox row marked
``APPLIED`` or ``STALE`` (kept as history) with the message it belongs to. A report
with no message yet, or for a message the sender has not recorded as submitted,
stays waiting with its next attempt scheduled.

:func:`apply_waiting_for_refs` is DLR-6: the sender calls it with the refs it has just
committed (in the same write unit or the next), so a report that beat its message
to the database costs no delay at all.

Every function here is a part of a write unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import apsw

from appliance.reports.inbox import (
    WAITING_COLUMNS,
    InboxReport,
    RawCallback,
    Waiting,
    defer,
    file_report,
    mark_raw_unparsed,
    store_raw,
    waiting_from_row,
)
from appliance.reports.states import REPORTED_FINAL, Verdict, decide, is_final

_IN_CHUNK = 500


@dataclass(frozen=True)
class MessageState:
    id: int
    ref: str
    state: str
    state_at: int
    finalised_at: int | None


def find_message(conn: apsw.Connection, row: Waiting) -> MessageState | None:
    """The message a report is about, if it is in the database yet."""
    select = "SELECT id, ref, state, state_at, finalised_at FROM messages"
    found = None
    if row.ref:
        found = conn.execute(select + " WHERE ref = ?", (row.ref,)).fetchone()
    elif row.provider_msg_id:
        mapped = conn.execute(
            "SELECT ref FROM provider_ids WHERE provider = ? AND provider_msg_id = ?",
            (row.provider, row.provider_msg_id)).fetchone()
        if mapped is not None:
            found = conn.execute(select + " WHERE ref = ?", (mapped[0],)).fetchone()
        else:
            found = conn.execute(
                select + " WHERE provider = ? AND provider_msg_id = ?",
                (row.provider, row.provider_msg_id)).fetchone()
    if found is None:
        return None
    return MessageState(int(found[0]), str(found[1]), str(found[2]), int(found[3]),
                        None if found[4] is None else int(found[4]))


def _failure_text(row: Waiting) -> str | None:
    if row.state in REPORTED_FINAL and row.state != "DELIVERED":
        code = f" (error {row.error_code})" if row.error_code else ""
        return f"report: {row.status}{code}"[:200]
    return None


def settle(conn: apsw.Connection, row: Waiting, now_ms: int) -> Verdict:
    """Apply ``row`` to its message, keep it as history, or leave it waiting."""
    message = find_message(conn, row)
    if message is None:
        defer(conn, row, now_ms)
        return Verdict.WAIT
    verdict = decide(message.state, message.state_at, row.state, row.reported_at)
    if verdict is Verdict.WAIT:
        defer(conn, row, now_ms)
        return verdict
    if verdict is Verdict.APPLY:
        finalised_at = message.finalised_at
        if is_final(row.state) and message.state not in REPORTED_FINAL:
            finalised_at = now_ms
        conn.execute(
            "UPDATE messages SET state = ?, state_at = ?, finalised_at = ?,"
            " error = coalesce(?, error),"
            " provider_msg_id = coalesce(provider_msg_id, nullif(?, '')), updated_at = ?"
            " WHERE id = ? AND state = ?",
            (row.state, row.reported_at, finalised_at, _failure_text(row),
             row.provider_msg_id, now_ms, message.id, message.state),
        )
    conn.execute(
        "UPDATE report_inbox SET applied_at = ?, outcome = ?, message_id = ? WHERE id = ?",
        (now_ms, "APPLIED" if verdict is Verdict.APPLY else "STALE", message.id, row.id),
    )
    return verdict


@dataclass
class Receipt:
    """What one callback came to."""

    raw_id: int
    filed: int = 0
    repeats: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    waiting: list[str] = field(default_factory=list)  # refs (or provider ids) left waiting


def receive(conn: apsw.Connection, raw: RawCallback, reports: Sequence[InboxReport],
            parse_error: str | None, now_ms: int) -> Receipt:
    """The callback's write unit: store it raw (DLR-2), then file and apply its reports.

    The raw row is written first; the interpretation runs under its own savepoint, so
    a report that cannot be filed or applied leaves the raw callback stored (marked
    unparsed, with the reason) and the caller still answers ``2xx``.
    """
    raw_id = store_raw(conn, raw, now_ms, parsed=parse_error is None, error=parse_error)
    receipt = Receipt(raw_id, error=parse_error)
    if parse_error is not None:
        return receipt
    conn.execute("SAVEPOINT interpret")
    try:
        for report in reports:
            row = file_report(conn, report, raw_id, now_ms)
            if row is None:
                receipt.repeats += 1
                continue
            receipt.filed += 1
            verdict = settle(conn, row, now_ms)
            receipt.outcomes[verdict.value] = receipt.outcomes.get(verdict.value, 0) + 1
            if verdict is Verdict.WAIT:
                receipt.waiting.append(report.ref or f"{report.provider}:{report.provider_msg_id}")
    except Exception as exc:  # keep the raw callback whatever interpretation does
        conn.execute("ROLLBACK TO interpret")
        conn.execute("RELEASE interpret")
        receipt = Receipt(raw_id, error=f"{type(exc).__name__}: {exc}"[:500])
        mark_raw_unparsed(conn, raw_id, receipt.error or "")
        return receipt
    conn.execute("RELEASE interpret")
    return receipt


def _chunks(values: Sequence[str]) -> Iterable[Sequence[str]]:
    for start in range(0, len(values), _IN_CHUNK):
        yield values[start:start + _IN_CHUNK]


def apply_waiting_for_refs(conn: apsw.Connection, refs: Iterable[str], now_ms: int,
                           provider_ids: Iterable[tuple[str, str]] = ()) -> int:
    """DLR-6: apply the reports waiting for these just-recorded messages.

    ``refs`` are our refs; ``provider_ids`` are ``(provider, provider_msg_id)`` pairs
    for providers that report only their own id. Returns how many reports were
    applied (or kept as history). Call it in the unit that records the submissions,
    or right after that unit commits.
    """
    rows: list[Waiting] = []
    wanted = sorted(set(refs))
    for part in _chunks(wanted):
        marks = ",".join("?" * len(part))
        rows += [waiting_from_row(r) for r in conn.execute(
            "SELECT " + WAITING_COLUMNS + " FROM report_inbox"
            f" WHERE ref IN ({marks}) AND applied_at IS NULL", tuple(part))]
    by_provider: dict[str, list[str]] = {}
    for provider, msg_id in provider_ids:
        if msg_id:
            by_provider.setdefault(provider, []).append(msg_id)
    for provider, ids in by_provider.items():
        for part in _chunks(sorted(set(ids))):
            marks = ",".join("?" * len(part))
            rows += [waiting_from_row(r) for r in conn.execute(
                "SELECT " + WAITING_COLUMNS + " FROM report_inbox WHERE provider = ?"
                f" AND ref = '' AND provider_msg_id IN ({marks}) AND applied_at IS NULL",
                (provider, *part))]
    rows.sort(key=lambda r: (r.reported_at, r.id))
    matched = 0
    for row in rows:
        if settle(conn, row, now_ms) is not Verdict.WAIT:
            matched += 1
    return matched


def settle_due(conn: apsw.Connection, rows: Sequence[Waiting], now_ms: int) -> dict[str, int]:
    """Try each due row once (the reconciler's unit); counts by verdict."""
    counts: dict[str, int] = {}
    for row in rows:
        verdict = settle(conn, row, now_ms)
        counts[verdict.value] = counts.get(verdict.value, 0) + 1
    return counts
