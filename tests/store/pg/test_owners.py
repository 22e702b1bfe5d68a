"""Whose work it is (SCALE-1): a live process's sends and import jobs are left alone by
the others, a dead process's are taken over at once."""

from __future__ import annotations

from functools import partial

from appliance.imports.import_job import claim_runnable
from appliance.sending.recovery import recover_interrupted, recover_orphans
from appliance.store import Store
from appliance.store.connection import Connection
from appliance.store.owner import OWNER, dead_owners
from appliance.store.pg import PgConnection
from appliance.store.rows import as_int, one
from appliance.store.singleton import Singleton
from tests.reports.support import PROVIDER, add_account, add_message

NOW = 1_700_000_000_000


def holding(pg_url: str, owner: str) -> Singleton:
    """Another process's liveness lock, held from here."""
    lock = Singleton(f"process:{owner}", pg_url)
    assert lock.try_lead()
    return lock


def test_an_owner_is_dead_once_its_lock_is_gone(pg_store: Store[PgConnection], pg_url: str) -> None:
    alive = holding(pg_url, "host:1:alive")
    try:
        found = pg_store.writer.call(
            lambda c: dead_owners(c, ["host:1:alive", "host:2:gone", OWNER, None]))
        assert found == {"host:2:gone"}  # never this process itself
    finally:
        alive.release()
    assert pg_store.writer.call(lambda c: dead_owners(c, ["host:1:alive"])) == {"host:1:alive"}


def test_only_a_dead_processs_sends_become_uncertain(pg_store: Store[PgConnection],
                                                     pg_url: str) -> None:
    acct = pg_store.writer.call(add_account)
    alive = holding(pg_url, "host:1:alive")
    try:
        def sending(conn: Connection, ref: str, owner: str | None) -> None:
            add_message(conn, acct, ref, state="SENDING", submitted_at=None)
            conn.execute("UPDATE messages SET lease_owner = ? WHERE ref = ?", (owner, ref))

        for ref, owner in (("live", "host:1:alive"), ("dead", "host:2:gone"), ("old", None)):
            pg_store.writer.call(partial(sending, ref=ref, owner=owner))
        pg_store.writer.call(lambda c: add_message(c, acct, "waits", state="QUEUED"))
        pg_store.writer.call(lambda c: c.execute(
            "UPDATE messages SET claimed_at = ?, lease_owner = 'host:2:gone' WHERE ref = 'waits'",
            (NOW,)))
        assert pg_store.writer.call(
            lambda c: recover_interrupted(c, PROVIDER, NOW, dedupes_on_ref=False)) == 2
        states = dict(pg_store.readers.call(lambda c: c.execute(
            "SELECT ref, state FROM messages").fetchall()))
        assert states == {"live": "SENDING", "dead": "UNCERTAIN", "old": "UNCERTAIN",
                          "waits": "QUEUED"}
        claimed = pg_store.readers.call(lambda c: c.execute(
            "SELECT claimed_at FROM messages WHERE ref = 'waits'").fetchone()[0])
        assert claimed is None  # a dead process's reservation is given back
        # The periodic pass finds nothing more while the live process lives.
        assert pg_store.writer.call(
            lambda c: recover_orphans(c, PROVIDER, NOW, dedupes_on_ref=False)) == (0, 0)
    finally:
        alive.release()
    assert pg_store.writer.call(
        lambda c: recover_orphans(c, PROVIDER, NOW, dedupes_on_ref=False)) == (0, 1)


def test_an_import_job_held_by_a_live_process_is_not_taken(pg_store: Store[PgConnection],
                                                           pg_url: str) -> None:
    acct = pg_store.writer.call(add_account)

    def add_job(conn: Connection, key: str, owner: str | None) -> int:
        lst = one(conn.execute(
            "INSERT INTO lists (account_id, name, created_at) VALUES (?, ?, 0)"
            " ON CONFLICT (account_id, name) DO UPDATE SET created_at = 0 RETURNING id",
            (acct, "l")))[0]
        return as_int(one(conn.execute(
            "INSERT INTO import_jobs (account_id, list_id, idempotency_key, payload_sha256,"
            " region, state, total, created_at, updated_at, lease_owner)"
            " VALUES (?, ?, ?, 'x', 'TR', 'RUNNING', 10, 0, 0, ?) RETURNING id",
            (acct, lst, key, owner)))[0])

    alive = holding(pg_url, "host:1:alive")
    try:
        pg_store.writer.call(lambda c: add_job(c, "a", "host:1:alive"))
        second = pg_store.writer.call(lambda c: add_job(c, "b", "host:2:gone"))
        job = pg_store.writer.call(claim_runnable)
        assert job is not None and job.id == second  # the dead one's, not the live one's
        owner = pg_store.readers.call(lambda c: c.execute(
            "SELECT lease_owner FROM import_jobs WHERE id = ?", (second,)).fetchone()[0])
        assert owner == OWNER
    finally:
        alive.release()
