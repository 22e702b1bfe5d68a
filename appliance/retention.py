"""Retention: pruning old data in bounded batches (IMP-10, DLR-12, OPS-5).

Each rule deletes at most ``batch`` rows per step, so pruning a large backlog never
holds the writer for long; the loop comes back at once while a rule still finds
rows. Ages are measured on our own receive/finish times, never the provider's. A
pruned payload records when it was pruned (``payload_pruned_at``: a re-run of that
job is answered ``410`` with that date). The last rule finishes deleting the
contacts of a deleted list if the process stopped halfway through. Status events
the webhook receiver took go after ``[webhooks] retention_days``; one it has not taken
is never pruned.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from appliance.config import Settings
from appliance.inbound.store import prune_raw as prune_raw_inbound
from appliance.reports.pruning import prune_inbox, prune_raw_reports
from appliance.runtime import Runtime
from appliance.store.connection import Connection
from appliance.webhooks.outbox import prune_delivered as prune_webhook_events

DAY_MS = 86_400_000
LOOP = "retention"


@dataclass(frozen=True)
class Rule:
    name: str
    # (connection, cutoff_ms, batch, now_ms) -> rows removed
    prune: Callable[[Connection, int, int, int], int]
    age_days: Callable[[Settings], float]


def _prune_payloads(conn: Connection, cutoff: int, batch: int, now: int) -> int:
    ids = [r[0] for r in conn.execute(
        "SELECT p.job_id FROM import_payloads p JOIN import_jobs j ON j.id = p.job_id"
        " WHERE p.received_at < ? AND j.state NOT IN ('DRAFT', 'RUNNING') LIMIT ?",
        (cutoff, batch))]
    for job_id in ids:
        conn.execute("DELETE FROM import_payloads WHERE job_id = ?", (job_id,))
        conn.execute("UPDATE import_jobs SET payload_pruned_at = ? WHERE id = ?",
                     (now, job_id))
    return len(ids)


def _prune_jobs(conn: Connection, cutoff: int, batch: int, now: int) -> int:
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


def _deleted_list_contacts(conn: Connection, cutoff: int, batch: int, now: int) -> int:
    from appliance.imports.contact_lists import delete_some_contacts

    ids: list[Any] = conn.execute(
        "SELECT id FROM lists WHERE deleted_at IS NOT NULL AND EXISTS"
        " (SELECT 1 FROM contacts c WHERE c.list_id = lists.id) LIMIT 5").fetchall()
    return sum(delete_some_contacts(conn, int(r[0]), batch) for r in ids)


RULES: list[Rule] = [
    Rule("import_payloads", _prune_payloads, lambda s: s.imports.payload_retention_days),
    Rule("import_jobs", _prune_jobs, lambda s: s.imports.job_retention_days),
    Rule("report_inbox", lambda c, cut, b, now: prune_inbox(c, cut, b),
         lambda s: s.reports.inbox_retention_days),
    Rule("raw_reports", lambda c, cut, b, now: prune_raw_reports(c, cut, b),
         lambda s: s.reports.raw_retention_days),
    Rule("deleted_list_contacts", _deleted_list_contacts, lambda s: 0.0),
    Rule("raw_inbound", lambda c, cut, b, now: prune_raw_inbound(c, cut, b),
         lambda s: s.reports.raw_retention_days),
    Rule("webhook_outbox", lambda c, cut, b, now: prune_webhook_events(c, cut, b),
         lambda s: s.webhooks.retention_days),
]


def _prune(rule: Rule, cutoff: int, batch: int, now: int, conn: Connection) -> int:
    return rule.prune(conn, cutoff, batch, now)


class Retention:
    def __init__(self, appliance: Runtime, batch: int = 500) -> None:
        self.appliance = appliance
        self.batch = batch
        self.removed: dict[str, int] = {rule.name: 0 for rule in RULES}

    async def step(self) -> float | None:
        more = False
        for rule in RULES:
            now = self.appliance.now_ms()
            cutoff = now - int(rule.age_days(self.appliance.settings) * DAY_MS)
            n = await self.appliance.store.writer.run(
                partial(_prune, rule, cutoff, self.batch, now))
            self.removed[rule.name] = self.removed.get(rule.name, 0) + n
            more = more or n >= self.batch
        return 0.05 if more else None


def install(appliance: Runtime) -> None:
    retention = Retention(appliance)
    appliance.scheduler.add(LOOP, appliance.singleton(LOOP, retention.step), interval_s=60.0)
