"""Reading quarantined callbacks again (DLR-2: "stored raw for later").

A callback that was authentic but could not be read is kept in ``raw_reports`` with
``parsed = 0``. Parsing is what changes most, so at every start (and every
``INTERVAL_S`` after) the ``reparse`` loop offers each quarantined callback to its
provider's adapter again: the reports it now yields are filed and applied like fresh
ones, and the row is marked parsed; one that still cannot be read keeps its place
with the latest reason. The signature was checked when it was stored, so it is not
checked again (a Vonage timestamp would have gone stale by now).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from appliance.providers import CallbackRequest, ReportParseError, ReportReader
from appliance.reports.apply import settle
from appliance.reports.inbox import file_report, from_parsed
from appliance.service import Appliance
from appliance.store.connection import Connection

log = logging.getLogger("appliance.reports")
LOOP = "reparse"
INTERVAL_S = 3600.0


@dataclass
class Reparsed:
    parsed: int = 0
    still_unreadable: int = 0
    reports: int = 0


def reparse(conn: Connection, adapters: Mapping[str, ReportReader], now_ms: int,
            after_id: int, limit: int) -> tuple[Reparsed, int]:
    """Offer up to ``limit`` quarantined callbacks with ``id > after_id`` to their
    adapters again (a write unit). Returns the counts and the last id looked at."""
    out = Reparsed()
    last = after_id
    rows = conn.execute(
        "SELECT id, provider, method, content_type, query, body FROM raw_reports"
        " WHERE parsed = 0 AND id > ? ORDER BY id LIMIT ?", (after_id, limit)).fetchall()
    for raw_id, provider, method, ctype, query, body in rows:
        assert isinstance(raw_id, int) and isinstance(body, bytes)
        last = raw_id
        adapter = adapters.get(str(provider))
        if adapter is None:
            continue
        req = CallbackRequest(method=str(method), url="", query=str(query),
                              headers={"content-type": str(ctype)}, body=body)
        try:
            parsed = adapter.parse_reports(req)
        except ReportParseError as exc:
            conn.execute("UPDATE raw_reports SET error = ? WHERE id = ?", (str(exc), raw_id))
            out.still_unreadable += 1
            continue
        conn.execute("UPDATE raw_reports SET parsed = 1, error = NULL WHERE id = ?", (raw_id,))
        out.parsed += 1
        for item in parsed:
            row = file_report(conn, from_parsed(str(provider), item), raw_id, now_ms)
            if row is not None:
                out.reports += 1
                settle(conn, row, now_ms)
    return out, last


class Reparser:
    def __init__(self, appliance: Appliance, batch: int = 200) -> None:
        self.appliance = appliance
        self.batch = batch
        self.after_id = 0
        self.totals = Reparsed()

    async def step(self) -> float | None:
        adapters = {name: p.reports for name, p in self.appliance.providers.all().items()
                    if p.reports is not None}
        now = self.appliance.now_ms()
        result, last = await self.appliance.store.writer.run(
            lambda c: reparse(c, adapters, now, self.after_id, self.batch))
        self.totals.parsed += result.parsed
        self.totals.reports += result.reports
        if result.parsed:
            log.info("%s quarantined callbacks read on a second look (%s reports)",
                     result.parsed, result.reports)
        if last == self.after_id:  # a full pass is done: wait for the next start or hour
            self.after_id = 0
            return INTERVAL_S
        self.after_id = last
        return 0
