"""The runtime: settings, clock, store, scheduler and the singleton helper.

A :class:`Runtime` is what every part is built over and what a command-line command
opens. It knows nothing of the domain (imports, sending, reports, providers...): each
part's ``install(runtime, ...)`` builds the part over it and returns it, and the
composition root (:func:`appliance.server.assemble`) holds the parts. ``open()``
migrates and starts the writer; ``start()`` (inside the event loop) starts the
scheduler; ``stop()`` lets the loops finish their step and runs the parts' stops;
``close()`` runs the parts' closes, flushes the writer and closes every connection.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio.to_thread

from appliance.clock import Clock
from appliance.config import Settings, ensure_data_dir
from appliance.scheduler import Scheduler, Step
from appliance.store import Store
from appliance.store.connection import Connection
from appliance.store.errors import StorageUnavailable
from appliance.store.owner import Liveness
from appliance.store.singleton import Singleton, one_at_a_time

log = logging.getLogger("appliance")

class Runtime:
    """What every part shares, and nothing of any part."""

    def __init__(self, settings: Settings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or Clock.from_env()
        self.scheduler = Scheduler()
        self._store: Store[Connection] | None = None
        self._on_stop: list[Callable[[], Awaitable[None]]] = []
        self._on_close: list[Callable[[], None]] = []
        self.liveness: Liveness | None = None  # PostgreSQL: this process's lock (store.owner)

    @property
    def store(self) -> Store[Connection]:
        if self._store is None:
            raise RuntimeError("the runtime is not open")
        return self._store

    def now_ms(self) -> int:
        return self.clock.now_ms()

    @property
    def on_postgresql(self) -> bool:
        """Whether the data is in PostgreSQL (``database_url``), not the data dir's file."""
        return bool(self.settings.database_url)

    def singleton(self, name: str, step: Step) -> Step:
        """``step`` as a loop that runs in one process at a time: on PostgreSQL, only in
        the process that holds the advisory lock ``name`` (another takes over when it
        dies); on SQLite, as it is (one server per data dir)."""
        if not self.on_postgresql:
            return step
        lead = Singleton(name, self.settings.database_url)
        self._on_close.append(lead.release)

        async def leading() -> float | None:
            if not await anyio.to_thread.run_sync(lead.try_lead):
                return None  # another process leads: ask again after the interval
            return await step()

        return leading

    def open(self, *, serving: bool = True) -> Runtime:
        """Open the store. ``serving`` is false for a command-line command: on
        PostgreSQL it then leaves the status webhooks' triggers as the servers made them
        (a command's settings need not name ``[webhooks]``; its ``false`` must not turn
        the running servers' events off). The count triggers come with the schema."""
        ensure_data_dir(self.settings)
        self._store = Store.open(self.settings)
        if self.on_postgresql:
            try:
                if serving:
                    install_postgresql_triggers(self._store,
                                                webhooks=self.settings.webhooks.configured)
                self.liveness = Liveness(self.settings.database_url)
                if not self.liveness.try_lead():
                    raise StorageUnavailable("cannot take this process's lock on PostgreSQL")
            except BaseException:
                self.close()
                raise
        return self

    def on_stop(self, fn: Callable[[], Awaitable[None]]) -> None:
        self._on_stop.append(fn)

    def on_close(self, fn: Callable[[], None]) -> None:
        self._on_close.append(fn)

    async def start(self) -> None:
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
        if self.liveness is not None:
            self.liveness.release()
            self.liveness = None


def install_postgresql_triggers(store: Store[Connection], *, webhooks: bool) -> None:
    """On PostgreSQL, what SQLite's triggers do (the kept counts of
    :mod:`appliance.store.rollups`, the status webhooks' events), made at each start:
    the outbox's while ``[webhooks]`` is configured or an account has a receiver."""
    from appliance.store import pg_triggers, webhook_triggers

    def unit(conn: Connection) -> None:
        one_at_a_time(conn, "pg_triggers")  # processes starting together: one at a time
        pg_triggers.install(conn, webhooks=webhook_triggers.wanted(conn, webhooks))

    store.writer.call(unit)
