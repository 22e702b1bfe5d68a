"""WAL checkpoints off the writer's path.

With SQLite's automatic checkpoint, the connection whose commit pushes the WAL past
its limit copies the pages back into the database and fsyncs it, inside that
commit: a callback or an accept that happens to be that commit waits for it. The
writer turns the automatic checkpoint off; this thread runs a ``PASSIVE``
checkpoint from its own connection whenever the WAL has grown past ``wal_bytes``.
PASSIVE never blocks the writer or the readers; SQLite starts the WAL over at the
next write once a checkpoint has caught up. How full the WAL is comes from the writer
(``wal_used``: the frames since the log started over), since the file is kept at its
size when the log starts over (:mod:`appliance.store.sqlite_engine`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

import apsw

from appliance.store.schema import open_connection

log = logging.getLogger("appliance.store")


class Checkpointer:
    def __init__(self, path: str, wal_bytes: int = 16 * 1024 * 1024,
                 interval_s: float = 0.5, busy_timeout_ms: int = 5000,
                 wal_used: Callable[[], int] | None = None) -> None:
        self.path = path
        self.wal_bytes = wal_bytes
        # How much the log holds (the writer's count); without it, the file's size.
        self.wal_used = wal_used or self.wal_size
        self.interval_s = interval_s
        self.busy_timeout_ms = busy_timeout_ms
        self.checkpoints = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="appliance-checkpointer",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wal_size(self) -> int:
        try:
            return os.stat(self.path + "-wal").st_size
        except OSError:
            return 0

    def _run(self) -> None:
        conn = open_connection(self.path, busy_timeout_ms=self.busy_timeout_ms)
        try:
            while not self._stop.wait(self.interval_s):
                if self.wal_used() < self.wal_bytes:
                    continue
                try:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.checkpoints += 1
                    self.last_error = None
                except apsw.Error as exc:  # busy or I/O: try again next round
                    self.last_error = str(exc)
                    log.warning("checkpoint failed: %s", exc)
        finally:
            conn.close()
