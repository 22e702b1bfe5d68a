"""How well reports are recorded (DLR-9, DLR-10) and what is overdue (DLR-11).

* *Coverage*: the share of messages, created in the window ``[now - window, now -
  settle]``, that have a final state the provider told us (``DELIVERED``, ``FAILED``,
  ``EXPIRED``, ``REJECTED``). Our own cut-off ``UNKNOWN`` is not coverage: it is the
  absence of a report. Messages never sent (``CANCELLED``) are not counted: no report
  is due for them. *Delivery rate* is the share ``DELIVERED`` of the same messages.
  The first says whether our pipeline records outcomes, the second whether the route
  works.
* *Open by hour of creation*: ``still_open`` (no final state from the provider) beside
  ``total`` per hour. A race follows volume; a silent provider is flat.
* *Inbox health*: reports waiting for a message, and the age of the oldest (our
  receive time). Dozens aged seconds is an absorbed race; thousands aged hours means
  the submitted ref and the reported ref are not the same key.
* *Overdue*: messages past the delivery window with no final report, either still open
  or cut off to ``UNKNOWN`` within the last ``window``.
* *Refused for İYS*: messages created within the window (settled and live together)
  that a provider refused for İYS (IYS-2), from a small index of those messages.
* *Live*: the same figures over the messages created in the settle time itself
  (``[now - settle, now]``), which the settled window leaves out because many of their
  reports are still due; ``still_due`` counts those without a final state whose
  delivery window has not passed yet. A rising live coverage is a pipeline working;
  it is not yet a number to defend.

All of these are read units; ``account_id`` narrows them to one account. None of them
reads every message: the window figures come from the counts the triggers keep
(:mod:`appliance.store.rollups`, exact to the millisecond at the window's edges);
inbox health from the kept counts and the index of waiting reports by age; overdue
from ranges of the index of open messages, so it reads the overdue messages only.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from appliance.providers.iys import IYS_ERROR
from appliance.reports.states import (
    CUT_OFF,
    FINAL_STATES,
    NEVER_SENT,
    OPEN_AFTER_SUBMIT,
    REPORTED_FINAL,
)
from appliance.store.connection import Connection
from appliance.store.rollups import counts, created_between
from appliance.store.rows import as_int

HOUR_MS = 3_600_000
_OPEN = ",".join(f"'{s}'" for s in sorted(OPEN_AFTER_SUBMIT))


def _pct(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 2) if whole else None


def _account(account_id: int | None) -> tuple[str, tuple[int, ...]]:
    # ``+account_id``: filter the rows the state index gives, rather than let the
    # planner walk the account's (account_id, msisdn) index row by row.
    return ("", ()) if account_id is None else (" AND +account_id = ?", (account_id,))


@dataclass(frozen=True)
class Coverage:
    window_start: int
    window_end: int
    total: int
    finalised: int
    delivered: int

    @property
    def coverage_pct(self) -> float | None:
        return _pct(self.finalised, self.total)

    @property
    def delivered_pct(self) -> float | None:
        return _pct(self.delivered, self.total)


@dataclass(frozen=True)
class HourRow:
    hour: int  # epoch ms of the hour's start
    total: int
    finalised: int  # with a final state from the provider
    delivered: int

    @property
    def still_open(self) -> int:
        return self.total - self.finalised


def _hours(found: dict[tuple[int, str], int]) -> list[HourRow]:
    """Per hour, newest first: messages sent or to be sent (CANCELLED, never sent, is
    not counted), those with a final state from the provider, those delivered."""
    by_hour: dict[int, list[int]] = {}
    for (hour, state), n in found.items():
        if state == NEVER_SENT:
            continue
        row = by_hour.setdefault(hour, [0, 0, 0])
        row[0] += n
        if state in REPORTED_FINAL:
            row[1] += n
        if state == "DELIVERED":
            row[2] += n
    return [HourRow(hour * HOUR_MS, *by_hour[hour]) for hour in sorted(by_hour, reverse=True)]


def coverage(conn: Connection, now_ms: int, window_hours: float, settle_hours: float,
             account_id: int | None = None) -> Coverage:
    return coverage_of(open_by_hour(conn, now_ms, window_hours, settle_hours, account_id),
                       now_ms, window_hours, settle_hours)


def open_by_hour(conn: Connection, now_ms: int, window_hours: float,
                 settle_hours: float, account_id: int | None = None) -> list[HourRow]:
    """Per hour of creation in the coverage window, newest first (:func:`coverage_of`
    sums it into the window's figures)."""
    start = now_ms - int(window_hours * HOUR_MS)
    end = now_ms - int(settle_hours * HOUR_MS)
    return _hours(created_between(conn, start, end, account_id))


def coverage_of(hours: list[HourRow], now_ms: int, window_hours: float,
                settle_hours: float) -> Coverage:
    """The window's coverage from its hours (the same figures as :func:`coverage`)."""
    return Coverage(now_ms - int(window_hours * HOUR_MS), now_ms - int(settle_hours * HOUR_MS),
                    sum(h.total for h in hours), sum(h.finalised for h in hours),
                    sum(h.delivered for h in hours))


@dataclass(frozen=True)
class Live:
    start: int
    end: int
    messages: int
    finalised: int
    delivered: int
    still_due: int

    @property
    def coverage_pct(self) -> float | None:
        return _pct(self.finalised, self.messages)

    @property
    def delivered_pct(self) -> float | None:
        return _pct(self.delivered, self.messages)

    def as_json(self) -> dict[str, Any]:
        """The ``live`` object of ``/api/stats``."""
        return {"messages": self.messages, "finalised": self.finalised,
                "coverage_pct": self.coverage_pct, "delivered_pct": self.delivered_pct,
                "still_due": self.still_due}


def live_by_hour(conn: Connection, now_ms: int, settle_hours: float,
                 delivery_window_hours: float, account_id: int | None = None
                 ) -> tuple[Live, list[HourRow]]:
    """The messages created in the settle time (``[now - settle, now]``): their figures
    and their hours, newest first."""
    start = now_ms - int(settle_hours * HOUR_MS)
    due_from = now_ms - int(delivery_window_hours * HOUR_MS)
    hours: list[HourRow] = []
    due = 0
    if start < now_ms:
        found = created_between(conn, start, now_ms + 1, account_id)
        hours = _hours(found)
        if due_from > start:  # only those still within their delivery window are due
            found = created_between(conn, due_from, now_ms + 1, account_id)
        due = sum(n for (_, state), n in found.items() if state not in FINAL_STATES)
    live = Live(start, now_ms, sum(h.total for h in hours), sum(h.finalised for h in hours),
                sum(h.delivered for h in hours), due)
    return live, hours


@dataclass(frozen=True)
class InboxHealth:
    waiting: int
    oldest_age_s: float | None
    quarantined: int  # authenticated callbacks kept raw because they could not be read


def inbox_health(conn: Connection, now_ms: int) -> InboxHealth:
    row = conn.execute(
        "SELECT min(received_at) FROM report_inbox WHERE applied_at IS NULL").fetchone()
    oldest = None if row is None or row[0] is None else round(
        max(now_ms - int(row[0]), 0) / 1000, 3)
    return InboxHealth(counts(conn, "report_inbox").get("WAITING", 0), oldest,
                       counts(conn, "raw_reports").get("quarantined", 0))


def overdue(conn: Connection, now_ms: int, delivery_window_hours: float,
            lookback_hours: float, account_id: int | None = None) -> int:
    """Messages past the delivery window without a final report: still open, or cut
    off to ``UNKNOWN`` when they were submitted within ``lookback`` of the window."""
    window_end = now_ms - int(delivery_window_hours * HOUR_MS)
    lookback_start = window_end - int(lookback_hours * HOUR_MS)
    where, args = _account(account_id)
    # Each term is a range of the covering messages_open index.
    row = conn.execute(
        f"SELECT (SELECT count(*) FROM messages WHERE state IN ({_OPEN})"
        f"         AND submitted_at < ?{where}),"
        f"       (SELECT count(*) FROM messages WHERE state IN ({_OPEN})"
        f"         AND submitted_at IS NULL AND created_at < ?{where}),"
        f"       (SELECT count(*) FROM messages WHERE state = '{CUT_OFF}'"
        f"         AND submitted_at >= ?{where}),"
        f"       (SELECT count(*) FROM messages WHERE state = '{CUT_OFF}'"
        f"         AND submitted_at IS NULL AND created_at >= ?{where})",
        (window_end, *args, window_end, *args, lookback_start, *args, lookback_start, *args)
    ).fetchone()
    assert row is not None
    return sum(as_int(v) for v in row)


def iys_refused(conn: Connection, since_ms: int, account_id: int | None = None) -> int:
    """Messages created since ``since_ms`` that a provider refused for İYS (``REJECTED``,
    ``error_kind`` ``"iys"``, IYS-2): a range of the small index of messages with an
    ``error_kind``."""
    where, args = _account(account_id)
    row = conn.execute(
        "SELECT count(*) FROM messages WHERE error_kind = ? AND state = 'REJECTED'"
        f" AND created_at >= ?{where}", (IYS_ERROR, since_ms, *args)).fetchone()
    return 0 if row is None else as_int(row[0])


def as_json(value: Any) -> dict[str, Any]:
    """A dataclass from this module as JSON-ready data (percentages included)."""
    out = asdict(value)
    if isinstance(value, HourRow):
        out["still_open"] = value.still_open
    if isinstance(value, Coverage):
        out["coverage_pct"] = value.coverage_pct
        out["delivered_pct"] = value.delivered_pct
    return out
