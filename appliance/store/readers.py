"""Read-only connections for queries, used from worker threads.

A small pool of apsw connections opened read-only; each query borrows one for the
length of a function call, in a thread (so the event loop never waits on SQLite).
WAL lets readers run beside the writer and see the last committed state.
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
        """Run ``unit`` on a pooled read connection (blocking; for threads)."""
        conn = self._pool.get()
        try:
            return unit(conn)
        finally:
            self._pool.put(conn)

    async def run(self, unit: ReadUnit[T]) -> T:
        """Run ``unit`` on a pooled read connection in a worker thread."""
        return await anyio.to_thread.run_sync(self.call, unit)

    def close(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
