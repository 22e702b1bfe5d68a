"""The kept counts and the webhook outbox on PostgreSQL (``store/pg_triggers.py``): the
same figures as SQLite's triggers keep, the same events, in the same transaction; no
increment lost between two processes, and no deadlock on the count rows; ``migrate
--to`` copies the counts without counting them again.

A real PostgreSQL (the ``pg_url`` schema per test) beside a real SQLite file.
"""

from __future__ import annotations

import functools
import random
import re
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import apsw
import pytest

from appliance.providers.base import SubmitResult
from appliance.reports.cutoff import cut_off
from appliance.sending.claims import claim_due
from appliance.store import Store, rollups
from appliance.store.connection import Connection
from appliance.store.pg import PgConnection
from appliance.store.pg_schema import migrate
from appliance.store.pg_triggers import (
    ALWAYS_TRIGGERS,
    WEBHOOK_TRIGGERS,
    install,
    installed,
    webhooks_installed,
)
from appliance.store.rows import as_int
from appliance.store.schema import migrate as migrate_sqlite
from appliance.store.schema import open_connection
from appliance.store.transfer import copy_to_postgresql
from appliance.webhooks.outbox import due_events, mark_delivered, set_receiver
from tests.harness import wait_for
from tests.reports.test_rollups import Run, check, one
from tests.webhooks.test_outbox import accept, attempt, report

NOW = 1_700_000_000_000
URL = "http://127.0.0.1:9/hooks"


def fold(conn: Connection, limit: int) -> int:
    return rollups.fold(cast(Any, conn), limit)


# -- the real write units on a PostgreSQL store -------------------------------------------------

class PgRun(Run):
    def fold(self) -> None:
        limit = self.rng.choice([1, 7, 5000])
        self.write(lambda c: fold(c, limit))


@pytest.mark.parametrize("seed", [1, 2])
def test_kept_counts_equal_a_full_recount_after_every_write_on_postgresql(
        pg_store: Store[PgConnection], seed: int) -> None:
    """tests/reports/test_rollups.py's random runs, through the same units, on PostgreSQL."""
    run = PgRun(cast(Any, pg_store), seed)
    for _ in range(120):
        run.step()
        pg_store.readers.call(lambda c: check(cast(Any, c), run.rng, run.now, run.accounts))
    states = pg_store.readers.call(lambda c: rollups.message_states(cast(Any, c)))
    assert len(states) >= 5  # the run reached many states
    reports = pg_store.readers.call(lambda c: rollups.counts(cast(Any, c), "report_inbox"))
    assert sum(reports.values()) > 10 and pg_store.readers.call(
        lambda c: rollups.counts(cast(Any, c), "raw_reports"))
    pg_store.writer.call(lambda c: fold(c, 10**6))
    pg_store.readers.call(lambda c: check(cast(Any, c), run.rng, run.now, run.accounts))


# -- every trigger, SQLite and PostgreSQL side by side --------------------------------

@pytest.fixture
def lite(tmp_path: Path) -> Iterator[apsw.Connection]:
    path = str(tmp_path / "appliance.db")
    migrate_sqlite(path)
    conn = open_connection(path)
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'acme', 0)")
    try:
        yield conn
    finally:
        conn.close()


@pytest.fixture
def pg(pg_url: str) -> Iterator[PgConnection]:
    conn = PgConnection.connect(pg_url)
    migrate(conn)
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'acme', 0)")
    try:
        yield conn
    finally:
        conn.close()


def kept(conn: Connection) -> tuple[list[Any], list[Any]]:
    """The kept counts as readers see them: each key's rows (a PostgreSQL session's
    stripes) summed; a key counted once stays, at 0, as SQLite leaves it."""
    summed: dict[tuple[str, str], int] = {}
    for name, key, n in conn.execute("SELECT name, key, n FROM row_counts"):
        at = (str(name), rollups.key_of(str(key)))
        summed[at] = summed.get(at, 0) + as_int(n)
    return ([(*k, n) for k, n in sorted(summed.items())],
            [tuple(r) for r in conn.execute("SELECT account_id, minute, state, n"
                                            " FROM message_counts ORDER BY 1, 2, 3")])


def in_unit(conn: Connection, fn: Callable[[Any], Any]) -> Any:
    """``fn`` in a transaction of its own, as the writer runs a unit."""
    conn.execute("BEGIN")
    try:
        value = fn(conn)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return value


_OUTCOMES = [None, None, "APPLIED", "STALE"]
_STATES = ["QUEUED", "SUBMITTED", "DELIVERED", "FAILED"]


class Writes:
    """Random inserts, updates of the counted column (and of others), deletes of one or
    many rows, on every counted table, each as the same SQL on both backends."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.next_id = 0

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def sql(self, ids: dict[str, list[int]]) -> list[tuple[str, tuple[Any, ...]]]:
        rng = self.rng
        table = rng.choice(["report_inbox", "raw_reports", "raw_inbound", "suppressions",
                            "inbound_messages", "messages"])
        have = ids[table]
        kind = rng.choices(["insert", "update", "other", "delete", "delete_many"],
                           weights=[5, 3, 1, 1, 1])[0]
        if kind != "insert" and not have:
            kind = "insert"
        pick = rng.choice(have) if have else 0
        if kind == "delete":
            return [(f"DELETE FROM {table} WHERE id = ?", (pick,))]
        if kind == "delete_many":
            return [(f"DELETE FROM {table} WHERE id % 3 = ?", (rng.randrange(3),))]
        if kind == "other":
            column = {"report_inbox": "attempts", "raw_reports": "error",
                      "raw_inbound": "error", "suppressions": "reason",
                      "inbound_messages": "repeats", "messages": "attempts"}[table]
            value: Any = "e" if column in ("error", "reason") else rng.randrange(5)
            return [(f"UPDATE {table} SET {column} = ? WHERE id = ?", (value, pick))]
        new = self.new_id()
        if table == "report_inbox":
            outcome = rng.choice(_OUTCOMES)
            if kind == "update":
                return [("UPDATE report_inbox SET outcome = ? WHERE id = ?", (outcome, pick))]
            return [("INSERT INTO report_inbox (id, provider, ref, status, reported_at, state,"
                     " received_at, next_try_at, outcome) VALUES (?, 'gw', ?, 'ok', 0,"
                     " 'DELIVERED', 0, 0, ?)", (new, f"r{new}", outcome))]
        if table in ("raw_reports", "raw_inbound"):
            parsed = rng.choice([0, 1, 1, 2])
            if kind == "update":
                return [(f"UPDATE {table} SET parsed = ? WHERE id = ?", (parsed, pick))]
            return [(f"INSERT INTO {table} (id, provider, method, content_type, query, body,"
                     " received_at, parsed) VALUES (?, 'gw', 'POST', 'x', '', ?, 0, ?)",
                     (new, b"{}", parsed))]
        if table == "suppressions":
            source = rng.choice(["api", "console", "import", "inbound"])
            if kind == "update":
                return [("UPDATE suppressions SET source = ? WHERE id = ?", (source, pick))]
            return [("INSERT INTO suppressions (id, account_id, msisdn, source, created_at)"
                     " VALUES (?, 1, ?, ?, 0)", (new, f"+90532{new:07d}", source))]
        if table == "inbound_messages":
            keyword = rng.choice([None, "STOP", "STOPALL"])
            if kind == "update":
                return [("UPDATE inbound_messages SET keyword = ? WHERE id = ?", (keyword, pick))]
            return [("INSERT INTO inbound_messages (id, provider, provider_msg_id, msisdn,"
                     " to_number, text, received_at, keyword) VALUES (?, 'gw', ?, '+1', 'A',"
                     " 'hi', 0, ?)", (new, f"mo{new}", keyword))]
        state = rng.choice(_STATES)
        if kind == "update":
            return [("UPDATE messages SET state = ? WHERE id = ?", (state, pick))]
        created = NOW + rng.randrange(5) * 60_000 + rng.randrange(60_000)
        return [("INSERT INTO messages (id, ref, account_id, provider, msisdn, body, state,"
                 " next_attempt_at, created_at, updated_at) VALUES (?, ?, 1, 'gw', '+1', 'hi',"
                 " ?, 0, ?, ?)", (new, f"m{new}", state, created, created))]


def write(conn: Connection, statements: list[tuple[str, tuple[Any, ...]]], undo: bool,
          folding: bool) -> None:
    if undo:
        conn.execute("SAVEPOINT unit")
    for sql, params in statements:
        conn.execute(sql, params)
    if undo:
        conn.execute("ROLLBACK TO unit")
        conn.execute("RELEASE unit")
    if folding:  # all of them: a part would be different rows on each backend
        fold(conn, 10**6)


COUNTED = ("report_inbox", "raw_reports", "raw_inbound", "suppressions", "inbound_messages",
           "messages")


def ids_of(conn: Connection) -> dict[str, list[int]]:
    return {t: [as_int(r[0]) for r in conn.execute(f"SELECT id FROM {t} ORDER BY id")]
            for t in COUNTED}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_every_count_trigger_keeps_what_sqlite_keeps(
        lite: apsw.Connection, pg: PgConnection, seed: int) -> None:
    """The same random writes on both: after each, the count tables are the same row for
    row (a count at 0 stays, as SQLite leaves it) and equal a full recount. Some units
    are rolled back to a savepoint (their counts with them), and the fold runs between."""
    writes = Writes(seed)
    backends: list[Connection] = [lite, pg]
    for step in range(300):
        statements = writes.sql(ids_of(lite))
        undo = writes.rng.random() < 0.1
        folding = writes.rng.random() < 0.15
        for conn in backends:
            in_unit(conn, functools.partial(write, statements=statements, undo=undo,
                                            folding=folding))
        assert kept(pg) == kept(lite), (step, statements)
        assert rollups.drift(cast(Any, pg)) == [], (step, statements)
    assert kept(lite)[1], "some messages were counted (and then deleted)"
    counted_keys = {(name, key) for name, key, _n in kept(pg)[0]}
    assert {("report_inbox", "WAITING"), ("report_inbox", "APPLIED"), ("raw_reports", "parsed"),
            ("raw_inbound", "quarantined"), ("suppressions", "console"),
            ("inbound_messages", "stop"), ("inbound_messages", "other")} <= counted_keys


# -- the webhook outbox ----------------------------------------------------------------

def outbox(conn: Connection) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in conn.execute(
        "SELECT message_id, ref, state, previous, campaign_id, at, next_try_at, attempts,"
        " last_error, delivered_at FROM webhook_outbox ORDER BY id")]


def story(conn: Any) -> None:
    """Accepts, sends, reports, retries, a cut-off, a cancel at claim, a delivered head,
    one rolled back accept: each a unit (its own transaction)."""
    in_unit(conn, lambda c: accept(c, "d1"))
    in_unit(conn, lambda c: accept(c, "u1", to="+905321230002"))
    in_unit(conn, lambda c: attempt(c, SubmitResult.ACCEPTED, NOW + 10, "P1"))  # d1, u1
    in_unit(conn, lambda c: report(c, "d1", "ENROUTE", NOW + 20))
    in_unit(conn, lambda c: report(c, "d1", "ENROUTE", NOW + 21))  # a repeat: no change
    in_unit(conn, lambda c: report(c, "d1", "DELIVERED", NOW + 30))
    in_unit(conn, lambda c: accept(c, "r1", NOW + 40, to="+905321230003"))
    in_unit(conn, lambda c: attempt(c, SubmitResult.RETRY, NOW + 41))
    in_unit(conn, lambda c: c.execute("UPDATE messages SET next_attempt_at = 0"
                                      " WHERE ref = 'r1'"))
    in_unit(conn, lambda c: attempt(c, SubmitResult.RETRY, NOW + 42))  # RETRY, RETRY: none
    in_unit(conn, lambda c: c.execute("UPDATE messages SET next_attempt_at = 0"
                                      " WHERE ref = 'r1'"))
    in_unit(conn, lambda c: attempt(c, SubmitResult.UNCERTAIN, NOW + 43))
    # Delivered heads: the next event of the message becomes the head.
    due, _ = in_unit(conn, lambda c: due_events(c, NOW + 50, 2))
    for event in due:
        in_unit(conn, functools.partial(mark_delivered, event=event, now_ms=NOW + 51))
    u1 = int(one(conn, "SELECT id FROM messages WHERE ref = 'u1'")[0])
    in_unit(conn, lambda c: cut_off(c, [u1], NOW + 60))
    in_unit(conn, lambda c: accept(c, "sup", NOW + 70, to="+905321230009"))
    in_unit(conn, lambda c: c.execute(
        "INSERT INTO suppressions (account_id, msisdn, source, created_at)"
        " VALUES (1, '+905321230009', 'api', 0)"))
    assert in_unit(conn, lambda c: claim_due(c, "sim", NOW + 71, 10)) == []  # CANCELLED
    conn.execute("BEGIN")
    accept(conn, "gone", NOW + 80, to="+905321230010")
    conn.execute("ROLLBACK")  # its event goes with it


def test_the_outbox_gets_the_same_events_as_on_sqlite(
        lite: apsw.Connection, pg: PgConnection) -> None:
    set_receiver(lite, URL, NOW)
    in_unit(pg, lambda c: install(c, webhooks=True))
    story(lite)
    story(pg)
    events = outbox(pg)
    assert events == outbox(lite)
    assert [(e[1], e[3], e[2]) for e in events if e[1] == "d1"] == [
        ("d1", None, "QUEUED"), ("d1", "QUEUED", "SUBMITTED"), ("d1", "SUBMITTED", "ENROUTE"),
        ("d1", "ENROUTE", "DELIVERED")]
    assert ("sup", "QUEUED", "CANCELLED") in [(e[1], e[3], e[2]) for e in events]
    assert any(e[6] is None for e in events)  # some wait behind their message's head
    ids = [str(r[0]) for r in pg.execute("SELECT event_id FROM webhook_outbox")]
    assert all(re.fullmatch(r"evt_[0-9a-f]{32}", i) for i in ids) and len(set(ids)) == len(ids)
    # The state change's own transaction: the outbox row is there exactly when it is.
    pg.execute("BEGIN")
    accept(cast(Any, pg), "late", NOW + 90, to="+905321230011")
    assert pg.execute("SELECT count(*) FROM webhook_outbox WHERE ref = 'late'").fetchone() == (1,)
    pg.execute("ROLLBACK")
    assert pg.execute("SELECT count(*) FROM webhook_outbox WHERE ref = 'late'").fetchone() == (0,)


def test_the_outbox_triggers_exist_only_while_webhooks_are_on(pg: PgConnection) -> None:
    assert not webhooks_installed(pg)  # a new database: off
    in_unit(pg, lambda c: accept(c, "off1"))
    assert outbox(pg) == []
    install(pg, webhooks=True)
    assert webhooks_installed(pg)
    in_unit(pg, lambda c: accept(c, "on1", NOW + 1, to="+905321230002"))
    migrate(pg)  # every start migrates: the outbox's triggers stay as they were
    assert webhooks_installed(pg)
    install(pg, webhooks=False)
    in_unit(pg, lambda c: attempt(c, SubmitResult.ACCEPTED, NOW + 2, "P2"))
    assert [(e[1], e[2]) for e in outbox(pg)] == [("on1", "QUEUED")]
    assert not set(installed(pg)) & set(WEBHOOK_TRIGGERS)
    migrate(pg)
    assert not webhooks_installed(pg)
    # The counts are kept (and ended messages' keys cleared) whether webhooks are on or off.
    assert set(installed(pg)) == {t.name for t in ALWAYS_TRIGGERS}


def test_installing_again_changes_nothing_and_a_changed_definition_is_replaced(
        pg: PgConnection) -> None:
    def oids() -> dict[str, int]:
        return {str(n): int(o) for n, o in pg.execute(
            "SELECT tgname, oid FROM pg_trigger WHERE NOT tgisinternal")}

    install(pg, webhooks=True)
    before = oids()
    install(pg, webhooks=True)
    assert oids() == before  # no DDL: no table locked at a start that changes nothing
    pg.execute("COMMENT ON TRIGGER suppressions_counted_insert ON suppressions IS 'older'")
    install(pg, webhooks=True)
    after = oids()
    assert after["suppressions_counted_insert"] != before["suppressions_counted_insert"]
    assert installed(pg)["suppressions_counted_insert"].startswith("appliance ")


# -- two processes -----------------------------------------------------------------------

def connect(url: str) -> PgConnection:
    conn = PgConnection.connect(url)
    conn.execute("SET lock_timeout = 20000")  # a wait that never ends fails the test
    return conn


def test_two_connections_counting_at_once_lose_no_increment(pg_url: str) -> None:
    first = connect(pg_url)
    migrate(first)
    errors: list[BaseException] = []
    workers = 4
    rounds = 40

    def work(me: int) -> None:
        conn = connect(pg_url)
        try:
            for i in range(rounds):
                conn.execute("BEGIN")
                for j in range(3):
                    conn.execute(
                        "INSERT INTO report_inbox (provider, ref, status, reported_at, state,"
                        " received_at, next_try_at) VALUES ('gw', ?, 'ok', 0, 'DELIVERED', 0, 0)",
                        (f"w{me}-{i}-{j}",))
                conn.execute("UPDATE report_inbox SET outcome = 'APPLIED' WHERE ref = ?",
                             (f"w{me}-{i}-0",))
                conn.execute("INSERT INTO raw_reports (provider, method, content_type, query,"
                             " body, received_at, parsed) VALUES ('gw', 'POST', 'x', '', ?, 0, 1)",
                             (b"{}",))
                conn.execute("COMMIT")
        except BaseException as exc:
            errors.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    try:
        assert errors == []
        assert rollups.counts(cast(Any, first), "report_inbox") == {
            "WAITING": workers * rounds * 2, "APPLIED": workers * rounds}
        assert rollups.counts(cast(Any, first), "raw_reports") == {"parsed": workers * rounds}
        assert rollups.drift(cast(Any, first)) == []
    finally:
        first.close()


def test_two_transactions_changing_counts_in_opposite_orders_do_not_wait(
        pg_url: str) -> None:
    """A: the reconciler's WAITING -> APPLIED, then a raw callback. B: a raw callback,
    then a report filed. On shared count rows that is a lock cycle (and with one lock
    over every count, B waits for A's commit: two processes' writers took turns). Each
    session counts into rows of its own: B commits while A is still open, and every
    count is exact once both have."""
    a, b = connect(pg_url), connect(pg_url)
    migrate(a)
    ins_report = ("INSERT INTO report_inbox (provider, ref, status, reported_at, state,"
                  " received_at, next_try_at) VALUES ('gw', ?, 'ok', 0, 'DELIVERED', 0, 0)")
    ins_raw = ("INSERT INTO raw_reports (provider, method, content_type, query, body,"
               " received_at, parsed) VALUES ('gw', 'POST', 'x', '', ?, 0, 1)")
    a.execute(ins_report, ("first",))
    a.execute(ins_raw, (b"{}",))
    try:
        a.execute("BEGIN")
        a.execute("UPDATE report_inbox SET outcome = 'APPLIED' WHERE ref = 'first'")
        b.execute("SET lock_timeout = 2000")  # a wait for A fails B here
        b.execute("BEGIN")
        b.execute(ins_raw, (b"{}",))
        b.execute(ins_report, ("second",))
        b.execute("COMMIT")
        a.execute(ins_raw, (b"{}",))
        a.execute("COMMIT")
        assert rollups.counts(cast(Any, a), "report_inbox") == {"WAITING": 1, "APPLIED": 1}
        assert rollups.counts(cast(Any, a), "raw_reports") == {"parsed": 3}
        assert rollups.drift(cast(Any, a)) == []
    finally:
        a.close()
        b.close()


def test_a_session_s_count_rows_are_folded_once_it_has_ended(pg_url: str) -> None:
    """The rows a session counted into stay while it lives (it may be counting now) and
    are folded into their keys' own rows once it has ended: readers see the same
    figures before and after, and the table keeps a row a key and live session."""
    a, b = connect(pg_url), connect(pg_url)
    migrate(a)
    ins_raw = ("INSERT INTO raw_reports (provider, method, content_type, query, body,"
               " received_at, parsed) VALUES ('gw', 'POST', 'x', '', ?, 0, ?)")
    try:
        for parsed in (1, 1, 0):
            b.execute(ins_raw, (b"{}", parsed))
        a.execute(ins_raw, (b"{}", 1))
        assert in_unit(a, rollups.fold_stripes) == 0  # both sessions live: nothing moves
        b.close()
        wait_for(lambda: in_unit(a, rollups.fold_stripes) > 0, 20,
                 message="the ended session's rows folded")
        assert rollups.counts(cast(Any, a), "raw_reports") == {"parsed": 3, "quarantined": 1}
        keys = sorted(str(k) for (k,) in a.execute(
            "SELECT key FROM row_counts WHERE name = 'raw_reports'"))
        pid = int(a.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert keys == ["parsed", f"parsed#{pid}", "quarantined"]
        assert rollups.drift(cast(Any, a)) == []
    finally:
        a.close()
        b.close()


# -- migrate --to -------------------------------------------------------------------------

@pytest.mark.parametrize("webhooks", [True, False])
def test_migrate_copies_the_counts_without_counting_them_again(
        tmp_path: Path, pg_url: str, webhooks: bool) -> None:
    path = tmp_path / "appliance.db"
    migrate_sqlite(str(path))
    lite = open_connection(str(path))
    try:
        lite.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'acme', 0)")
        if webhooks:
            set_receiver(lite, URL, NOW)
        writes = Writes(7)
        for _ in range(200):
            for sql, params in writes.sql(ids_of(lite)):
                lite.execute(sql, params)
        rollups.fold(lite, 10**6)
        # Some messages counted under a state they have left since.
        lite.execute("UPDATE messages SET state = 'FAILED' WHERE id % 2 = 0")
        assert rollups.drift(lite) == []
        lite_kept = kept(lite)
        lite_events = outbox(lite)
        assert bool(lite_events) == webhooks
    finally:
        lite.close()
    copy_to_postgresql(path, pg_url)
    pg = PgConnection.connect(pg_url)
    try:
        assert kept(pg) == lite_kept
        assert rollups.drift(cast(Any, pg)) == []
        assert outbox(pg) == lite_events  # copied, none written by the copy
        assert webhooks_installed(pg) == webhooks
        # The triggers are there after the copy: the next write is counted.
        waiting = rollups.counts(cast(Any, pg), "report_inbox").get("WAITING", 0)
        pg.execute("INSERT INTO report_inbox (provider, ref, status, reported_at, state,"
                   " received_at, next_try_at) VALUES ('gw', 'after', 'ok', 0, 'DELIVERED',"
                   " 0, 0)")
        assert rollups.counts(cast(Any, pg), "report_inbox")["WAITING"] == waiting + 1
        in_unit(pg, lambda c: fold(c, 10**6))
        pg.execute("DELETE FROM messages")
        assert rollups.drift(cast(Any, pg)) == []
        assert pg.execute("SELECT count(*) FROM message_counts").fetchone() == (0,)
    finally:
        pg.close()


def test_an_event_written_while_its_messages_head_is_delivered_becomes_the_next_head(
        pg: PgConnection, pg_url: str) -> None:
    """Two writers at once (two processes, each with its writer): one marks a
    message's head event delivered while the other is changing the message, and so
    writing its next event. Whichever commits first, that next event becomes the head;
    it never waits forever behind an event already delivered."""
    in_unit(pg, lambda c: install(c, webhooks=True))
    in_unit(pg, lambda c: set_receiver(c, URL, NOW))
    in_unit(pg, lambda c: accept(c, "race", NOW))
    [head] = due_events(pg, NOW + 1, 10)[0]
    assert head.state == "QUEUED"
    changer, deliverer = PgConnection.connect(pg_url), PgConnection.connect(pg_url)
    try:
        # The sender's unit: the message is submitted, and its SUBMITTED event written
        # behind the undelivered head, in a transaction still open.
        changer.execute("BEGIN")
        attempt(cast(Any, changer), SubmitResult.ACCEPTED, NOW + 2, "P1")
        # Meanwhile the deliverer marks the head delivered.
        backend = int(deliverer.execute("SELECT pg_backend_pid()").fetchone()[0])
        finished = threading.Event()

        def deliver() -> None:
            in_unit(deliverer, lambda c: mark_delivered(c, head, NOW + 3))
            finished.set()

        worker = threading.Thread(target=deliver)
        worker.start()

        def waiting_or_done() -> bool:
            row = pg.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = ?",
                             (backend,)).fetchone()
            return finished.is_set() or (row is not None and row[0] == "Lock")

        wait_for(waiting_or_done, 10, message="the deliverer to wait or finish")
        changer.execute("COMMIT")
        worker.join(10)
        assert finished.is_set()
    finally:
        changer.close()
        deliverer.close()
    assert [e.state for e in due_events(pg, NOW + 10, 10)[0]] == ["SUBMITTED"]
