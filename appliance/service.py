"""The app object: settings, clock, store and scheduler, and the loops they run.

``Appliance`` is what the CLI builds and what the HTTP layer and the loops share.
``open()`` migrates and starts the writer; ``start()`` (inside the event loop)
registers and starts the scheduler's loops; ``stop()`` lets them finish their
step; ``close()`` flushes the writer and closes every connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from appliance.clock import Clock
from appliance.config import Settings, ensure_data_dir
from appliance.scheduler import Scheduler
from appliance.store import Store

log = logging.getLogger("appliance")

# Each installer adds its loops (and anything else it needs) to the appliance.
Installer = Callable[["Appliance"], None]


class Appliance:
    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or Clock.from_env()
        self.scheduler = Scheduler()
        self._store: Store | None = None
        self.extras: dict[str, Any] = {}
        self._on_stop: list[Callable[[], Awaitable[None]]] = []
        self._on_close: list[Callable[[], None]] = []

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("appliance is not open")
        return self._store

    def now_ms(self) -> int:
        return self.clock.now_ms()

    def open(self) -> Appliance:
        ensure_data_dir(self.settings)
        self._store = Store.open(
            str(self.settings.db_path),
            synchronous=self.settings.synchronous,
            busy_timeout_ms=self.settings.busy_timeout_ms,
            read_connections=self.settings.read_connections,
        )
        return self

    def on_stop(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._on_stop.append(fn)

    def on_close(self, fn: Callable[[], None]) -> None:
        self._on_close.append(fn)

    async def start(self) -> None:
        for install in installers():
            install(self)
        self.scheduler.start()
        log.info("appliance started", extra={"data_dir": str(self.settings.data_dir)})

    async def stop(self) -> None:
        await self.scheduler.stop(timeout=self.settings.shutdown_timeout_s)
        for fn in reversed(self._on_stop):
            await fn()

    def close(self) -> None:
        for fn in reversed(self._on_close):
            fn()
        if self._store is not None:
            self._store.close()
            self._store = None


def installers() -> list[Installer]:
    """The parts that run loops, in start order."""
    from appliance.imports.worker import install as install_imports
    from appliance.ops.install import install as install_ops
    from appliance.reports.loops import install as install_reports
    from appliance.retention import install as install_retention
    from appliance.sending.sender import install as install_sending

    return [install_imports, install_reports, install_retention, install_sending,
            install_ops]
