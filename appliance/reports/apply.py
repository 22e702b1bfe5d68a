"""Matching reports to messages and their parts, and applying them (DLR-5, DLR-6, MSG-4).

A report names a message by ``(provider, ref)`` or, for providers that only know their
own id, by ``(provider, provider_msg_id)`` through the mapping the sender records at
submit (MSG-6: a report from one provider never touches a message sent through
another). Within the message it is about one part:

* the part whose provider id it carries;
* a report whose id no part has yet goes to a part whose id is not known yet (the
  parts of a submission whose answer was never read), else it is a part the provider
  split off that we did not count, and becomes a new part;
* a report with no provider id is about the whole message: it is offered to every
  part sent so far, and newer-wins decides for each part (so it closes every part still
  open, and replaces a final part's state only where it is newer).

:func:`settle` asks :mod:`appliance.reports.states` for a verdict per part, writes the
parts that changed, then sets the message's state from all its parts
(:mod:`appliance.reports.aggregate`), and marks the inbox row ``APPLIED`` or ``STALE``
(kept as history) with the message and part it belongs to. A report with no message
yet, or for a message the sender has not recorded as submitted, stays waiting with its
next attempt scheduled.

:func:`apply_waiting_for_refs` is DLR-6: the sender calls it with the refs it has just
committed (in the same write unit or the next), so a report that beat its message
to the database costs no delay at all.

Every function here is a part of a write unit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from appliance.providers.iys import IYS_ERROR, refused_for_iys
from appliance.reports.aggregate import PartView, aggregate, finalised_at
from appliance.reports.inbox import (
    WAITING_COLUMNS,
    InboxReport,
    RawCallback,
    Waiting,
    defer,
    defer_all,
    file_report,
    mark_raw_unparsed,
    store_raw,
    waiting_from_row,
)
from appliance.reports.states import (
    NOT_YET_SENT,
    REPORTED_FINAL,
    Verdict,
    decide,
    is_final,
)
from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.errors import STORAGE_ERRORS
from appliance.store.rows import as_int

_IN_CHUNK = 500
# A part row in this state was never taken by the provider: no report is about it.
_NOT_SENT = "RETRY"


@dataclass(frozen=True)
class MessageState:
    id: int
    ref: str
    state: str
    state_at: int
    finalised_at: int | None
    provider_msg_id: str | None = None
    error: str | None = None


@dataclass
class PartState:
    """One part as :func:`settle` reads and rewrites it."""

    part: int
    provider_msg_id: str | None
    state: str
    state_at: int
    finalised_at: int | None
    error: str | None
    changed: bool = False
    new: bool = False  # no row yet: inserted when written


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


_MESSAGE_COLUMNS = "id, ref, state, state_at, finalised_at, provider_msg_id, error"


def _message(found: Sequence[Any]) -> MessageState:
    return MessageState(as_int(found[0]), str(found[1]), str(found[2]), as_int(found[3]),
                        None if found[4] is None else int(found[4]), _text(found[5]),
                        _text(found[6]))


def find_message(conn: Connection, row: Waiting) -> MessageState | None:
    """The message a report is about, if it is in the database yet (MSG-6: only among
    the messages sent through the provider that sent the report).

    On PostgreSQL its row is locked to the end of the unit and read as it is once the
    lock is ours: two processes settling reports of one message at once would each
    read its parts before the other wrote them, and the older report could overwrite
    the newer; the second now waits here and reads what the first wrote. SQLite's one
    writer already settles one report at a time.
    """
    lock = dialect.of(conn).for_update
    select = "SELECT " + _MESSAGE_COLUMNS + " FROM messages"
    found = None
    if row.ref:
        found = conn.execute(select + " WHERE ref = ? AND provider = ?" + lock,
                             (row.ref, row.provider)).fetchone()
    elif row.provider_msg_id:
        mapped = conn.execute(
            "SELECT ref FROM provider_ids WHERE provider = ? AND provider_msg_id = ?",
            (row.provider, row.provider_msg_id)).fetchone()
        if mapped is not None:
            found = conn.execute(select + " WHERE ref = ? AND provider = ?" + lock,
                                 (mapped[0], row.provider)).fetchone()
        else:
            found = conn.execute(
                select + " WHERE provider = ? AND provider_msg_id = ?" + lock,
                (row.provider, row.provider_msg_id)).fetchone()
    if found is None:
        return None
    return _message(found)


def find_messages_by_ref(conn: Connection, keys: Iterable[tuple[str, str]]
                         ) -> dict[tuple[str, str], MessageState]:
    """The messages of these ``(provider, ref)`` (an empty ref is passed over), as
    :func:`find_message` finds (and locks) each: one statement a provider and
    ``rows_a_statement`` refs, locking in the order of the messages' ids."""
    lock, most = dialect.of(conn).for_update, dialect.of(conn).rows_a_statement
    by_provider: dict[str, set[str]] = {}
    for provider, ref in keys:
        if ref:
            by_provider.setdefault(provider, set()).add(ref)
    found: dict[tuple[str, str], MessageState] = {}
    for provider, refs in by_provider.items():
        wanted = sorted(refs)
        for start in range(0, len(wanted), most):
            part = wanted[start:start + most]
            for r in conn.execute(
                    "SELECT " + _MESSAGE_COLUMNS + " FROM messages WHERE provider = ?"
                    f" AND ref IN ({','.join('?' * len(part))}) ORDER BY id" + lock,
                    (provider, *part)):
                message = _message(r)
                found[(provider, message.ref)] = message
    return found


def read_parts(conn: Connection, message: MessageState) -> list[PartState]:
    """The message's parts; one standing where the message stands if none is recorded.

    No part rows: the message's submission answer said nothing of its parts (a
    refusal, or a retry that the provider took after all). Its one part starts from the
    message's own state, so newer-wins runs exactly as it would on the message. (Two
    statements, not a join: on this path, measured, the join costs more.)
    """
    rows: list[Any] = conn.execute(
        "SELECT part, provider_msg_id, state, state_at, finalised_at, error"
        " FROM message_parts WHERE message_id = ? ORDER BY part", (message.id,)).fetchall()
    if rows:
        return [PartState(int(r[0]), _text(r[1]), str(r[2]), int(r[3]),
                          None if r[4] is None else int(r[4]), _text(r[5])) for r in rows]
    state = "SUBMITTED" if message.state == _NOT_SENT else message.state
    return [PartState(1, message.provider_msg_id, state, message.state_at,
                      message.finalised_at, None, changed=True, new=True)]


def _targets(parts: list[PartState], row: Waiting, message_final: bool) -> list[PartState]:
    """The parts ``row`` is about (see the module's rules); may add or bind a part."""
    pid = row.provider_msg_id
    if not pid:
        return [p for p in parts if p.state != _NOT_SENT]
    for p in parts:
        if p.provider_msg_id == pid:
            return [p]
    for p in parts:
        if p.provider_msg_id is None and p.state != _NOT_SENT:
            p.provider_msg_id = pid
            p.changed = True
            return [p]
    if message_final and not is_final(row.state):
        return []  # an unknown part's intermediate report never reopens a final message
    extra = PartState(max(p.part for p in parts) + 1, pid, "SUBMITTED", 0, None, None,
                      changed=True, new=True)
    parts.append(extra)
    return [extra]


def _failure_text(row: Waiting) -> str | None:
    if row.state in REPORTED_FINAL and row.state != "DELIVERED":
        code = f" (error {row.error_code})" if row.error_code else ""
        return f"report: {row.status}{code}"[:200]
    return None


_INSERT_PART = (
    "INSERT INTO message_parts (provider_msg_id, state, state_at, error, finalised_at,"
    " updated_at, message_id, part) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPDATE_PART = (
    "UPDATE message_parts SET provider_msg_id = ?, state = ?, state_at = ?, error = ?,"
    " finalised_at = ?, updated_at = ? WHERE message_id = ? AND part = ?"
)


def settle(conn: Connection, row: Waiting, now_ms: int) -> Verdict:
    """Apply ``row`` to its message's parts, keep it as history, or leave it waiting."""
    message = find_message(conn, row)
    if message is None or message.state in NOT_YET_SENT:
        defer(conn, row, now_ms)
        return Verdict.WAIT
    return settle_found(conn, row, message, now_ms)


def not_ready(message: MessageState | None) -> bool:
    """A report about ``message`` waits: it is not in the database yet, or not sent."""
    return message is None or message.state in NOT_YET_SENT


def settle_all(conn: Connection, rows: Sequence[Waiting], now_ms: int,
               found: dict[tuple[str, str], MessageState] | None = None) -> list[Verdict]:
    """:func:`settle` of each row, in order, with the messages of the rows that carry a
    ``ref`` looked up (and locked) together (``found``: already looked up in this
    unit) and the rows left waiting deferred together: an unknown report costs no
    statement of its own. A message two rows are about is read again for the second
    (the first may have changed it)."""
    if found is None:
        found = find_messages_by_ref(conn, [(row.provider, row.ref) for row in rows])
    verdicts: list[Verdict] = []
    waiting: list[Waiting] = []
    used: set[tuple[str, str]] = set()
    for row in rows:
        key = (row.provider, row.ref)
        message = found.get(key) if row.ref else None
        if row.ref and not_ready(message):
            # Nothing this batch settles makes a message, or sends one not yet sent.
            waiting.append(row)
            verdicts.append(Verdict.WAIT)
        elif message is not None and key not in used:
            used.add(key)
            verdicts.append(settle_found(conn, row, message, now_ms))
        else:
            verdicts.append(settle(conn, row, now_ms))
    defer_all(conn, waiting, now_ms)
    return verdicts


def settle_found(conn: Connection, row: Waiting, message: MessageState, now_ms: int
                 ) -> Verdict:
    """:func:`settle` of ``row`` about ``message``, sent and read (locked) in this unit."""
    parts = read_parts(conn, message)
    targets = _targets(parts, row, is_final(message.state))
    applied = False
    for p in targets:
        if decide(p.state, p.state_at, row.state, row.reported_at) is not Verdict.APPLY:
            continue
        if not is_final(row.state):
            p.finalised_at = None
        elif p.state not in REPORTED_FINAL or p.finalised_at is None:
            p.finalised_at = now_ms
        p.state, p.state_at = row.state, row.reported_at
        p.error = _failure_text(row) or p.error
        p.changed = applied = True
    for p in parts:
        if p.changed:
            conn.execute(_INSERT_PART if p.new else _UPDATE_PART,
                         (p.provider_msg_id, p.state, p.state_at, p.error, p.finalised_at,
                          now_ms, message.id, p.part))
    if applied:
        agg = aggregate([PartView(p.part, p.state, p.state_at, p.error) for p in parts])
        # A REJECTED report that says İYS refused it: the message's error_kind (IYS-2).
        kind = IYS_ERROR if agg.state == "REJECTED" and row.state == "REJECTED" \
            and refused_for_iys(row.error_code) else None
        conn.execute(
            "UPDATE messages SET state = ?, state_at = ?, finalised_at = ?,"
            " error = coalesce(?, error), error_kind = coalesce(?, error_kind),"
            " provider_msg_id = coalesce(provider_msg_id, nullif(?, '')), updated_at = ?"
            " WHERE id = ? AND state = ?",
            (agg.state, agg.state_at,
             finalised_at(message.state, message.finalised_at, agg, now_ms), agg.error,
             kind, row.provider_msg_id, now_ms, message.id, message.state),
        )
    verdict = Verdict.APPLY if applied else Verdict.STALE
    part = targets[0].part if len(targets) == 1 and (row.provider_msg_id or len(parts) == 1) \
        else None
    conn.execute(
        "UPDATE report_inbox SET applied_at = ?, outcome = ?, message_id = ?, part = ?"
        " WHERE id = ?",
        (now_ms, "APPLIED" if applied else "STALE", message.id, part, row.id),
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


def receive(conn: Connection, raw: RawCallback, reports: Sequence[InboxReport],
            parse_error: str | None, now_ms: int) -> Receipt:
    """The callback's write unit: store it raw (DLR-2), then file and apply its reports.

    The raw row is written first; the interpretation runs under its own savepoint, so
    a report that cannot be filed or applied leaves the raw callback stored (marked
    unparsed, with the reason) and the caller still answers ``2xx``. A storage error
    (on PostgreSQL also a deadlock with another process) fails the whole unit instead:
    nothing is stored, the caller answers ``503`` and the provider sends it again.
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
    except STORAGE_ERRORS:
        # Not the report's fault (a lost connection, another process's lock): the whole
        # unit fails, so the caller answers 503 and the provider sends it again.
        raise
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


def apply_waiting_for_refs(conn: Connection, refs: Iterable[str], now_ms: int,
                           provider_ids: Iterable[tuple[str, str]] = (),
                           provider: str | None = None) -> int:
    """DLR-6: apply the reports waiting for these just-recorded messages.

    ``refs`` are our refs (of messages sent through ``provider``, when given: reports
    from other providers are not theirs); ``provider_ids`` are ``(provider,
    provider_msg_id)`` pairs for providers that report only their own id. Returns how
    many reports were applied (or kept as history). Call it in the unit that records
    the submissions, or right after that unit commits.
    """
    rows: list[Waiting] = []
    wanted = sorted(set(refs))
    for part in _chunks(wanted):
        marks = ",".join("?" * len(part))
        # By ref alone, so the lookup is the inbox's unique index on ref: with the
        # provider in the SQL, SQLite (without statistics) reads every report of that
        # provider instead, in every batch the sender records.
        rows += [w for w in (waiting_from_row(r) for r in conn.execute(
            "SELECT " + WAITING_COLUMNS + " FROM report_inbox"
            f" WHERE ref IN ({marks}) AND applied_at IS NULL", tuple(part)))
            if provider is None or w.provider == provider]
    by_provider: dict[str, list[str]] = {}
    for who, msg_id in provider_ids:
        if msg_id:
            by_provider.setdefault(who, []).append(msg_id)
    for who, ids in by_provider.items():
        for part in _chunks(sorted(set(ids))):
            marks = ",".join("?" * len(part))
            rows += [waiting_from_row(r) for r in conn.execute(
                "SELECT " + WAITING_COLUMNS + " FROM report_inbox WHERE provider = ?"
                f" AND ref = '' AND provider_msg_id IN ({marks}) AND applied_at IS NULL",
                (who, *part))]
    rows.sort(key=lambda r: (r.reported_at, r.id))
    matched = 0
    for row in rows:
        if settle(conn, row, now_ms) is not Verdict.WAIT:
            matched += 1
    return matched


def settle_due(conn: Connection, rows: Sequence[Waiting], now_ms: int) -> dict[str, int]:
    """Try each due row once; counts by verdict."""
    counts: dict[str, int] = {}
    for verdict in settle_all(conn, rows, now_ms):
        counts[verdict.value] = counts.get(verdict.value, 0) + 1
    return counts
