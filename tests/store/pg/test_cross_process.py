"""Claims with SKIP LOCKED and leases, and singletons under advisory locks, between
connections as separate processes have them."""

from __future__ import annotations

import threading
from pathlib import Path

import apsw
import psycopg
import pytest

from appliance.store.claims import Claimable, claim, release, renew
from appliance.store.pg import PgConnection
from appliance.store.singleton import Singleton, in_unit, lock_key

WORK = ("CREATE TABLE work (id {id}, state TEXT NOT NULL, due BIGINT NOT NULL,"
        " lease_owner TEXT, lease_until BIGINT)")
READY = Claimable("work", ready="state = 'QUEUED' AND due <= ?", order_by="due, id")


def make_work(conn: PgConnection | apsw.Connection, n: int) -> None:
    pg = isinstance(conn, PgConnection)
    conn.execute(WORK.format(id="BIGINT PRIMARY KEY" if pg else "INTEGER PRIMARY KEY"))
    conn.executemany("INSERT INTO work (id, state, due) VALUES (?, 'QUEUED', ?)",
                     [(i, i % 10) for i in range(1, n + 1)])


def connect(url: str) -> PgConnection:
    conn = PgConnection.connect(url)
    conn.execute("SET lock_timeout = 2000")  # a claim that waited would fail, not hang
    return conn


def test_two_processes_claiming_at_once_never_get_the_same_row(pg_url: str) -> None:
    a, b = connect(pg_url), connect(pg_url)
    make_work(a, 100)
    try:
        # Both hold their claim's transaction open at once: B is not blocked by A's
        # locked rows and takes others.
        a.execute("BEGIN")
        got_a = claim(a, READY, owner="a", now_ms=100, lease_ms=60_000, limit=30,
                      ready_params=(100,))
        b.execute("BEGIN")
        got_b = claim(b, READY, owner="b", now_ms=100, lease_ms=60_000, limit=30,
                      ready_params=(100,))
        assert len(got_a) == 30 and len(got_b) == 30
        assert not set(got_a) & set(got_b)
        a.execute("COMMIT")
        b.execute("COMMIT")
        # Then, round after round from two threads, until nothing is left.
        taken: dict[str, list[int]] = {"a": got_a, "b": got_b}
        errors: list[BaseException] = []

        def drain(conn: PgConnection, me: str) -> None:
            try:
                while True:
                    conn.execute("BEGIN")
                    got = claim(conn, READY, owner=me, now_ms=100, lease_ms=60_000,
                                limit=7, ready_params=(100,))
                    conn.execute("COMMIT")
                    if not got:
                        return
                    taken[me] += got
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=drain, args=(c, n)) for c, n in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert errors == []
        everything = taken["a"] + taken["b"]
        assert sorted(everything) == list(range(1, 101))  # each exactly once
        owners = dict(a.execute("SELECT id, lease_owner FROM work").fetchall())
        assert all(owners[i] == "a" for i in taken["a"])
        assert all(owners[i] == "b" for i in taken["b"])
    finally:
        a.close()
        b.close()


def test_claims_take_the_first_ready_rows_on_sqlite_too(tmp_path: Path) -> None:
    conn = apsw.Connection(str(tmp_path / "c.db"))
    make_work(conn, 20)
    first = claim(conn, READY, owner="me", now_ms=5, lease_ms=1000, limit=4, ready_params=(5,))
    assert first == [1, 10, 11, 20]  # due 0 first, then due 1...
    second = claim(conn, READY, owner="me", now_ms=5, lease_ms=1000, limit=4, ready_params=(5,))
    assert len(second) == 4 and not set(first) & set(second)


def test_a_killed_holders_claims_come_back_when_the_lease_runs_out(pg_url: str) -> None:
    a, b = connect(pg_url), connect(pg_url)
    make_work(a, 5)
    got = claim(a, READY, owner="a", now_ms=1_000, lease_ms=30_000, limit=5, ready_params=(1_000,))
    assert got == [1, 2, 3, 4, 5]
    a.close()  # the process is gone, its leases stay in the rows
    assert claim(b, READY, owner="b", now_ms=30_999, lease_ms=30_000, limit=5,
                 ready_params=(30_999,)) == []
    assert claim(b, READY, owner="b", now_ms=31_000, lease_ms=30_000, limit=5,
                 ready_params=(31_000,)) == [1, 2, 3, 4, 5]
    b.close()


def test_renew_and_release_touch_only_the_owners_leases(pg_url: str) -> None:
    a = connect(pg_url)
    make_work(a, 4)
    mine = claim(a, READY, owner="a", now_ms=10, lease_ms=1_000, limit=2, ready_params=(10,))
    assert mine == [1, 2]
    assert renew(a, READY, mine, owner="a", until_ms=50_000) == 2
    assert renew(a, READY, mine, owner="someone else", until_ms=99_000) == 0
    # Past the first lease but within the renewed one: still held.
    assert claim(a, READY, owner="b", now_ms=2_000, lease_ms=1_000, limit=4,
                 ready_params=(2_000,)) == [3, 4]
    assert release(a, READY, mine, owner="b") == 0
    assert release(a, READY, mine, owner="a") == 2
    assert claim(a, READY, owner="b", now_ms=2_000, lease_ms=1_000, limit=4,
                 ready_params=(2_000,)) == mine
    a.close()


def test_one_process_leads_a_singleton_until_it_goes(pg_url: str) -> None:
    first, second = Singleton("cutoff", pg_url), Singleton("cutoff", pg_url)
    other_loop = Singleton("retention", pg_url)
    try:
        assert first.try_lead() is True
        assert second.try_lead() is False
        assert first.try_lead() is True  # still the leader
        assert other_loop.try_lead() is True  # another name, another lock
        first.release()
        assert second.try_lead() is True
        # The leader's process dies (its connection goes): the other takes over.
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE application_name = 'appliance-cutoff'")
        assert second.try_lead() is False  # learns it lost the lock...
        assert first.try_lead() is True  # ...and the next to ask leads
        assert second.try_lead() is False
    finally:
        for s in (first, second, other_loop):
            s.release()


def test_on_sqlite_every_singleton_leads() -> None:
    assert Singleton("cutoff").try_lead() and Singleton("cutoff").try_lead()
    assert in_unit(apsw.Connection(":memory:"), "cutoff") is True


def test_a_unit_lock_holds_to_the_commit(pg_url: str) -> None:
    a, b = connect(pg_url), connect(pg_url)
    try:
        a.execute("BEGIN")
        b.execute("BEGIN")
        assert in_unit(a, "retention") is True
        assert in_unit(b, "retention") is False
        a.execute("COMMIT")
        b.execute("ROLLBACK")
        b.execute("BEGIN")
        assert in_unit(b, "retention") is True
        b.execute("COMMIT")
    finally:
        a.close()
        b.close()


def test_lock_keys_are_stable_and_distinct() -> None:
    assert lock_key("cutoff") == lock_key("cutoff")
    assert lock_key("cutoff") != lock_key("retention")
    assert -(2**63) <= lock_key("cutoff") < 2**63


@pytest.mark.parametrize("name", ["cutoff"])
def test_a_singleton_without_a_server_does_not_lead(name: str) -> None:
    s = Singleton(name, "postgresql://nobody@127.0.0.1:1/none")
    assert s.try_lead() is False
