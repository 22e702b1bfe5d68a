"""Reading quarantined callbacks again (DLR-2: "stored raw for later").

A callback that was authentic but could not be read is kept in ``raw_reports`` with
``parsed = 0``. Parsing is what changes most, so at every start (and every
``INTERVAL_S`` after) the ``reparse`` loop offers each quarantined callback to its
provider's adapter again: the reports it now yields are filed and applied like fresh
ones, and the row is marked parsed; one that still cannot be read keeps its place
with the latest reason. The signature was checked when it was stored, so it is not
checked again (a Vonage timestamp would have gone stale by now).

One row that cannot be read or filed (a report with a lone surrogate, ``"ref":
"x\\ud800"``, which no database stores as text; an adapter that fails on it in a way
it did not foresee) is skipped, counted and keeps its reason: its changes are rolled
back under a savepoint of its own, and the batch goes on. Before, the whole batch
rolled back and the pass never moved past it, so no quarantined callback after it was
ever read again. A storage error (a full disk) still fails the batch: it is tried again.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from appliance.disk import is_storage_error
from appliance.providers import CallbackRequest, ReportParseError, ReportReader
from appliance.providers.registry import Providers
from appliance.reports.apply import settle
from appliance.reports.inbox import InboxReport, file_report, from_parsed, storable
from appliance.reports.pull_answers import METHOD as PULLED
from appliance.runtime import Runtime
from appliance.store.connection import Connection

log = logging.getLogger("appliance.reports")
LOOP = "reparse"
INTERVAL_S = 3600.0


@dataclass
class Reparsed:
    parsed: int = 0
    still_unreadable: int = 0
    reports: int = 0
    skipped: int = 0  # read, but its reports could not be filed: kept quarantined


def reparse(conn: Connection, adapters: Mapping[str, ReportReader], now_ms: int,
            after_id: int, limit: int) -> tuple[Reparsed, int]:
    """Offer up to ``limit`` quarantined callbacks with ``id > after_id`` to their
    adapters again (a write unit). Returns the counts and the last id looked at.

    A status answer that could not be read (``method = "PULL"``) is kept as evidence
    and not offered to the callback reader: the puller asks again instead."""
    out = Reparsed()
    last = after_id
    rows = conn.execute(
        "SELECT id, provider, method, content_type, query, body FROM raw_reports"
        " WHERE parsed = 0 AND id > ? AND method <> ? ORDER BY id LIMIT ?",
        (after_id, PULLED, limit)).fetchall()
    for raw_id, provider, method, ctype, query, body in rows:
        assert isinstance(raw_id, int) and isinstance(body, bytes)
        last = raw_id
        adapter = adapters.get(str(provider))
        if adapter is None:
            continue
        req = CallbackRequest(method=str(method), url="", query=str(query),
                              headers={"content-type": str(ctype)}, body=body)
        try:
            reports = [from_parsed(str(provider), p) for p in adapter.parse_reports(req)]
        except ReportParseError as exc:
            conn.execute("UPDATE raw_reports SET error = ? WHERE id = ?", (str(exc), raw_id))
            out.still_unreadable += 1
            continue
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            # A body the adapter did not expect at all: as a callback's (web.callbacks).
            _skip(conn, out, raw_id, f"unreadable ({type(exc).__name__})")
            continue
        if not storable(reports):
            _skip(conn, out, raw_id, "a report field is not valid Unicode text")
            continue
        conn.execute("SAVEPOINT reparse_row")
        try:
            filed = _file(conn, raw_id, reports, now_ms)
        except Exception as exc:
            conn.execute("ROLLBACK TO reparse_row")
            conn.execute("RELEASE reparse_row")
            if is_storage_error(exc):
                raise
            _skip(conn, out, raw_id, f"not filed ({type(exc).__name__}: {exc})")
            continue
        conn.execute("RELEASE reparse_row")
        out.parsed += 1
        out.reports += filed
    return out, last


def _file(conn: Connection, raw_id: int, reports: list[InboxReport], now_ms: int) -> int:
    """Mark the row parsed, file its reports and apply them; how many were new."""
    conn.execute("UPDATE raw_reports SET parsed = 1, error = NULL WHERE id = ?", (raw_id,))
    filed = 0
    for report in reports:
        row = file_report(conn, report, raw_id, now_ms)
        if row is not None:
            filed += 1
            settle(conn, row, now_ms)
    return filed


def _skip(conn: Connection, out: Reparsed, raw_id: int, reason: str) -> None:
    """A row read but not filed: it stays quarantined, with the reason, and is counted."""
    reason = reason[:500].encode("utf-8", "backslashreplace").decode("utf-8")
    conn.execute("UPDATE raw_reports SET error = ? WHERE id = ?", (reason, raw_id))
    out.skipped += 1
    log.warning("quarantined callback %s skipped on a second look: %s", raw_id, reason,
                extra={"raw_id": raw_id})


class Reparser:
    def __init__(self, appliance: Runtime, providers: Providers, batch: int = 200) -> None:
        self.appliance = appliance
        self.providers = providers
        self.batch = batch
        self.after_id = 0
        self.totals = Reparsed()

    async def step(self) -> float | None:
        adapters = {name: p.reports for name, p in self.providers.all().items()
                    if p.reports is not None}
        now = self.appliance.now_ms()
        result, last = await self.appliance.store.writer.run(
            lambda c: reparse(c, adapters, now, self.after_id, self.batch))
        self.totals.parsed += result.parsed
        self.totals.reports += result.reports
        self.totals.skipped += result.skipped
        if result.parsed:
            log.info("%s quarantined callbacks read on a second look (%s reports)",
                     result.parsed, result.reports)
        if last == self.after_id:  # a full pass is done: wait for the next start or hour
            self.after_id = 0
            return INTERVAL_S
        self.after_id = last
        return 0
