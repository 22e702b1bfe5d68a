"""Scheduled backups: every ``[backup] interval_hours``, keeping the newest ``keep``.

The ``backups`` loop takes a backup when the last good one (by anyone, see
:mod:`appliance.ops.backup.status`) is older than the interval, into
``[backup] dir`` (default ``<data_dir>/backups``) as ``appliance-<UTC time>.db`` with
its manifest, then deletes the oldest beyond ``keep`` (each backup first removes
any temporary copy a killed backup process left in its directory). A failure is
logged, recorded (so ``/readyz``, ``/metrics`` and the ``backup_stale`` alert show it) and
retried after a few minutes.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import anyio.to_thread

from appliance.ops.backup.snapshot import BackupFailed, manifest_path_for, take_backup
from appliance.ops.backup.status import read_status, record_failure, record_success
from appliance.runtime import Runtime

log = logging.getLogger("appliance.backup")
LOOP = "backups"
RETRY_S = 300.0
MAX_SLEEP_S = 60.0
PREFIX = "appliance-"


def backup_dir(appliance: Runtime) -> Path:
    configured = appliance.settings.backup.dir
    return Path(configured) if configured else appliance.settings.data_dir / "backups"


def backup_name(now_ms: int) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime(now_ms / 1000))
    return f"{PREFIX}{stamp}{now_ms % 1000:03d}Z.db"


def prune_backups(directory: Path, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` scheduled backups; return what went."""
    backups = sorted(p for p in directory.glob(f"{PREFIX}*.db") if p.is_file())
    doomed = backups[:-keep] if keep > 0 else []
    for path in doomed:
        path.unlink(missing_ok=True)
        manifest_path_for(path).unlink(missing_ok=True)
    return doomed


class ScheduledBackups:
    def __init__(self, appliance: Runtime) -> None:
        self.appliance = appliance
        self.taken = 0

    def due_in_s(self, now_ms: int) -> float:
        settings = self.appliance.settings
        interval_ms = settings.backup.interval_hours * 3_600_000
        status = read_status(settings.data_dir)
        due_at = (status.last_ok_at or 0) + interval_ms
        if status.last_error_at is not None and status.last_error_at > (status.last_ok_at or 0):
            due_at = max(due_at, status.last_error_at + min(interval_ms, RETRY_S * 1000))
        return max(0.0, (due_at - now_ms) / 1000)

    async def step(self) -> float | None:
        settings = self.appliance.settings
        now = self.appliance.now_ms()
        wait = self.due_in_s(now)
        if wait > 0:
            return min(wait, MAX_SLEEP_S)
        directory = backup_dir(self.appliance)
        dest = directory / backup_name(now)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            result = await anyio.to_thread.run_sync(
                lambda: take_backup(settings.db_path, dest, now))
        except (BackupFailed, OSError) as exc:
            log.error("scheduled backup failed: %s", exc, extra={"path": str(dest)})
            record_failure(settings.data_dir, now, str(exc))
            return self._next_wait()
        self.taken += 1
        record_success(settings.data_dir, now, dest, int(result.manifest["bytes"]),
                       result.seconds)
        for gone in prune_backups(directory, settings.backup.keep):
            log.info("old backup removed", extra={"path": str(gone)})
        return self._next_wait()

    def _next_wait(self) -> float:
        return min(max(self.due_in_s(self.appliance.now_ms()), 0.05), MAX_SLEEP_S)


def install(appliance: Runtime) -> None:
    if appliance.settings.backup.interval_hours <= 0:
        return
    if appliance.on_postgresql:  # PostgreSQL's backups are its own (docs/operations.md)
        log.info("scheduled backups are off: the data is in PostgreSQL, whose backups are"
                 " its own (pg_dump, base backups with WAL archiving)")
        return
    scheduled = ScheduledBackups(appliance)
    appliance.scheduler.add(LOOP, scheduled.step, interval_s=MAX_SLEEP_S)
