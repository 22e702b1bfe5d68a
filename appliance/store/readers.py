"""Read-only connections for queries, used from worker threads.

A small pool of apsw connections opened read-only; each query borrows one for the
length of a function call, in a thread (so the event loop never waits on SQLite).
WAL lets readers run beside the writer and see the last committed state.

Every read unit runs inside one read transaction (``BEGIN`` ... ``COMMIT``): all the
queries of one unit see the same committed snapshot, so the figures of one page or
one answer agree with each other even while the writer commits between them.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
import apsw

from appliance.store.schema import open_connection

T = TypeVar("T")
ReadUnit = Callable[[apsw.Connection], T]


def in_snapshot(conn: apsw.Connection, unit: ReadUnit[T]) -> T:
    """Run ``unit`` on ``conn`` inside one read transaction (one snapshot)."""
    if conn.in_transaction:  # already inside one: the caller's snapshot holds
        return unit(conn)
    conn.execute("BEGIN")
    try:
        return unit(conn)
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


class Readers:
    def __init__(self, path: str, size: int = 4, busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self._pool: queue.LifoQueue[apsw.Connection] = queue.LifoQueue()
        self._all: list[apsw.Connection] = []
        for _ in range(size):
            conn = open_connection(path, busy_timeout_ms=busy_timeout_ms, readonly=True)
            self._all.append(conn)
            self._pool.put(conn)

    def call(self, unit: ReadUnit[T]) -> T:
        """Run ``unit`` on a pooled read connection, in one snapshot (blocking; for threads)."""
        conn = self._pool.get()
        try:
            return in_snapshot(conn, unit)
        finally:
            self._pool.put(conn)

    async def run(self, unit: ReadUnit[T]) -> T:
        """Run ``unit`` on a pooled read connection in a worker thread, in one snapshot."""
        return await anyio.to_thread.run_sync(self.call, unit)

    def close(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
