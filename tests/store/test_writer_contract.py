"""The writer's contract, on both engines: every test here runs over a real SQLite file
and over the throwaway PostgreSQL server (``tests.pg_server``), through the one
:class:`appliance.store.writer.Writer` and the store the settings open.

Group commit, a failing unit rolled back alone by its savepoint, the two lanes taking
turns, the once-per-commit hand-back to the event loop, listeners and statistics, and a
stop that commits what was queued. (The engines' own: ``test_writer.py`` for SQLite's
WAL, ``pg/test_pg_writer.py`` for PostgreSQL's lost connection and snapshots.)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from appliance.config import Settings
from appliance.store import Store
from appliance.store.connection import Connection
from appliance.store.errors import INTEGRITY_ERRORS, STORE_ERRORS
from appliance.store.rows import as_int
from appliance.store.writer import WriterClosed

ENGINES = ["sqlite", "postgresql"]


@dataclass
class Backend:
    """How to open a store on one engine, again after it was closed."""

    name: str
    settings: Settings

    def open(self) -> Store[Connection]:
        return Store.open(self.settings)


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else ""
    return Backend(request.param, Settings(data_dir=tmp_path, database_url=url,
                                          read_connections=2))


@pytest.fixture
def store(engine: Backend) -> Iterator[Store[Connection]]:
    s = engine.open()
    yield s
    s.close()


def insert_state(key: str) -> Callable[[Connection], int]:
    def unit(conn: Connection) -> int:
        conn.execute("INSERT INTO appliance_state (key, value, updated_at) VALUES (?, 'v', 0)",
                     (key,))
        return conn.changes()
    return unit


def count_state(conn: Connection) -> int:
    row = conn.execute("SELECT count(*) FROM appliance_state").fetchone()
    assert row is not None
    return as_int(row[0])


def hold(store: Store[Connection]) -> threading.Event:
    """Hold the writer in a unit until the event is set, so that others queue."""
    gate = threading.Event()
    started = threading.Event()

    def unit(conn: Connection) -> None:
        started.set()
        gate.wait(10)

    store.writer.submit(unit)
    assert started.wait(10)
    return gate


def test_units_arriving_together_share_one_commit(store: Store[Connection]) -> None:
    gate = hold(store)
    futures = [store.writer.submit(insert_state(f"k{i}")) for i in range(200)]
    commits_before = store.writer.stats.commits
    gate.set()
    for f in futures:
        f.result(10)
    assert store.writer.stats.commits - commits_before <= 2
    assert store.readers.call(count_state) == 200


def test_a_failing_unit_is_rolled_back_alone(store: Store[Connection]) -> None:
    gate = hold(store)
    good1 = store.writer.submit(insert_state("a"))

    def bad(conn: Connection) -> None:
        conn.execute("INSERT INTO appliance_state (key, value, updated_at) VALUES ('b', 'v', 0)")
        raise ValueError("refused")

    def bad_sql(conn: Connection) -> None:
        conn.execute("INSERT INTO appliance_state (key, value, updated_at) VALUES ('d', 'v', 0)")
        conn.execute("SELECT no_such_column FROM appliance_state")

    failing = store.writer.submit(bad)
    duplicate = store.writer.submit(insert_state("a"))  # violates the primary key
    broken_sql = store.writer.submit(bad_sql)  # aborts PostgreSQL's transaction
    good2 = store.writer.submit(insert_state("c"))
    commits_before = store.writer.stats.commits
    gate.set()
    good1.result(10)
    good2.result(10)
    with pytest.raises(ValueError, match="refused"):
        failing.result(10)
    with pytest.raises(INTEGRITY_ERRORS):
        duplicate.result(10)
    with pytest.raises(STORE_ERRORS):
        broken_sql.result(10)
    keys = store.readers.call(
        lambda c: [r[0] for r in c.execute("SELECT key FROM appliance_state ORDER BY key")])
    assert keys == ["a", "c"]
    assert store.writer.stats.commits - commits_before == 2  # the holding unit's, theirs
    assert store.writer.stats.failed_units == 3 and store.writer.stats.failed_commits == 0


def ran(log: list[tuple[str, int]], name: str, store: Store[Connection],
        then: Callable[[], None] | None = None) -> Callable[[Connection], None]:
    """A unit that notes its name and the commit it is part of (commits done so far)."""
    def unit(conn: Connection) -> None:
        log.append((name, store.writer.stats.commits))
        if then is not None:
            then()
    return unit


def test_an_ordinary_unit_is_not_committed_behind_queued_bulk_units(
        store: Store[Connection]) -> None:
    """An accept that arrives while an import's parts wait goes in the next batch, and
    in a batch of its own: not after the parts, not in one commit with them."""
    log: list[tuple[str, int]] = []
    gate = hold(store)
    parts = [store.writer.submit(ran(log, f"part{i}", store), bulk=True) for i in range(3)]
    accept = store.writer.submit(ran(log, "accept", store))
    gate.set()
    for f in [*parts, accept]:
        f.result(10)
    assert [name for name, _ in log] == ["accept", "part0", "part1", "part2"]
    commits = dict(log)
    assert commits["accept"] < commits["part0"] == commits["part1"] == commits["part2"]


def test_bulk_units_take_their_turn_while_ordinary_units_keep_coming(
        store: Store[Connection]) -> None:
    """The lanes take turns: a part waits one batch of ordinary units, however many more
    arrive meanwhile, so an import is never held back by a report flood."""
    log: list[tuple[str, int]] = []
    later: list[Any] = []

    def more() -> None:  # run inside the first wave: the second wave arrives meanwhile
        later.extend(store.writer.submit(ran(log, f"second{i}", store)) for i in range(3))

    gate = hold(store)
    part = store.writer.submit(ran(log, "part", store), bulk=True)
    first = [store.writer.submit(ran(log, f"first{i}", store, more if i == 0 else None))
             for i in range(3)]
    gate.set()
    for f in [part, *first]:
        f.result(10)
    for f in later:
        f.result(10)
    assert [name for name, _ in log] == ["first0", "first1", "first2", "part",
                                         "second0", "second1", "second2"]
    assert len({commit for _, commit in log}) == 3


def test_coroutines_are_handed_their_outcomes_once_per_commit(
        store: Store[Connection], monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit of many coroutines' units wakes their event loop once, not once a unit:
    successes and a failure alike."""
    async def scenario() -> tuple[list[Any], int, int]:
        loop = asyncio.get_running_loop()
        wakes = 0
        real = loop.call_soon_threadsafe

        def counted(callback: Callable[..., object], *args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return real(callback, *args, **kwargs)

        monkeypatch.setattr(loop, "call_soon_threadsafe", counted)
        gate = await asyncio.to_thread(hold, store)
        tasks = [asyncio.ensure_future(store.writer.run(insert_state(f"r{i}")))
                 for i in range(100)]
        tasks.append(asyncio.ensure_future(store.writer.run(insert_state("r0"))))  # a duplicate
        while store.writer.queue_depth < len(tasks) + 1:
            await asyncio.sleep(0.001)
        commits_before, wakes = store.writer.stats.commits, 0
        gate.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        return outcomes, wakes, store.writer.stats.commits - commits_before

    outcomes, wakes, commits = asyncio.run(scenario())
    assert outcomes[:100] == [1] * 100
    assert isinstance(outcomes[100], INTEGRITY_ERRORS)
    assert commits == 2  # the holding unit's (a thread's: no wake), then the 101 units'
    assert wakes == 1  # one call into the loop for the 101 units of their commit


def test_listeners_and_statistics_count_each_commit(store: Store[Connection]) -> None:
    heard: list[tuple[float, int]] = []
    store.writer.commit_listeners.append(lambda seconds, units: heard.append((seconds, units)))
    before = (store.writer.stats.commits, store.writer.stats.units)
    gate = hold(store)
    futures = [store.writer.submit(insert_state(f"s{i}")) for i in range(10)]
    gate.set()
    for f in futures:
        f.result(10)
    store.writer.call(insert_state("alone"))
    stats = store.writer.stats
    assert [units for _, units in heard] == [1, 10, 1]  # the holding unit's commit first
    assert (stats.commits - before[0], stats.units - before[1]) == (3, 12)
    assert all(seconds >= 0 for seconds, _ in heard)
    assert stats.last_commit_s == heard[-1][0] and stats.commit_seconds[-1] == heard[-1][0]
    assert store.writer.queue_depth == 0


def test_result_is_visible_to_readers_when_the_future_resolves(store: Store[Connection]) -> None:
    seen: list[int] = []
    for i in range(20):
        store.writer.submit(insert_state(f"v{i}")).result(10)
        seen.append(store.readers.call(count_state))  # a fresh read sees the commit
    assert seen == list(range(1, 21))


def test_stopped_writer_refuses_and_flushes_queued_units(engine: Backend) -> None:
    s = engine.open()
    futures = [s.writer.submit(insert_state(f"k{i}"), bulk=i % 2 == 0) for i in range(50)]
    s.close()
    assert all(f.done() and f.exception() is None for f in futures)
    with pytest.raises(WriterClosed):
        s.writer.submit(insert_state("late"))
    again = engine.open()
    try:
        assert again.readers.call(count_state) == 50
    finally:
        again.close()
