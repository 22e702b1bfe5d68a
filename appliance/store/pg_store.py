"""The store on PostgreSQL: the same writer and readers, over a database server.

* **The writer** is a thread with one connection, as on SQLite. It takes every unit
  queued at that moment and runs them in one transaction with a savepoint per unit
  (group commit): a unit that raises is rolled back alone, its caller gets the
  exception, its neighbours commit; each caller's future resolves only after
  ``COMMIT`` returned, with ``synchronous_commit = on`` (``synchronous = "FULL"``), so
  a resolved future means the commit is durable on the server (and on its synchronous
  standbys, when it has some). ``synchronous = "NORMAL"`` sets it ``off``: the server
  may lose its last commits if it crashes, never its consistency.

  The connection is the writer's alone and is made again when it is lost: the batch it
  was in fails with :class:`~appliance.store.errors.StorageUnavailable` (nothing of it
  was committed, or the commit's answer was lost: see ``docs/architecture.md``), and
  the next batch connects anew. A lock held by another process is waited for at most
  ``lock_timeout`` (``busy_timeout_ms``), then the unit fails with ``StoreConflict``.

* **The readers** are a pool (psycopg-pool) of at most ``read_connections``
  connections; each read unit runs in one ``REPEATABLE READ READ ONLY`` transaction:
  every query of the unit sees one snapshot, as on SQLite.

Units are the same functions: each gets a :class:`~appliance.store.pg.PgConnection`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio.to_thread
import psycopg
import psycopg_pool

from appliance.store.errors import StorageUnavailable, StoreError
from appliance.store.pg import PgConnection, configure_types, store_error
from appliance.store.pg_schema import migrate
from appliance.store.writer import WriterClosed, WriterStats

T = TypeVar("T")
log = logging.getLogger("appliance.writer")


@dataclass
class _Item:
    unit: Callable[[PgConnection], Any]
    future: Future[Any]


def _session_settings(conn: PgConnection, synchronous: str, lock_timeout_ms: int) -> None:
    conn.execute(f"SET synchronous_commit = {'on' if synchronous == 'FULL' else 'off'}")
    conn.execute(f"SET lock_timeout = {int(lock_timeout_ms)}")
    # A transaction left open by a bug must not hold locks for ever.
    conn.execute("SET idle_in_transaction_session_timeout = 60000")
    conn.execute(CUSTOM_PLANS)


# psycopg prepares a statement run five times; PostgreSQL then may keep a generic plan
# made when the tables were small (a new database, before autovacuum's first ANALYZE),
# and a contacts lookup of an import chunk became a scan that grew with the list (a
# 30,000-line import: 11.4 s, 3.8 s with plans made for each execution's values).
CUSTOM_PLANS = "SET plan_cache_mode = force_custom_plan"


def _configure_reader(conn: psycopg.Connection[Any]) -> None:
    configure_types(conn)
    conn.execute(CUSTOM_PLANS)


class PgWriter:
    """Serialises this process's writes through one thread and one connection."""

    def __init__(self, url: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
                 max_batch: int = 2000, connect_timeout_s: float = 10.0) -> None:
        self.url = url
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self.max_batch = max_batch
        self.connect_timeout_s = connect_timeout_s
        self.stats = WriterStats()
        self.reconnects = 0
        self.commit_listeners: list[Callable[[float, int], None]] = []
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._conn: PgConnection | None = None
        self._accepting = False
        self._pending = 0
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> None:
        self._conn = self._connect()  # a server that cannot be reached is said at start
        self._thread = threading.Thread(target=self._run, name="appliance-writer",
                                        daemon=True)
        self._thread.start()
        self._accepting = True

    def stop(self, timeout: float = 30.0) -> None:
        self._accepting = False
        if self._thread is None:
            return
        self._queue.put(None)
        self._thread.join(timeout)
        self._thread = None

    @property
    def queue_depth(self) -> int:
        return self._pending

    # -- submitting ----------------------------------------------------------
    def submit(self, unit: Callable[[PgConnection], T], bulk: bool = False) -> Future[T]:
        """Queue ``unit``. ``bulk`` is accepted so that callers need not know the
        backend; on PostgreSQL every unit takes the one lane."""
        if not self._accepting:
            raise WriterClosed("the writer is stopped")
        fut: Future[T] = Future()
        with self._lock:
            self._pending += 1
        self._queue.put(_Item(unit, fut))
        return fut

    def call(self, unit: Callable[[PgConnection], T], timeout: float | None = None) -> T:
        return self.submit(unit).result(timeout)

    async def run(self, unit: Callable[[PgConnection], T]) -> T:
        return await asyncio.wrap_future(self.submit(unit))

    # -- the thread ----------------------------------------------------------
    def _connect(self) -> PgConnection:
        conn = PgConnection.connect(self.url, application_name="appliance-writer",
                                    connect_timeout_s=self.connect_timeout_s)
        try:
            _session_settings(conn, self.synchronous, self.busy_timeout_ms)
        except BaseException:
            conn.close()
            raise
        return conn

    def _run(self) -> None:
        stopping = False
        try:
            while not stopping:
                first = self._queue.get()
                batch: list[_Item] = []
                if first is None:
                    stopping = True
                else:
                    batch.append(first)
                while len(batch) < self.max_batch:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stopping = True
                        continue
                    batch.append(nxt)
                if batch:
                    self._commit_batch(batch)
        finally:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
                self._conn = None

    def _connection(self) -> PgConnection:
        if self._conn is not None and not self._conn.broken:
            return self._conn
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None
        self.reconnects += 1
        self._conn = self._connect()
        log.info("writer connected to PostgreSQL again")
        return self._conn

    def _commit_batch(self, batch: list[_Item]) -> None:
        started = time.perf_counter()
        results: list[tuple[_Item, bool, Any]] = []
        try:
            conn = self._connection()
            conn.execute("BEGIN")
        except StoreError as exc:
            self._fail_all(batch, exc)
            return
        for item in batch:
            if not item.future.set_running_or_notify_cancel():
                results.append((item, False, None))
                continue
            try:
                conn.execute("SAVEPOINT unit")
                value = item.unit(conn)
            except BaseException as exc:
                self.stats.failed_units += 1
                if not self._rolled_back_alone(conn):
                    self._abandon(conn, batch, exc)
                    return
                results.append((item, False, exc))
            else:
                try:
                    conn.execute("RELEASE unit")
                except StoreError as exc:
                    self._abandon(conn, batch, exc)
                    return
                results.append((item, True, value))
        try:
            conn.execute("COMMIT")
        except StoreError as exc:
            # Lost with the connection, the commit may or may not have happened: the
            # units are guarded (unique keys, positions), so sending one again is safe.
            log.error("commit failed: %s", exc)
            self.stats.failed_commits += 1
            if conn.in_transaction and not conn.broken:
                with contextlib.suppress(StoreError):
                    conn.execute("ROLLBACK")
            self._fail_all(batch, exc)
            return
        elapsed = time.perf_counter() - started
        self.stats.record(elapsed, len(batch))
        for listener in self.commit_listeners:
            listener(elapsed, len(batch))
        with self._lock:
            self._pending -= len(batch)
        for item, ok, value in results:
            if ok:
                item.future.set_result(value)
            elif value is not None:
                item.future.set_exception(value)

    @staticmethod
    def _rolled_back_alone(conn: PgConnection) -> bool:
        if conn.broken or not conn.in_transaction:
            return False
        try:
            conn.execute("ROLLBACK TO unit")
            conn.execute("RELEASE unit")
        except StoreError:
            return False
        return True

    def _abandon(self, conn: PgConnection, batch: list[_Item], exc: BaseException) -> None:
        log.error("transaction abandoned: %s", exc)
        self.stats.failed_commits += 1
        if conn.in_transaction and not conn.broken:
            with contextlib.suppress(StoreError):
                conn.execute("ROLLBACK")
        if conn.broken and not isinstance(exc, StorageUnavailable):
            exc = StorageUnavailable(f"the connection to PostgreSQL was lost ({exc})")
        self._fail_all(batch, exc)

    def _fail_all(self, batch: list[_Item], exc: BaseException) -> None:
        with self._lock:
            self._pending -= len(batch)
        for item in batch:
            if not item.future.done() and (
                item.future.running() or item.future.set_running_or_notify_cancel()
            ):
                item.future.set_exception(exc)


def in_snapshot(conn: PgConnection, unit: Callable[[PgConnection], T]) -> T:
    """Run ``unit`` on ``conn`` in one read-only snapshot (``REPEATABLE READ``)."""
    if conn.in_transaction:
        return unit(conn)
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    try:
        return unit(conn)
    finally:
        if conn.in_transaction and not conn.broken:
            conn.execute("COMMIT")


class PgReaders:
    """A pool of read connections; each read unit in one snapshot."""

    def __init__(self, url: str, size: int = 4, connect_timeout_s: float = 10.0) -> None:
        self.url = url
        self.pool = psycopg_pool.ConnectionPool(
            url, min_size=1, max_size=size, open=False, timeout=connect_timeout_s,
            name="appliance-readers", check=psycopg_pool.ConnectionPool.check_connection,
            kwargs={"autocommit": True, "application_name": "appliance-reader",
                    "connect_timeout": max(1, int(connect_timeout_s))},
            configure=_configure_reader)
        try:
            self.pool.open(wait=True, timeout=connect_timeout_s)
        except psycopg_pool.PoolTimeout as exc:
            self.pool.close()
            raise StorageUnavailable(f"cannot connect to PostgreSQL for reading ({exc})") from exc

    def call(self, unit: Callable[[PgConnection], T]) -> T:
        try:
            with self.pool.connection() as raw:
                return in_snapshot(PgConnection(raw, configured=True), unit)
        except psycopg_pool.PoolTimeout as exc:
            raise StorageUnavailable(f"no PostgreSQL connection to read with ({exc})") from exc
        except psycopg.Error as exc:  # from the pool's own statements
            raise store_error(exc) from exc

    async def run(self, unit: Callable[[PgConnection], T]) -> T:
        return await anyio.to_thread.run_sync(self.call, unit)

    def close(self) -> None:
        self.pool.close()


@dataclass
class PgStore:
    """The store over PostgreSQL: what :class:`appliance.store.Store` is over SQLite."""

    url: str
    writer: PgWriter
    readers: PgReaders

    @classmethod
    def open(cls, url: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
             read_connections: int = 4, connect_timeout_s: float = 10.0) -> PgStore:
        conn = PgConnection.connect(url, application_name="appliance-migrate",
                                    connect_timeout_s=connect_timeout_s)
        try:
            migrate(conn, where=redacted(url))
        finally:
            conn.close()
        writer = PgWriter(url, synchronous=synchronous, busy_timeout_ms=busy_timeout_ms,
                          connect_timeout_s=connect_timeout_s)
        writer.start()
        try:
            readers = PgReaders(url, size=read_connections, connect_timeout_s=connect_timeout_s)
        except BaseException:
            writer.stop()
            raise
        return cls(url, writer, readers)

    def close(self) -> None:
        self.writer.stop()
        self.readers.close()


def redacted(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs)."""
    from appliance.config import mask_database_url

    return mask_database_url(url)
