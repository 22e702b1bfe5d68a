"""The writer's engine on PostgreSQL: one connection of the writer's own.

A batch begins with a plain ``BEGIN`` (PostgreSQL locks rows, not the database). Each
caller's future resolves only after ``COMMIT`` returned, with ``synchronous_commit = on``
(``synchronous = "FULL"``), so a resolved future means the commit is durable on the
server (and on its synchronous standbys, when it has some). ``synchronous = "NORMAL"``
sets it ``off``: the server may lose its last commits if it crashes, never its
consistency.

The connection is made again when it is lost: the batch it was in fails with
:class:`~appliance.store.errors.StorageUnavailable` (nothing of it was committed, or the
commit's answer was lost: see ``docs/architecture.md``), and the next batch connects
anew (:meth:`appliance.store.writer.Writer`'s ``reconnects``). A lock held by another
process is waited for at most ``lock_timeout`` (``busy_timeout_ms``), then the unit
fails with ``StoreConflict``.
"""

from __future__ import annotations

import contextlib

from appliance.store.errors import StorageUnavailable, StoreError
from appliance.store.pg import PgConnection
from appliance.store.writer import Writer, WriterStats

# psycopg prepares a statement run five times; PostgreSQL then may keep a generic plan
# made when the tables were small (a new database, before autovacuum's first ANALYZE),
# and a contacts lookup of an import chunk became a scan that grew with the list (a
# 30,000-line import: 11.4 s, 3.8 s with plans made for each execution's values).
CUSTOM_PLANS = "SET plan_cache_mode = force_custom_plan"


def session_settings(conn: PgConnection, synchronous: str, lock_timeout_ms: int) -> None:
    """The writer connection's settings: durability, lock wait, custom plans."""
    conn.execute(f"SET synchronous_commit = {'on' if synchronous == 'FULL' else 'off'}")
    conn.execute(f"SET lock_timeout = {int(lock_timeout_ms)}")
    # A transaction left open by a bug must not hold locks for ever.
    conn.execute("SET idle_in_transaction_session_timeout = 60000")
    conn.execute(CUSTOM_PLANS)


class PgEngine:
    """The PostgreSQL side of :class:`appliance.store.writer.Engine`."""

    errors: tuple[type[BaseException], ...] = (StoreError,)

    def __init__(self, url: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
                 connect_timeout_s: float = 10.0) -> None:
        self.url = url
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self.connect_timeout_s = connect_timeout_s
        self._conn: PgConnection | None = None

    def connect(self) -> PgConnection:
        conn = PgConnection.connect(self.url, application_name="appliance-writer",
                                    connect_timeout_s=self.connect_timeout_s, batched=True)
        try:
            session_settings(conn, self.synchronous, self.busy_timeout_ms)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def begin(self) -> None:
        if self._conn is None:
            raise StorageUnavailable("the writer has no connection to PostgreSQL")
        self._conn.execute("BEGIN")

    def usable(self) -> bool:
        return self._conn is not None and not self._conn.broken

    def lost(self, exc: BaseException) -> BaseException:
        """A batch abandoned with the connection gone is unavailable storage."""
        if not self.usable() and not isinstance(exc, StorageUnavailable):
            return StorageUnavailable(f"the connection to PostgreSQL was lost ({exc})")
        return exc

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def after_commit(self, stats: WriterStats) -> None:
        """Nothing: the server checkpoints its own WAL."""


def pg_writer(url: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
              connect_timeout_s: float = 10.0, max_batch: int = 2000) -> Writer[PgConnection]:
    """A writer (not started) over the PostgreSQL database at ``url``."""
    return Writer(PgEngine(url, synchronous, busy_timeout_ms, connect_timeout_s),
                  max_batch=max_batch)
