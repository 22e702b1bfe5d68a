"""The writer's engine on SQLite: one apsw connection to the data dir's file.

A batch begins with ``BEGIN IMMEDIATE`` (the write lock is taken at once, so a unit never
meets ``SQLITE_BUSY`` half-way). The automatic WAL checkpoint is off: the
:class:`~appliance.store.checkpointer.Checkpointer` does it off the writer's path, and
the writer itself only once the WAL is past its hard limit (:meth:`SqliteEngine.after_commit`).

The WAL's file is kept at up to its hard limit when the log starts over
(``journal_size_limit``), not trimmed: a commit that writes over frames already on disk
syncs the data alone, where one that makes the file longer also syncs its new size (on
ext4, a journal commit each time). Under a report flood (``wrk -c32``) that was a tenth
of the own port's rate and half its 99th percentile. So how full the log is comes from
SQLite's WAL hook (the frames written since it started over), not from the file's size.
"""

from __future__ import annotations

import logging
import time

import apsw

from appliance.store.rows import as_int
from appliance.store.schema import open_connection
from appliance.store.writer import Writer, WriterStats

log = logging.getLogger("appliance.writer")
# Past this the writer checkpoints the WAL itself, between two commits (see after_commit);
# and the size the WAL's file is kept at, at most, when the log starts over.
WAL_HARD_LIMIT = 64 * 1024 * 1024
_INLINE_CHECKPOINT_GAP_S = 0.02  # at most this often, when a reader keeps it from finishing


class SqliteEngine:
    """The SQLite side of :class:`appliance.store.writer.Engine`."""

    errors: tuple[type[BaseException], ...] = (apsw.Error,)

    def __init__(self, path: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000) -> None:
        self.path = path
        self.synchronous = synchronous
        self.busy_timeout_ms = busy_timeout_ms
        self.wal_hard_bytes = WAL_HARD_LIMIT
        self._next_inline_checkpoint = 0.0
        self._conn: apsw.Connection | None = None
        self._wal_pages = 0  # frames in the WAL after the last commit (the WAL hook's)
        self._page_size = 4096

    def connect(self) -> apsw.Connection:
        conn = open_connection(self.path, self.synchronous, self.busy_timeout_ms)
        conn.execute("PRAGMA wal_autocheckpoint=0")  # the Checkpointer does it, off our path
        # Kept whole when the log starts over: commits write over it, not past its end.
        conn.execute(f"PRAGMA journal_size_limit={WAL_HARD_LIMIT}")
        self._page_size = as_int(conn.execute("PRAGMA page_size").fetchall()[0][0])
        conn.set_wal_hook(self._wal_written)  # replaces the automatic checkpoint: off above
        self._conn = conn
        return conn

    def _wal_written(self, _conn: apsw.Connection, _name: str, pages: int) -> int:
        self._wal_pages = pages
        return apsw.SQLITE_OK

    def wal_bytes(self) -> int:
        """How much of the WAL the log holds after the writer's last commit: its frames
        since it last started over, as pages (the file's size says nothing: it is kept)."""
        return self._wal_pages * self._page_size

    def begin(self) -> None:
        self._connection().execute("BEGIN IMMEDIATE")

    def usable(self) -> bool:
        """A file's connection is not lost; an I/O error fails its batch, not the connection."""
        return self._conn is not None

    def lost(self, exc: BaseException) -> BaseException:
        return exc

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _connection(self) -> apsw.Connection:
        if self._conn is None:
            raise apsw.ConnectionClosedError("the writer's connection is closed")
        return self._conn

    def after_commit(self, stats: WriterStats) -> None:
        """Checkpoint the WAL here, between two commits, once it is past its hard limit.

        The checkpointer's passive checkpoints run beside the writer; while the writer
        never pauses (a report flood, an import), each one finds frames appended while it
        copied, the WAL is never wholly copied back, and it never starts over: it grew by
        ~6 MB a second. A checkpoint on the writer's own connection has nothing appended
        meanwhile, so the next commit starts the WAL over (and writes over the file from
        its start). The commits wait for it: tens of milliseconds, once per
        ``wal_hard_bytes`` written.
        """
        size = self.wal_bytes()
        now = time.monotonic()
        if size < self.wal_hard_bytes or now < self._next_inline_checkpoint:
            return
        started = time.perf_counter()
        try:
            row = self._connection().execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except apsw.BusyError:  # the checkpointer's own is running: after the next commit
            return
        except apsw.Error as exc:
            log.warning("checkpoint by the writer failed: %s", exc)
            self._next_inline_checkpoint = now + _INLINE_CHECKPOINT_GAP_S
            return
        if row is not None and int(row[2]) < int(row[1]):
            # A reader still reads older frames: leave it a moment before trying again.
            self._next_inline_checkpoint = now + _INLINE_CHECKPOINT_GAP_S
        stats.wal_checkpoints += 1
        log.info("the WAL passed its hard limit under a steady write load; checkpointed"
                 " by the writer", extra={"wal_bytes": size,
                                          "ms": round((time.perf_counter() - started) * 1000)})


def sqlite_writer(path: str, synchronous: str = "FULL", busy_timeout_ms: int = 5000,
                  max_batch: int = 2000) -> Writer:
    """A writer (not started) over the SQLite file at ``path``."""
    return Writer(SqliteEngine(path, synchronous, busy_timeout_ms), max_batch=max_batch)
