"""The store on a real SQLite file: its readers, schema, synchronous setting and WAL (the
writer's contract on both engines is `test_writer_contract.py`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.store import Store
from appliance.store.schema import SCHEMA_VERSION, SchemaTooNew, migrate, open_connection


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(str(tmp_path / "a.db"), read_connections=2)
    yield s
    s.close()


def one(conn: apsw.Connection, sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


def insert_state(key: str) -> Callable[[apsw.Connection], int]:
    def unit(conn: apsw.Connection) -> int:
        conn.execute("INSERT INTO appliance_state (key, value, updated_at) VALUES (?, 'v', 0)",
                     (key,))
        return conn.last_insert_rowid()
    return unit


def count_state(conn: apsw.Connection) -> int:
    return int(one(conn, "SELECT count(*) FROM appliance_state"))


def test_readers_cannot_write(store: Store) -> None:
    with pytest.raises(apsw.ReadOnlyError):
        store.readers.call(insert_state("x"))


def test_migrate_creates_schema_and_refuses_a_newer_file(tmp_path: Path) -> None:
    path = str(tmp_path / "c.db")
    assert migrate(path) == SCHEMA_VERSION
    assert migrate(path) == SCHEMA_VERSION  # idempotent
    conn = open_connection(path)
    assert one(conn, "PRAGMA journal_mode") == "wal"
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(SchemaTooNew, match="newer appliance"):
        migrate(path)


def test_synchronous_setting_reaches_the_connection(tmp_path: Path) -> None:
    full = open_connection(str(tmp_path / "d.db"), synchronous="FULL")
    normal = open_connection(str(tmp_path / "d.db"), synchronous="NORMAL")
    assert one(full, "PRAGMA synchronous") == 2
    assert one(normal, "PRAGMA synchronous") == 1
    full.close()
    normal.close()


def test_the_wal_is_checkpointed_off_the_writer_and_kept_for_the_next_commits(
        tmp_path: Path) -> None:
    """The checkpointer starts the log over once the writer's frames pass its limit; the
    file is kept at its size, and the commits after it write over it instead of making
    it longer (a longer file is a synced size as well: a journal commit on ext4)."""
    from appliance.store.checkpointer import Checkpointer
    from appliance.store.sqlite_engine import SqliteEngine
    from tests.harness import wait_for

    path = str(tmp_path / "w.db")
    s = Store.open(path)
    engine = s.writer.engine
    assert s.checkpointer is not None and isinstance(engine, SqliteEngine)
    s.checkpointer.stop()
    s.checkpointer = checkpointer = Checkpointer(path, wal_bytes=2 * 1024 * 1024,
                                                 interval_s=0.05, wal_used=engine.wal_bytes)
    blob = b"x" * 500_000

    def put(i: int) -> None:
        s.writer.call(lambda c: c.execute(
            "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, 0)",
            (f"b{i}", blob)))

    try:
        assert one_write(s, "PRAGMA wal_autocheckpoint") == 0  # not in the writer's commits
        for i in range(60):  # 30 MB through the WAL, before any checkpoint
            put(i)
        grown = checkpointer.wal_size()
        assert grown > 28 * 1024 * 1024
        assert engine.wal_bytes() > 28 * 1024 * 1024  # the writer's count of the frames
        checkpointer.start()
        wait_for(lambda: checkpointer.checkpoints >= 1, 10, message="a checkpoint")
        assert checkpointer.last_error is None
        # Once checkpointed, the next write starts the log over. (Each write waits for
        # a checkpoint after the one before: a checkpoint still running when a write
        # appends has not backfilled the whole WAL, and a busy machine can make that
        # happen every time.)
        more = iter(range(60, 1000))

        def started_over() -> bool:
            done = checkpointer.checkpoints
            wait_for(lambda: checkpointer.checkpoints > done, 10, interval=0.01,
                     message="the next checkpoint")
            put(next(more))
            return engine.wal_bytes() < 2 * 1024 * 1024

        wait_for(started_over, 20, interval=0.05, message="the WAL to start over")
        assert checkpointer.wal_size() == grown  # kept, not trimmed
        checkpointer.stop()  # the next writes stay in the log: the file must not grow
        for _ in range(10):
            put(next(more))
        assert engine.wal_bytes() > 5 * 1024 * 1024
        assert checkpointer.wal_size() == grown  # written over, not past its end
        assert store_count(s) == next(more)
    finally:
        s.close()


def one_write(s: Store, sql: str) -> Any:
    def unit(conn: apsw.Connection) -> Any:
        return one(conn, sql)
    return s.writer.call(unit)


def store_count(s: Store) -> int:
    return s.readers.call(count_state)


def test_the_wal_stays_bounded_under_writes_that_never_pause(tmp_path: Path) -> None:
    """A passive checkpoint beside a writer that never pauses cannot finish (the writer
    appends while it copies), so the WAL only starts over in a pause: a long report
    flood grew it by ~6 MB a second. Past its hard limit the writer checkpoints itself,
    between two commits, and the WAL starts over."""
    from concurrent.futures import Future

    from appliance.store.sqlite_engine import SqliteEngine

    path = str(tmp_path / "w.db")
    s = Store.open(path)  # its checkpointer as the appliance runs it (16 MB, every 0.5 s)
    engine, checkpointer = s.writer.engine, s.checkpointer
    assert isinstance(engine, SqliteEngine) and checkpointer is not None
    engine.wal_hard_bytes = 24 * 1024 * 1024
    s.writer.max_batch = 4  # small commits, back to back: the writer never waits for work
    largest = 0
    stop = threading.Event()

    def put(n: int) -> Callable[[apsw.Connection], None]:
        value = n.to_bytes(4, "big") * 25_000  # 100 KB, never the same twice (SQLite
        # skips writing a value equal to the one stored)

        def unit(c: apsw.Connection) -> None:
            c.execute("INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, 0)"
                      " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                      (f"k{n % 50}", value))
        return unit

    def watch() -> None:
        nonlocal largest
        while not stop.is_set():
            largest = max(largest, checkpointer.wal_size())
            stop.wait(0.002)

    def read() -> None:  # short reads all the time, as the API and the loops make them
        while not stop.is_set():
            s.readers.call(lambda c: c.execute("SELECT count(*) FROM appliance_state").fetchall())

    others = [threading.Thread(target=watch)] + [threading.Thread(target=read) for _ in range(2)]
    for t in others:
        t.start()
    try:
        queued: list[Future[None]] = [s.writer.submit(put(n)) for n in range(2_000)]
        for done in queued:  # 200 MB through the WAL
            done.result(60)
    finally:
        stop.set()
        for t in others:
            t.join()
        s.close()
    assert s.writer.stats.wal_checkpoints >= 1
    # The file is as long as the most the log held: the hard limit and what one
    # checkpoint's wait lets through.
    assert largest < engine.wal_hard_bytes + 16 * 1024 * 1024, \
        f"the WAL reached {largest:,} bytes"
