"""The report inbox: callbacks stored raw, reports keyed by what the provider sent.

DLR-2: every authenticated callback is written to ``raw_reports`` exactly as it came,
before anything reads it; one that cannot be parsed stays there (``parsed = 0``) for
later. DLR-3: each report it carries goes into ``report_inbox`` under the provider's
own key ``(ref, provider_msg_id, status, reported_at, provider)``; a repeat of the
same fact only bumps ``repeats``. A row waits (``applied_at IS NULL``) until it is
matched to a message, retried on the :data:`BACKOFF_S` schedule (DLR-4).

Everything here is a part of a write unit: functions of the writer's connection.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from appliance.providers import ParsedReport
from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.rows import as_int

# DLR-4: seconds before the next match attempt, by attempts already made.
BACKOFF_S = (1, 5, 15, 60, 300, 1800, 7200, 21600)


def next_delay_ms(attempts: int) -> int:
    """Milliseconds to wait after ``attempts`` failed match attempts (0 = first)."""
    return BACKOFF_S[min(max(attempts, 0), len(BACKOFF_S) - 1)] * 1000


@dataclass(frozen=True)
class RawCallback:
    """A callback as received: what ``raw_reports`` keeps."""

    provider: str
    method: str
    content_type: str
    query: str
    body: bytes


@dataclass(frozen=True)
class InboxReport:
    """One report as the inbox files it."""

    provider: str
    ref: str  # our ref as echoed by the provider; '' when it sent only its own id
    provider_msg_id: str  # '' when it sent none
    status: str  # the provider's own word
    reported_at: int  # provider clock, epoch ms; 0 when it sent none
    state: str  # our mapped state
    error_code: str | None = None
    source: str = "callback"  # how it came: "callback", "session" (SMPP) or "pull"


_SURROGATE = re.compile("[\ud800-\udfff]")


def storable(reports: list[InboxReport]) -> bool:
    """No text field holds a lone surrogate (``"x\\ud800"`` in JSON): neither SQLite nor
    PostgreSQL can store it as text, so such a report is kept raw, not filed."""
    texts = [v for r in reports for v in vars(r).values() if isinstance(v, str)]
    return _SURROGATE.search("\x00".join(texts)) is None  # one search: a report a callback


def from_parsed(provider: str, parsed: ParsedReport, source: str = "callback") -> InboxReport:
    """An adapter's report as the inbox files it (``source``: ``"pull"`` for a report
    read from a status answer)."""
    return InboxReport(
        provider=provider,
        ref=parsed.ref or "",
        provider_msg_id=parsed.provider_msg_id or "",
        status=parsed.status,
        reported_at=max(parsed.reported_at_ms, 0),
        state=parsed.state,
        error_code=parsed.error_code,
        source=source,
    )


@dataclass(frozen=True)
class Waiting:
    """An inbox row not yet matched to a message."""

    id: int
    provider: str
    ref: str
    provider_msg_id: str
    status: str
    state: str
    reported_at: int
    error_code: str | None
    attempts: int


WAITING_COLUMNS = (
    "id, provider, ref, provider_msg_id, status, state, reported_at, error_code, attempts"
)


def waiting_from_row(row: tuple[object, ...]) -> Waiting:
    return Waiting(
        id=int(row[0]),  # type: ignore[call-overload]
        provider=str(row[1]),
        ref=str(row[2]),
        provider_msg_id=str(row[3]),
        status=str(row[4]),
        state=str(row[5]),
        reported_at=int(row[6]),  # type: ignore[call-overload]
        error_code=None if row[7] is None else str(row[7]),
        attempts=int(row[8]),  # type: ignore[call-overload]
    )


_INSERT_RAW = ("INSERT INTO raw_reports (provider, method, content_type, query, body,"
               " received_at, parsed, error) VALUES ")
_RAW_VALUES = "(?, ?, ?, ?, ?, ?, ?, ?)"


def store_raw(conn: Connection, raw: RawCallback, now_ms: int, parsed: bool,
              error: str | None) -> int:
    """Keep the callback as received; returns its id."""
    row = conn.execute(
        _INSERT_RAW + _RAW_VALUES + " RETURNING id",
        (raw.provider, raw.method, raw.content_type, raw.query, raw.body, now_ms,
         1 if parsed else 0, error),
    ).fetchone()
    assert row is not None
    return as_int(row[0])


def store_raw_all(conn: Connection, raws: Sequence[tuple[RawCallback, str | None]],
                  now_ms: int) -> list[int]:
    """:func:`store_raw` of each ``(callback, parse error)``, in one statement a
    :attr:`~appliance.store.dialect.Dialect.rows_a_statement`; their ids in the same
    order (a statement's rows take ascending ids in the order of its ``VALUES``, on
    both engines)."""
    ids: list[int] = []
    most = dialect.of(conn).rows_a_statement
    for start in range(0, len(raws), most):
        part = raws[start:start + most]
        params: list[object] = []
        for raw, error in part:
            params += (raw.provider, raw.method, raw.content_type, raw.query, raw.body,
                       now_ms, 1 if error is None else 0, error)
        rows = conn.execute(_INSERT_RAW + ", ".join([_RAW_VALUES] * len(part))
                            + " RETURNING id", params).fetchall()
        ids += sorted(as_int(r[0]) for r in rows)
    return ids


def mark_raw_unparsed(conn: Connection, raw_id: int, error: str) -> None:
    conn.execute("UPDATE raw_reports SET parsed = 0, error = ? WHERE id = ?", (error, raw_id))


_INSERT_REPORT = ("INSERT INTO report_inbox (provider, ref, provider_msg_id, status,"
                  " reported_at, state, error_code, raw_id, received_at, next_try_at, source,"
                  " attempts) VALUES ")
_REPORT_VALUES = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_ON_REPEAT = (" ON CONFLICT (ref, provider_msg_id, status, reported_at, provider)"
              " DO UPDATE SET repeats = report_inbox.repeats + 1"
              " RETURNING " + WAITING_COLUMNS + ", repeats")
ReportKey = tuple[str, str, str, int, str]  # the inbox's unique key, as its columns read


def _report_values(report: InboxReport, raw_id: int | None, now_ms: int,
                   tried: bool) -> tuple[object, ...]:
    """The row's values; ``tried``: filed as :func:`defer` leaves a row after its first
    match attempt (its message is known not to be there yet)."""
    return (report.provider, report.ref, report.provider_msg_id, report.status,
            max(report.reported_at, 0), report.state, report.error_code, raw_id, now_ms,
            now_ms + next_delay_ms(0) if tried else now_ms, report.source, 1 if tried else 0)


def _report_key(report: InboxReport) -> ReportKey:
    return (report.ref, report.provider_msg_id, report.status, max(report.reported_at, 0),
            report.provider)


def file_report(conn: Connection, report: InboxReport, raw_id: int | None,
                now_ms: int, tried: bool = False) -> Waiting | None:
    """File ``report``; the new waiting row, or ``None`` when it is a repeat (the same
    fact however it came: a pulled report and the same one pushed are one row, whose
    ``source`` is how it came first). ``tried``: its message is known not to be there
    yet, so the row is filed as deferred once (:func:`defer`) in the same statement."""
    row = conn.execute(_INSERT_REPORT + _REPORT_VALUES + _ON_REPEAT,
                       _report_values(report, raw_id, now_ms, tried)).fetchone()
    assert row is not None
    if as_int(row[9]) > 0:
        return None
    return waiting_from_row(row)


def file_report_all(conn: Connection, reports: Sequence[tuple[InboxReport, int | None]],
                    now_ms: int, tried: Collection[int] = ()) -> list[Waiting | None]:
    """:func:`file_report` of each ``(report, raw id)``, in order (``tried``: the
    positions of those filed as ``tried``): in one statement a ``rows_a_statement``
    when no two are the same fact (one statement cannot both insert a row and count a
    repeat of it on PostgreSQL), else one by one."""
    keys = [_report_key(report) for report, _ in reports]
    if len(set(keys)) < len(keys):
        return [file_report(conn, report, raw_id, now_ms, n in tried)
                for n, (report, raw_id) in enumerate(reports)]
    filed: dict[ReportKey, Waiting | None] = {}
    most = dialect.of(conn).rows_a_statement
    for start in range(0, len(reports), most):
        part = reports[start:start + most]
        params: list[object] = []
        for n, (report, raw_id) in enumerate(part, start):
            params += _report_values(report, raw_id, now_ms, n in tried)
        for row in conn.execute(_INSERT_REPORT + ", ".join([_REPORT_VALUES] * len(part))
                                + _ON_REPEAT, params).fetchall():
            waiting = waiting_from_row(row)
            filed[(waiting.ref, waiting.provider_msg_id, waiting.status, waiting.reported_at,
                   waiting.provider)] = None if as_int(row[9]) > 0 else waiting
    return [filed[key] for key in keys]


def defer(conn: Connection, row: Waiting, now_ms: int) -> int:
    """Record a failed match attempt; returns when the next one is due."""
    due = now_ms + next_delay_ms(row.attempts)
    conn.execute(
        "UPDATE report_inbox SET attempts = attempts + 1, next_try_at = ? WHERE id = ?",
        (due, row.id),
    )
    return due


def defer_all(conn: Connection, rows: Sequence[Waiting], now_ms: int) -> None:
    """:func:`defer` of each row: one statement for the rows of one number of attempts
    (the same delay), a ``rows_a_statement`` at most."""
    by_attempts: dict[int, list[int]] = {}
    for row in rows:
        by_attempts.setdefault(row.attempts, []).append(row.id)
    most = dialect.of(conn).rows_a_statement
    for attempts, ids in by_attempts.items():
        for start in range(0, len(ids), most):
            part = ids[start:start + most]
            conn.execute(
                "UPDATE report_inbox SET attempts = attempts + 1, next_try_at = ?"
                f" WHERE id IN ({','.join('?' * len(part))})",
                (now_ms + next_delay_ms(attempts), *part))


def due_rows(conn: Connection, now_ms: int, limit: int, claim: bool = False) -> list[Waiting]:
    """Waiting rows whose next attempt is due, oldest due first. ``claim`` (in the write
    unit that settles them): on PostgreSQL, locked to this unit and passed over by
    another process's reconciler (``SKIP LOCKED``), so two never settle the same row."""
    lock = dialect.of(conn).skip_locked if claim else ""
    return [waiting_from_row(r) for r in conn.execute(
        "SELECT " + WAITING_COLUMNS + " FROM report_inbox"
        f" WHERE applied_at IS NULL AND next_try_at <= ? ORDER BY next_try_at LIMIT ?{lock}",
        (now_ms, limit))]


def next_due_at(conn: Connection) -> int | None:
    """When the earliest waiting row is next due (a read unit)."""
    row = conn.execute(
        "SELECT min(next_try_at) FROM report_inbox WHERE applied_at IS NULL").fetchone()
    return None if row is None or row[0] is None else int(row[0])
