"""Retention: pruning old data in bounded batches (IMP-10, DLR-12).

Each rule deletes at most ``batch`` rows per step, so pruning a large backlog never
holds the writer for long; the loop comes back at once while a rule still finds
rows. Ages are measured on our own receive/finish times, never the provider's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import apsw

from appliance.config import Settings
from appliance.inbound.store import prune_raw as prune_raw_inbound
from appliance.reports.pruning import prune_inbox, prune_raw_reports
from appliance.service import Appliance

DAY_MS = 86_400_000
LOOP = "retention"


@dataclass(frozen=True)
class Rule:
    name: str
    # (connection, cutoff_ms, batch) -> rows removed
    prune: Callable[[apsw.Connection, int, int], int]
    age_days: Callable[[Settings], float]


def _prune_payloads(conn: apsw.Connection, cutoff: int, batch: int) -> int:
    ids = [r[0] for r in conn.execute(
        "SELECT p.job_id FROM import_payloads p JOIN import_jobs j ON j.id = p.job_id"
        " WHERE p.received_at < ? AND j.state NOT IN ('DRAFT', 'RUNNING') LIMIT ?",
        (cutoff, batch))]
    for job_id in ids:
        conn.execute("DELETE FROM import_payloads WHERE job_id = ?", (job_id,))
        conn.execute("UPDATE import_jobs SET payload_pruned_at = updated_at WHERE id = ?",
                     (job_id,))
    return len(ids)


def _prune_jobs(conn: apsw.Connection, cutoff: int, batch: int) -> int:
    ids = [r[0] for r in conn.execute(
        "SELECT id FROM import_jobs WHERE finished_at IS NOT NULL AND finished_at < ?"
        " AND state NOT IN ('DRAFT', 'RUNNING') LIMIT ?", (cutoff, batch))]
    removed = 0
    for job_id in ids:
        conn.execute("DELETE FROM import_rejects WHERE job_id = ?", (job_id,))
        conn.execute("DELETE FROM import_payloads WHERE job_id = ?", (job_id,))
        conn.execute("DELETE FROM import_jobs WHERE id = ?", (job_id,))
        removed += 1
    return removed


RULES: list[Rule] = [
    Rule("import_payloads", _prune_payloads, lambda s: s.imports.payload_retention_days),
    Rule("import_jobs", _prune_jobs, lambda s: s.imports.job_retention_days),
    Rule("report_inbox", prune_inbox, lambda s: s.reports.inbox_retention_days),
    Rule("raw_reports", prune_raw_reports, lambda s: s.reports.raw_retention_days),
    Rule("raw_inbound", prune_raw_inbound, lambda s: s.reports.raw_retention_days),
]


def _prune(rule: Rule, cutoff: int, batch: int, conn: apsw.Connection) -> int:
    return rule.prune(conn, cutoff, batch)


class Retention:
    def __init__(self, appliance: Appliance, batch: int = 500) -> None:
        self.appliance = appliance
        self.batch = batch
        self.removed: dict[str, int] = {rule.name: 0 for rule in RULES}

    async def step(self) -> float | None:
        more = False
        for rule in RULES:
            cutoff = self.appliance.now_ms() - int(rule.age_days(self.appliance.settings) * DAY_MS)
            n = await self.appliance.store.writer.run(partial(_prune, rule, cutoff, self.batch))
            self.removed[rule.name] = self.removed.get(rule.name, 0) + n
            more = more or n >= self.batch
        return 0.05 if more else None


def install(appliance: Appliance) -> None:
    retention = Retention(appliance)
    appliance.scheduler.add(LOOP, retention.step, interval_s=60.0)
