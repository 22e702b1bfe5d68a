"""What ``appliance backup`` and ``appliance restore`` do."""

from __future__ import annotations

from pathlib import Path

import click

from appliance.clock import Clock
from appliance.config import Settings
from appliance.ops.backup.restore import RestoreRefused, restore
from appliance.ops.backup.snapshot import BackupFailed, BackupRefused, take_backup
from appliance.ops.backup.status import record_failure, record_success

POSTGRESQL_BACKUPS = (
    "the data is in PostgreSQL (database_url), whose backups are its own: pg_dump for a"
    " copy, base backups with WAL archiving for a point in time; see docs/operations.md,"
    " \"Backups on PostgreSQL\"")


def run_backup(settings: Settings, dest: Path, force: bool = False) -> None:
    if settings.database_url:
        raise click.ClickException(f"backup: {POSTGRESQL_BACKUPS}")
    now = Clock.from_env().now_ms()
    try:
        result = take_backup(settings.db_path, dest, now, force=force)
    except BackupFailed as exc:
        if settings.db_path.is_file() and not isinstance(exc, BackupRefused):
            record_failure(settings.data_dir, now, str(exc))
        raise click.ClickException(f"backup failed: {exc}") from None
    record_success(settings.data_dir, now, result.path, int(result.manifest["bytes"]),
                   result.seconds)
    rows = sum(int(v) for v in result.manifest["row_counts"].values())
    click.echo(f"backup of {settings.db_path} verified: {result.manifest['bytes']} bytes,"
               f" {rows} rows, sha256 {result.manifest['sha256'][:16]}…,"
               f" {result.seconds:.2f} s; manifest {result.manifest_path}", err=True)
    click.echo(str(result.path))


def run_restore(settings: Settings, src: Path) -> None:
    if settings.database_url:
        raise click.ClickException(f"restore: {POSTGRESQL_BACKUPS}")
    try:
        result = restore(src, settings.data_dir)
    except RestoreRefused as exc:
        raise click.ClickException(f"restore refused: {exc}") from None
    rows = sum(result.row_counts.values())
    aside = (f"; the previous database is kept as {result.kept_aside} until the next good"
             " start" if result.kept_aside else "")
    click.echo(f"restored {src} into {result.db_path} ({rows} rows, schema version"
               f" {result.schema_version}){aside}")

