"""The writer thread on a real SQLite file: group commit, unit isolation, durability."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.store import Store
from appliance.store.schema import SCHEMA_VERSION, SchemaTooNew, migrate, open_connection
from appliance.store.writer import WriterClosed


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


def test_units_arriving_together_share_one_commit(store: Store) -> None:
    gate = threading.Event()
    store.writer.submit(lambda conn: gate.wait(5))  # hold the writer while others queue
    futures = [store.writer.submit(insert_state(f"k{i}")) for i in range(200)]
    commits_before = store.writer.stats.commits
    gate.set()
    for f in futures:
        f.result(5)
    assert store.writer.stats.commits - commits_before <= 2
    assert store.readers.call(count_state) == 200


def test_a_failing_unit_is_rolled_back_alone(store: Store) -> None:
    gate = threading.Event()
    store.writer.submit(lambda conn: gate.wait(5))
    good1 = store.writer.submit(insert_state("a"))

    def bad(conn: apsw.Connection) -> None:
        conn.execute("INSERT INTO appliance_state (key, value, updated_at) VALUES ('b', 'v', 0)")
        raise ValueError("refused")

    failing = store.writer.submit(bad)
    duplicate = store.writer.submit(insert_state("a"))  # violates the primary key
    good2 = store.writer.submit(insert_state("c"))
    gate.set()
    good1.result(5)
    good2.result(5)
    with pytest.raises(ValueError, match="refused"):
        failing.result(5)
    with pytest.raises(apsw.ConstraintError):
        duplicate.result(5)
    keys = store.readers.call(
        lambda c: [r[0] for r in c.execute("SELECT key FROM appliance_state ORDER BY key")])
    assert keys == ["a", "c"]


def ran(log: list[tuple[str, int]], name: str, store: Store,
        then: Callable[[], None] | None = None) -> Callable[[apsw.Connection], None]:
    """A unit that notes its name and the commit it is part of (commits done so far)."""
    def unit(conn: apsw.Connection) -> None:
        log.append((name, store.writer.stats.commits))
        if then is not None:
            then()
    return unit


def test_an_ordinary_unit_is_not_committed_behind_queued_bulk_units(store: Store) -> None:
    """An accept that arrives while an import's parts wait goes in the next batch, and
    in a batch of its own: not after the parts, not in one commit with them."""
    gate = threading.Event()
    log: list[tuple[str, int]] = []
    store.writer.submit(lambda conn: gate.wait(5))
    parts = [store.writer.submit(ran(log, f"part{i}", store), bulk=True) for i in range(3)]
    accept = store.writer.submit(ran(log, "accept", store))
    gate.set()
    for f in [*parts, accept]:
        f.result(5)
    assert [name for name, _ in log] == ["accept", "part0", "part1", "part2"]
    commits = dict(log)
    assert commits["accept"] < commits["part0"] == commits["part1"] == commits["part2"]


def test_bulk_units_take_their_turn_while_ordinary_units_keep_coming(store: Store) -> None:
    """The lanes take turns: a part waits one batch of ordinary units, however many more
    arrive meanwhile, so an import is never held back by a report flood."""
    gate = threading.Event()
    log: list[tuple[str, int]] = []
    later: list[Any] = []

    def more() -> None:  # run inside the first wave: the second wave arrives meanwhile
        later.extend(store.writer.submit(ran(log, f"second{i}", store)) for i in range(3))

    store.writer.submit(lambda conn: gate.wait(5))
    part = store.writer.submit(ran(log, "part", store), bulk=True)
    first = [store.writer.submit(ran(log, f"first{i}", store, more if i == 0 else None))
             for i in range(3)]
    gate.set()
    for f in [part, *first]:
        f.result(5)
    for f in later:
        f.result(5)
    assert [name for name, _ in log] == ["first0", "first1", "first2", "part",
                                         "second0", "second1", "second2"]
    assert len({commit for _, commit in log}) == 3


def test_queued_bulk_units_are_committed_before_the_writer_stops(tmp_path: Path) -> None:
    s = Store.open(str(tmp_path / "b.db"))
    futures = [s.writer.submit(insert_state(f"k{i}"), bulk=i % 2 == 0) for i in range(50)]
    s.close()
    assert all(f.done() and f.exception() is None for f in futures)
    conn = open_connection(str(tmp_path / "b.db"))
    assert count_state(conn) == 50
    conn.close()


def test_result_is_visible_to_readers_when_the_future_resolves(store: Store) -> None:
    seen: list[int] = []
    for i in range(20):
        store.writer.submit(insert_state(f"v{i}")).result(5)
        seen.append(store.readers.call(count_state))  # a fresh read sees the commit
    assert seen == list(range(1, 21))


def test_readers_cannot_write(store: Store) -> None:
    with pytest.raises(apsw.ReadOnlyError):
        store.readers.call(insert_state("x"))


def test_stopped_writer_refuses_and_flushes_queued_units(tmp_path: Path) -> None:
    s = Store.open(str(tmp_path / "b.db"))
    futures = [s.writer.submit(insert_state(f"k{i}")) for i in range(50)]
    s.close()
    assert all(f.done() and f.exception() is None for f in futures)
    with pytest.raises(WriterClosed):
        s.writer.submit(insert_state("late"))
    conn = open_connection(str(tmp_path / "b.db"))
    assert count_state(conn) == 50
    conn.close()


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


def test_the_wal_is_checkpointed_off_the_writer_and_stays_bounded(tmp_path: Path) -> None:
    from appliance.store.checkpointer import Checkpointer
    from appliance.store.writer import WAL_SIZE_LIMIT
    from tests.harness import wait_for

    path = str(tmp_path / "w.db")
    s = Store.open(path)
    s.checkpointer.stop()
    s.checkpointer = Checkpointer(path, wal_bytes=2 * 1024 * 1024, interval_s=0.05)
    s.checkpointer.start()
    try:
        assert one_write(s, "PRAGMA wal_autocheckpoint") == 0  # not in the writer's commits
        blob = b"x" * 500_000
        def put(i: int) -> None:
            s.writer.call(lambda c: c.execute(
                "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, 0)",
                (f"b{i}", blob)))

        for i in range(60):  # 30 MB through the WAL
            put(i)
        wait_for(lambda: s.checkpointer.checkpoints >= 1, 10, message="a checkpoint")
        assert s.checkpointer.last_error is None
        # Once checkpointed, the next write starts the WAL over and trims the file. (Each
        # write waits for a checkpoint after the one before: a checkpoint still running
        # when a write appends has not backfilled the whole WAL, and a busy machine can
        # make that happen every time.)
        more = iter(range(60, 1000))

        def trimmed() -> bool:
            done = s.checkpointer.checkpoints
            wait_for(lambda: s.checkpointer.checkpoints > done, 10, interval=0.01,
                     message="the next checkpoint")
            put(next(more))
            return s.checkpointer.wal_size() <= WAL_SIZE_LIMIT + 1024 * 1024

        wait_for(trimmed, 20, interval=0.05, message="the WAL to start over")
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

    from appliance.store.writer import WAL_SIZE_LIMIT

    path = str(tmp_path / "w.db")
    s = Store.open(path)  # its checkpointer as the appliance runs it (16 MB, every 0.5 s)
    s.writer.wal_hard_bytes = 24 * 1024 * 1024
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
            largest = max(largest, s.checkpointer.wal_size())
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
    assert largest < s.writer.wal_hard_bytes + WAL_SIZE_LIMIT, f"the WAL reached {largest:,} bytes"
