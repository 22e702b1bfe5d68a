"""The last backup's outcome, kept in ``<data_dir>/backup-status.json``.

Both ``appliance backup`` (from cron, a separate process) and the scheduled backups
record here, so health, metrics and alerts see every backup without a second
process ever writing to the database.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from appliance.ops.backup.fsync import write_json_durably

log = logging.getLogger("appliance.backup")
STATUS_FILE = "backup-status.json"


@dataclass(frozen=True)
class BackupStatus:
    last_ok_at: int | None = None  # epoch ms of the last verified backup
    last_ok_path: str = ""
    last_ok_bytes: int = 0
    last_ok_seconds: float = 0.0
    last_error: str = ""  # the last failure since the last success ("" = none)
    last_error_at: int | None = None
    failures: int = 0  # failures since the status file was created

    def age_s(self, now_ms: int) -> float | None:
        return None if self.last_ok_at is None else max(0.0, (now_ms - self.last_ok_at) / 1000)


def status_path(data_dir: Path) -> Path:
    return data_dir / STATUS_FILE


def read_status(data_dir: Path) -> BackupStatus:
    try:
        raw = json.loads(status_path(data_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return BackupStatus()
    if not isinstance(raw, dict):
        return BackupStatus()
    known = set(BackupStatus.__dataclass_fields__)
    try:
        return BackupStatus(**{k: v for k, v in raw.items() if k in known})
    except TypeError:
        return BackupStatus()


def _write(data_dir: Path, status: BackupStatus) -> None:
    try:
        write_json_durably(status_path(data_dir), asdict(status))
    except OSError as exc:  # the backup itself is fine; say so and carry on
        log.warning("cannot record the backup status in %s: %s", data_dir, exc)


def record_success(data_dir: Path, at_ms: int, path: Path, size: int, seconds: float) -> None:
    old = read_status(data_dir)
    _write(data_dir, replace(old, last_ok_at=at_ms, last_ok_path=str(path), last_ok_bytes=size,
                             last_ok_seconds=round(seconds, 3), last_error="",
                             last_error_at=None))


def record_failure(data_dir: Path, at_ms: int, error: str) -> None:
    old = read_status(data_dir)
    _write(data_dir, replace(old, last_error=error, last_error_at=at_ms,
                             failures=old.failures + 1))
