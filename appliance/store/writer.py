"""The one writer: a thread that owns the only write connection.

Callers hand it *write units* (functions of the connection). The thread takes every
unit queued at that moment, runs them in one ``BEGIN IMMEDIATE`` transaction with a
savepoint each (a failing unit is rolled back alone and its caller gets the
exception), commits once, and only then resolves the callers' futures. So a resolved
future means the unit's effects are on disk (``synchronous=FULL``), and one fsync is
shared by everything that arrived together: group commit.

*Bulk* units (``submit(unit, bulk=True)``: the parts of an import, thousands of rows
each) wait in a lane of their own. A batch is either the units of the ordinary lane or
those of the bulk lane, never both, so an accept or a callback that arrives during an
import is committed without the import's rows ahead of it in its batch. The lanes take
turns whenever both wait: neither can hold the other back for more than one batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import apsw

from appliance.logs import sampled_line
from appliance.store.schema import open_connection

T = TypeVar("T")
WriteUnit = Callable[[apsw.Connection], T]
log = logging.getLogger("appliance.writer")
WAL_SIZE_LIMIT = 16 * 1024 * 1024
# Past this the writer checkpoints the WAL itself, between two commits (see _bound_wal).
WAL_HARD_LIMIT = 64 * 1024 * 1024
_INLINE_CHECKPOINT_GAP_S = 0.02  # at most this often, when a reader keeps it from finishing


class WriterClosed(RuntimeError):
    """The writer is stopped; nothing was written."""


@dataclass
class _Item:
    unit: Callable[[apsw.Connection], Any]
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


def _resolve(outcomes: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    """In the event loop: every coroutine's outcome of one commit, at once."""
    for waiter, ok, value in outcomes:
        if waiter.done():  # cancelled meanwhile
            continue
        if ok:
            waiter.set_result(value)
        else:
            waiter.set_exception(value)


@dataclass
class WriterStats:
    commits: int = 0
    units: int = 0
    failed_units: int = 0
    failed_commits: int = 0
    wal_checkpoints: int = 0  # the writer's own, past the WAL's hard limit
    last_commit_s: float = 0.0
    commit_seconds: list[float] = field(default_factory=list)

    def record(self, seconds: float, units: int) -> None:
        self.commits += 1
        self.units += units
        self.last_commit_s = seconds
        self.commit_seconds.append(seconds)
        if len(self.commit_seconds) > 4096:
            del self.commit_seconds[:2048]


class Writer:
    """Serialises every write through one thread and one connection."""

    def __init__(
        self,
        path: str,
        synchronous: str = "FULL",
        busy_timeout_ms: int = 5000,
        max_batch: int = 2000,
        on_commit: Callable[[float, int], None] | None = None,
    ) -> None:
        self.path = path
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self.max_batch = max_batch
        self.wal_hard_bytes = WAL_HARD_LIMIT
        self._next_inline_checkpoint = 0.0
        self.stats = WriterStats()
        self._on_commit = on_commit
        # Called after every commit with (seconds, units), e.g. by the metrics.
        self.commit_listeners: list[Callable[[float, int], None]] = []
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        # The bulk lane; each unit put here also puts _BULK on the queue, to wake the thread.
        self._bulk: deque[_Item] = deque()
        self._thread: threading.Thread | None = None
        self._accepting = False
        self._pending = 0
        self._lock = threading.Lock()

    # -- lifecycle -----------------------------------------------------------
    def start(self) -> None:
        ready: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="appliance-writer", daemon=True
        )
        self._thread.start()
        ready.result()
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
    def submit(self, unit: WriteUnit[T], bulk: bool = False) -> Future[T]:
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

    def call(self, unit: WriteUnit[T], timeout: float | None = None) -> T:
        """Run ``unit`` and wait for its commit (for threads, not the event loop)."""
        return self.submit(unit).result(timeout)

    async def run(self, unit: WriteUnit[T]) -> T:
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
            conn = open_connection(self.path, self.synchronous, self.busy_timeout_ms)
            conn.execute("PRAGMA wal_autocheckpoint=0")  # the Checkpointer does it, off our path
            conn.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")  # shrink it after a reset
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
                    self._commit_batch(conn, batch)
                    self._bound_wal(conn)
        finally:
            conn.close()

    def _bound_wal(self, conn: apsw.Connection) -> None:
        """Checkpoint the WAL here, between two commits, once it is past its hard limit.

        The checkpointer's passive checkpoints run beside the writer; while the writer
        never pauses (a report flood, an import), each one finds frames appended while it
        copied, the WAL is never wholly copied back, and it never starts over: it grew by
        ~6 MB a second. A checkpoint on the writer's own connection has nothing appended
        meanwhile, so the next commit starts the WAL over (and trims the file to
        ``WAL_SIZE_LIMIT``). The commits wait for it: tens of milliseconds, once per
        ``wal_hard_bytes`` written.
        """
        try:
            size = os.stat(self.path + "-wal").st_size
        except OSError:
            return
        now = time.monotonic()
        if size < self.wal_hard_bytes or now < self._next_inline_checkpoint:
            return
        started = time.perf_counter()
        try:
            row = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except apsw.BusyError:  # the checkpointer's own is running: after the next commit
            return
        except apsw.Error as exc:
            log.warning("checkpoint by the writer failed: %s", exc)
            self._next_inline_checkpoint = now + _INLINE_CHECKPOINT_GAP_S
            return
        if row is not None and int(row[2]) < int(row[1]):
            # A reader still reads older frames: leave it a moment before trying again.
            self._next_inline_checkpoint = now + _INLINE_CHECKPOINT_GAP_S
        self.stats.wal_checkpoints += 1
        log.info("the WAL passed its hard limit under a steady write load; checkpointed"
                 " by the writer", extra={"wal_bytes": size,
                                          "ms": round((time.perf_counter() - started) * 1000)})

    def _commit_batch(self, conn: apsw.Connection, batch: list[_Item]) -> None:
        started = time.perf_counter()
        results: list[tuple[_Item, bool, Any]] = []
        try:
            conn.execute("BEGIN IMMEDIATE")
        except apsw.Error as exc:
            self._fail_all(batch, exc)
            return
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
                    # SQLite gave up the whole transaction (a full disk, an I/O error):
                    # every unit of the batch is undone, and each caller is told so.
                    self._abandon(conn, batch, exc)
                    return
                results.append((item, False, exc))
            else:
                try:
                    conn.execute("RELEASE unit")
                except apsw.Error as exc:
                    self._abandon(conn, batch, exc)
                    return
                results.append((item, True, value))
        try:
            conn.execute("COMMIT")
        except apsw.Error as exc:
            # Summed up every 10 s: a full disk fails every commit.
            sampled_line(log, "commit failed", level=logging.ERROR).note("commit", str(exc))
            self.stats.failed_commits += 1
            with contextlib.suppress(apsw.Error):
                conn.execute("ROLLBACK")
            self._fail_all(batch, exc)
            return
        elapsed = time.perf_counter() - started
        self.stats.record(elapsed, len(batch))
        if self._on_commit is not None:
            self._on_commit(elapsed, len(batch))
        for listener in self.commit_listeners:
            listener(elapsed, len(batch))
        with self._lock:
            self._pending -= len(batch)
        self._hand_back([(item, ok, value) for item, ok, value in results
                         if ok or value is not None])

    @staticmethod
    def _hand_back(outcomes: list[tuple[_Item, bool, Any]]) -> None:
        """Resolve each caller: threads' futures here, coroutines' in their loop."""
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

    @staticmethod
    def _rolled_back_alone(conn: apsw.Connection) -> bool:
        """Undo the failed unit's savepoint; False when the transaction itself is gone."""
        if not conn.in_transaction:
            return False
        try:
            conn.execute("ROLLBACK TO unit")
            conn.execute("RELEASE unit")
        except apsw.Error:
            return False
        return True

    def _abandon(self, conn: apsw.Connection, batch: list[_Item], exc: BaseException) -> None:
        log.error("transaction abandoned: %s", exc)
        self.stats.failed_commits += 1
        if conn.in_transaction:
            with contextlib.suppress(apsw.Error):
                conn.execute("ROLLBACK")
        self._fail_all(batch, exc)

    def _fail_all(self, batch: list[_Item], exc: BaseException) -> None:
        with self._lock:
            self._pending -= len(batch)
        failed: list[tuple[_Item, bool, Any]] = []
        for item in batch:
            fut = item.future
            if fut is None or (not fut.done() and (fut.running()
                                                   or fut.set_running_or_notify_cancel())):
                failed.append((item, False, exc))
        self._hand_back(failed)
