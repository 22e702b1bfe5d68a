"""The one writer: a thread that owns the only write connection, on either engine.

Callers hand it *write units* (functions of the connection). The thread takes every
unit queued at that moment, runs them in one transaction with a savepoint each (a
failing unit is rolled back alone and its caller gets the exception), commits once, and
only then resolves the callers' futures. So a resolved future means the unit's effects
are durable (SQLite's ``synchronous=FULL``, PostgreSQL's ``synchronous_commit = on``),
and one flush is shared by everything that arrived together: group commit.

*Bulk* units (``submit(unit, bulk=True)``: the parts of an import, thousands of rows
each) wait in a lane of their own. A batch is either the units of the ordinary lane or
those of the bulk lane, never both, so an accept or a callback that arrives during an
import is committed without the import's rows ahead of it in its batch. The lanes take
turns whenever both wait: neither can hold the other back for more than one batch.

Coroutines (``run``) are handed their outcomes once per commit: one call into each
waiting event loop resolves every coroutine of that loop the commit served, however
many there were, so a batch of a thousand callbacks wakes the loop once.

What differs between SQLite and PostgreSQL is behind :class:`Engine`: how the
connection is opened (and opened again after it was lost), how a transaction begins,
whether the connection is still usable, what runs after a commit (SQLite bounds its
WAL), and the engine's own errors. :class:`appliance.store.sqlite_engine.SqliteEngine`
and :class:`appliance.store.pg_engine.PgEngine` are the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar

import apsw
from typing_extensions import TypeVar as DefaultTypeVar

from appliance.logs import sampled_line
from appliance.store.connection import Connection

T = TypeVar("T")
# The connection the units get: apsw's on SQLite (the default engine), PostgreSQL's
# PgConnection, or the Connection both speak where the engine is the settings' choice.
C = DefaultTypeVar("C", bound=Connection, covariant=True, default=apsw.Connection)
log = logging.getLogger("appliance.writer")


class WriterClosed(RuntimeError):
    """The writer is stopped; nothing was written."""


@dataclass
class WriterStats:
    commits: int = 0
    units: int = 0
    failed_units: int = 0
    failed_commits: int = 0
    wal_checkpoints: int = 0  # SQLite: the writer's own, past the WAL's hard limit
    last_commit_s: float = 0.0
    commit_seconds: list[float] = field(default_factory=list)

    def record(self, seconds: float, units: int) -> None:
        self.commits += 1
        self.units += units
        self.last_commit_s = seconds
        self.commit_seconds.append(seconds)
        if len(self.commit_seconds) > 4096:
            del self.commit_seconds[:2048]


class Engine(Protocol[C]):
    """What the writer needs of a database engine; one instance per writer, used only
    from the writer's thread.

    * ``connect()``: open the write connection (at start, and again after ``usable()``
      said it was lost) and return it; raises one of ``errors`` when it cannot;
    * ``begin()``: open the batch's transaction on it;
    * ``usable()``: False once the connection is gone (a server that went away);
    * ``after_commit(stats)``: run between two batches (SQLite bounds its WAL here);
    * ``lost(exc)``: what a batch's callers are told when its transaction is abandoned;
    * ``close()``: close the connection (the writer stops, or reconnects);
    * ``errors``: the exceptions the engine's statements raise.
    """

    errors: tuple[type[BaseException], ...]

    def connect(self) -> C: ...

    def begin(self) -> None: ...

    def usable(self) -> bool: ...

    def after_commit(self, stats: WriterStats) -> None: ...

    def lost(self, exc: BaseException) -> BaseException: ...

    def close(self) -> None: ...


@dataclass
class _Item:
    unit: Callable[[Any], Any]
    future: Future[Any] | None  # for threads (``call``/``submit``)
    # For coroutines (``run``): resolved in their event loop, one call per commit.
    loop: asyncio.AbstractEventLoop | None = None
    waiter: asyncio.Future[Any] | None = None

    def start(self) -> bool:
        """False when the caller gave up before the unit ran: it is skipped."""
        if self.future is not None:
            return self.future.set_running_or_notify_cancel()
        return self.waiter is not None and not self.waiter.cancelled()


# On the queue in place of a bulk unit: there is work in the bulk lane.
_BULK: Final = _Item(lambda conn: None, None)
Outcome = tuple[_Item, bool, Any]  # the unit, whether it succeeded, its value or exception


def _resolve(outcomes: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    """In the event loop: every coroutine's outcome of one commit, at once."""
    for waiter, ok, value in outcomes:
        if waiter.done():  # cancelled meanwhile
            continue
        if ok:
            waiter.set_result(value)
        else:
            waiter.set_exception(value)


def hand_back(outcomes: list[Outcome]) -> None:
    """Resolve each caller: threads' futures here, coroutines' in their loop (one call
    into each loop for the whole list)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
    for item, ok, value in outcomes:
        if item.future is not None:
            if ok:
                item.future.set_result(value)
            else:
                item.future.set_exception(value)
        elif item.loop is not None and item.waiter is not None:
            by_loop.setdefault(item.loop, []).append((item.waiter, ok, value))
    for loop, batch in by_loop.items():
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(_resolve, batch)


class Writer(Generic[C]):
    """Serialises this process's writes through one thread and one connection."""

    def __init__(self, engine: Engine[C], max_batch: int = 2000,
                 on_commit: Callable[[float, int], None] | None = None) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.stats = WriterStats()
        self.reconnects = 0  # connections lost and opened again
        # Called after every commit with (seconds, units), e.g. by the metrics.
        self.commit_listeners: list[Callable[[float, int], None]] = []
        if on_commit is not None:
            self.commit_listeners.append(on_commit)
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        # The bulk lane; each unit put here also puts _BULK on the queue, to wake the thread.
        self._bulk: deque[_Item] = deque()
        self._thread: threading.Thread | None = None
        self._accepting = False
        self._pending = 0
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> None:
        """Open the connection and start the thread; a database that cannot be opened or
        reached is said here, to the caller."""
        ready: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="appliance-writer", daemon=True
        )
        self._thread.start()
        try:
            ready.result()
        except BaseException:
            self._thread.join()
            self._thread = None
            raise
        self._accepting = True

    def stop(self, timeout: float = 30.0) -> None:
        """Stop taking units, finish the queued ones, close the connection."""
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
    def submit(self, unit: Callable[[C], T], bulk: bool = False) -> Future[T]:
        """Queue ``unit``; its future resolves after its commit. ``bulk``: a large unit
        that may wait one batch for the ordinary lane (see the module's docstring)."""
        if not self._accepting:
            raise WriterClosed("the writer is stopped")
        fut: Future[T] = Future()
        with self._lock:
            self._pending += 1
        if bulk:
            self._bulk.append(_Item(unit, fut))
            self._queue.put(_BULK)
        else:
            self._queue.put(_Item(unit, fut))
        return fut

    def call(self, unit: Callable[[C], T], timeout: float | None = None) -> T:
        """Run ``unit`` and wait for its commit (for threads, not the event loop)."""
        return self.submit(unit).result(timeout)

    async def run(self, unit: Callable[[C], T]) -> T:
        """Run ``unit`` and await its commit."""
        if not self._accepting:
            raise WriterClosed("the writer is stopped")
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[T] = loop.create_future()
        with self._lock:
            self._pending += 1
        self._queue.put(_Item(unit, None, loop, waiter))
        return await waiter

    # -- the thread ----------------------------------------------------------
    def _run(self, ready: Future[None]) -> None:
        try:
            conn: Connection = self.engine.connect()
        except BaseException as exc:
            ready.set_exception(exc)
            return
        ready.set_result(None)
        stopping = False
        ordinary: deque[_Item] = deque()  # taken off the queue, not yet run
        bulk_turn = False
        try:
            while True:
                if not ordinary and not self._bulk:
                    if stopping:
                        break
                    got = self._queue.get()
                    if got is None:
                        stopping = True
                    elif got is not _BULK:
                        ordinary.append(got)
                while len(ordinary) < self.max_batch:
                    try:
                        nxt = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if nxt is None:
                        stopping = True
                    elif nxt is not _BULK:
                        ordinary.append(nxt)
                lane = self._bulk if not ordinary or (bulk_turn and self._bulk) else ordinary
                bulk_turn = lane is ordinary and bool(self._bulk)
                batch = [lane.popleft() for _ in range(min(len(lane), self.max_batch))]
                if batch:
                    conn = self._commit_batch(conn, batch)
                    self.engine.after_commit(self.stats)
        finally:
            with contextlib.suppress(Exception):
                self.engine.close()

    def _usable(self, conn: Connection) -> Connection:
        """The connection, opened again when the engine lost it."""
        if self.engine.usable():
            return conn
        with contextlib.suppress(Exception):
            self.engine.close()
        self.reconnects += 1
        conn = self.engine.connect()
        log.info("the writer connected to the database again")
        return conn

    def _commit_batch(self, conn: Connection, batch: list[_Item]) -> Connection:
        """Run ``batch`` in one transaction; return the connection for the next one."""
        started = time.perf_counter()
        results: list[Outcome] = []
        try:
            conn = self._usable(conn)
            self.engine.begin()
        except self.engine.errors as exc:
            self._fail_all(batch, exc)
            return conn
        for item in batch:
            if not item.start():
                results.append((item, False, None))
                continue
            try:
                conn.execute("SAVEPOINT unit")
                value = item.unit(conn)
            except BaseException as exc:
                self.stats.failed_units += 1
                if not self._rolled_back_alone(conn):
                    # The engine gave up the whole transaction (a full disk, an I/O error,
                    # a lost server): every unit of the batch is undone, each caller told.
                    self._abandon(conn, batch, exc)
                    return conn
                results.append((item, False, exc))
            else:
                try:
                    conn.execute("RELEASE unit")
                except self.engine.errors as exc:
                    self._abandon(conn, batch, exc)
                    return conn
                results.append((item, True, value))
        try:
            conn.execute("COMMIT")
        except self.engine.errors as exc:
            # Lost with a server's connection, the commit may or may not have happened:
            # the units are guarded (unique keys, positions), so sending one again is safe.
            # Summed up every 10 s: a full disk fails every commit.
            sampled_line(log, "commit failed", level=logging.ERROR).note("commit", str(exc))
            self.stats.failed_commits += 1
            self._roll_back(conn)
            self._fail_all(batch, exc)
            return conn
        elapsed = time.perf_counter() - started
        self.stats.record(elapsed, len(batch))
        for listener in self.commit_listeners:
            listener(elapsed, len(batch))
        with self._lock:
            self._pending -= len(batch)
        hand_back([(item, ok, value) for item, ok, value in results if ok or value is not None])
        return conn

    def _rolled_back_alone(self, conn: Connection) -> bool:
        """Undo the failed unit's savepoint; False when the transaction itself is gone."""
        if not self.engine.usable() or not conn.in_transaction:
            return False
        try:
            conn.execute("ROLLBACK TO unit")
            conn.execute("RELEASE unit")
        except self.engine.errors:
            return False
        return True

    def _roll_back(self, conn: Connection) -> None:
        if self.engine.usable() and conn.in_transaction:
            with contextlib.suppress(*self.engine.errors):
                conn.execute("ROLLBACK")

    def _abandon(self, conn: Connection, batch: list[_Item], exc: BaseException) -> None:
        log.error("transaction abandoned: %s", exc)
        self.stats.failed_commits += 1
        self._roll_back(conn)
        self._fail_all(batch, self.engine.lost(exc))

    def _fail_all(self, batch: list[_Item], exc: BaseException) -> None:
        with self._lock:
            self._pending -= len(batch)
        failed: list[Outcome] = []
        for item in batch:
            fut = item.future
            if fut is None or (not fut.done() and (fut.running()
                                                   or fut.set_running_or_notify_cancel())):
                failed.append((item, False, exc))
        hand_back(failed)
