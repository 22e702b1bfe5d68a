"""The store on PostgreSQL beyond the writer's contract (``tests/store/test_writer_contract.py``,
run on both engines): the settings open it, it commits synchronously, one snapshot per
read unit, a lost connection made again."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from appliance.config import Settings
from appliance.store import Store
from appliance.store.errors import STORAGE_ERRORS, StoreError
from appliance.store.pg import PgConnection
from appliance.store.pg_engine import PgEngine
from tests.store.test_writer_contract import count_state, insert_state


def test_settings_with_a_database_url_open_postgresql(pg_url: str, tmp_path: Any) -> None:
    store = Store.open(Settings(data_dir=tmp_path, database_url=pg_url))
    try:
        assert isinstance(store.writer.engine, PgEngine)
        assert store.writer.call(insert_state("k")) == 1
    finally:
        store.close()
    lite = Store.open(Settings(data_dir=tmp_path))
    try:
        assert isinstance(lite, Store)
        assert (tmp_path / "appliance.db").is_file()
    finally:
        lite.close()


def test_the_writer_commits_synchronously(pg_store: Store[PgConnection]) -> None:
    assert pg_store.writer.call(
        lambda c: c.execute("SHOW synchronous_commit").fetchone()[0]) == "on"


def test_readers_cannot_write(pg_store: Store[PgConnection]) -> None:
    with pytest.raises(StoreError, match="read-only"):
        pg_store.readers.call(insert_state("x"))


def test_a_read_unit_sees_one_snapshot(pg_store: Store[PgConnection]) -> None:
    first_read = threading.Event()
    written = threading.Event()

    def read_twice(conn: PgConnection) -> tuple[int, int]:
        before = count_state(conn)
        first_read.set()
        written.wait(5)
        return before, count_state(conn)

    result: list[tuple[int, int]] = []
    reader = threading.Thread(target=lambda: result.append(pg_store.readers.call(read_twice)))
    reader.start()
    assert first_read.wait(5)
    pg_store.writer.call(insert_state("between"))
    written.set()
    reader.join(5)
    assert result == [(0, 0)]  # the commit in between is not seen halfway
    assert pg_store.readers.call(count_state) == 1


def test_a_lost_connection_fails_its_batch_and_the_next_one_connects_again(
        pg_store: Store[PgConnection], pg_url: str) -> None:
    pid = pg_store.writer.call(lambda c: c.execute("SELECT pg_backend_pid()").fetchone()[0])
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", (pid,))
    # The batch that meets the dead connection fails whole, as unavailable storage...
    with pytest.raises(STORAGE_ERRORS):
        pg_store.writer.call(insert_state("lost"), timeout=10)
    # ...and the writer connects again for the next one.
    assert pg_store.writer.call(insert_state("after"), timeout=10) == 1
    assert pg_store.writer.reconnects == 1
    keys = pg_store.readers.call(lambda c: [r[0] for r in c.execute(
        "SELECT key FROM appliance_state")])
    assert keys == ["after"]


def test_readers_survive_a_lost_connection(pg_store: Store[PgConnection], pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                      " WHERE application_name = 'appliance-reader'")
    # The pool checks a connection before lending it, so no read meets the dead one.
    assert [pg_store.readers.call(count_state) for _ in range(3)] == [0, 0, 0]
