"""What ``appliance migrate --to postgresql://...`` does: the copy, with its progress and
its verification printed."""

from __future__ import annotations

import sys
import time

import click

from appliance.config import Settings, database_url_problem, mask_database_url
from appliance.store.errors import StoreError
from appliance.store.lock import DataDirLock, DataDirLocked
from appliance.store.schema import SchemaTooNew
from appliance.store.transfer import TransferRefused, copy_to_postgresql


class _Progress:
    """One line per table on stderr, redrawn in place on a terminal, every second or so
    elsewhere."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, table: str, copied: int, total: int) -> None:
        now = time.monotonic()
        done = copied >= total
        if not done and now - self.last < (0.2 if self.tty else 5.0):
            return
        self.last = now
        pct = 100.0 * copied / total if total else 100.0
        line = f"  {table}: {copied:,} of {total:,} rows ({pct:.0f}%)"
        if self.tty:
            click.echo(f"\r\033[K{line}", err=True, nl=done)
        else:
            click.echo(line, err=True)


def run_migrate(settings: Settings, to_url: str) -> None:
    problem = database_url_problem(to_url)
    if problem:
        raise click.UsageError(f"--to {mask_database_url(to_url)!r} {problem}")
    shown = mask_database_url(to_url)
    lock = DataDirLock(settings.data_dir)
    if not settings.db_path.is_file():
        raise click.ClickException(f"there is no database at {settings.db_path}")
    try:
        lock.acquire()
    except DataDirLocked as exc:
        raise click.ClickException(
            f"{exc}: stop it first, so that nothing is written after the copy is taken"
        ) from None
    try:
        click.echo(f"copying {settings.db_path} into {shown}", err=True)
        result = copy_to_postgresql(settings.db_path, to_url, progress=_Progress())
    except (TransferRefused, SchemaTooNew) as exc:
        raise click.ClickException(f"migrate refused: {exc}") from None
    except StoreError as exc:
        raise click.ClickException(f"migrate failed, nothing was copied: {exc}") from None
    finally:
        lock.release()
    width = max(len(t.table) for t in result.tables)
    for t in result.tables:
        click.echo(f"{t.table:<{width}}  {t.source_rows:>12,} rows in SQLite"
                   f"  {t.target_rows:>12,} in PostgreSQL")
    click.echo(f"copied {result.rows:,} rows in {len(result.tables)} tables into {shown}"
               f" in {result.seconds:.1f} s; every table's count verified")
