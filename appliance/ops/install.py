"""Registers the operations parts: metrics, scheduled backups, the ops alerts loop,
and the clean-up of a database kept aside by ``appliance restore``."""

from __future__ import annotations

import logging

from appliance.ops import backup_schedule
from appliance.ops.alerts import ops_alerts
from appliance.ops.metrics import metrics_for
from appliance.ops.restore import kept_aside, remove_kept_aside
from appliance.reports.alerts import AlertWatch
from appliance.service import Appliance

log = logging.getLogger("appliance.ops")
ALERTS_LOOP = "ops-alerts"


class KeptAsideCleanup:
    """Once the restored database took a write, the copy kept aside can go."""

    def __init__(self, appliance: Appliance) -> None:
        self.appliance = appliance

    async def step(self) -> float | None:
        now = self.appliance.now_ms()
        await self.appliance.store.writer.run(lambda c: c.execute(
            "INSERT INTO appliance_state (key, value, updated_at) VALUES ('ops.started', '', ?)"
            " ON CONFLICT (key) DO UPDATE SET updated_at = excluded.updated_at", (now,)))
        remove_kept_aside(self.appliance.settings.data_dir)
        return 3600.0


def install(appliance: Appliance) -> None:
    metrics_for(appliance).observe_writer(appliance)
    backup_schedule.install(appliance)
    # The report alerts' watcher, over the backup and stuck-import alerts: same state
    # keys, same log lines, same webhook payload.
    watch = AlertWatch(appliance, source=ops_alerts)
    appliance.scheduler.add(ALERTS_LOOP, appliance.singleton(ALERTS_LOOP, watch.step),
                            interval_s=appliance.settings.alerts.check_interval_s)
    if kept_aside(appliance.settings.data_dir):
        appliance.scheduler.add("restore-cleanup", KeptAsideCleanup(appliance).step, 3600.0)
