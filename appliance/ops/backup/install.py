"""Registers the backup parts: scheduled backups, and the clean-up of a database kept
aside by ``appliance restore``."""

from __future__ import annotations

from appliance.ops.backup import schedule
from appliance.ops.backup.restore import kept_aside, remove_kept_aside
from appliance.runtime import Runtime

CLEANUP_LOOP = "restore-cleanup"


class KeptAsideCleanup:
    """Once the restored database took a write, the copy kept aside can go."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def step(self) -> float | None:
        now = self.runtime.now_ms()
        await self.runtime.store.writer.run(lambda c: c.execute(
            "INSERT INTO appliance_state (key, value, updated_at) VALUES ('ops.started', '', ?)"
            " ON CONFLICT (key) DO UPDATE SET updated_at = excluded.updated_at", (now,)))
        remove_kept_aside(self.runtime.settings.data_dir)
        return 3600.0


def install(runtime: Runtime) -> None:
    schedule.install(runtime)
    if kept_aside(runtime.settings.data_dir):
        runtime.scheduler.add(CLEANUP_LOOP, KeptAsideCleanup(runtime).step, 3600.0)
