"""An opened appliance for a command-line command, beside a running server or not.

When no server holds the data dir, the command takes the lock for its duration, so a
server cannot start halfway through; when one does, the command works through the
same database (the server's writer and the command's are serialised by SQLite, or
by PostgreSQL's row locks when ``database_url`` names one).
"""

from __future__ import annotations

import click

from appliance.config import ConfigError, Settings, ensure_data_dir
from appliance.runtime import Runtime
from appliance.store.errors import STORE_ERRORS, NotAnApplianceDatabase
from appliance.store.lock import DataDirLock, DataDirLocked
from appliance.store.schema import SchemaTooNew


def fail(message: str) -> None:
    raise click.ClickException(message)


class OfflineAppliance:
    """``with OfflineAppliance(settings) as appliance:`` for one CLI command."""

    def __init__(self, settings: Settings) -> None:
        try:
            ensure_data_dir(settings)
        except ConfigError as exc:
            fail(str(exc))
        self.lock = DataDirLock(settings.data_dir)
        self.server_running = self.lock.held_by_other()
        if not self.server_running:
            try:
                self.lock.acquire()
            except DataDirLocked:
                self.server_running = True
        try:
            self.appliance = Runtime(settings).open(serving=False)
        except (SchemaTooNew, NotAnApplianceDatabase) as exc:
            self.lock.release()
            fail(str(exc))
        except STORE_ERRORS as exc:  # PostgreSQL cannot be reached, or refused the schema
            self.lock.release()
            fail(f"the database: {exc}")

    def __enter__(self) -> Runtime:
        return self.appliance

    def __exit__(self, *exc: object) -> None:
        self.appliance.close()
        self.lock.release()

