"""Callbacks stored together (both ports' unit, ``store_batch``, and the
reconciler's, ``settle_due``): each callback answered as when taken one by one, one bad
callback never costing the others, and on PostgreSQL a few round trips for a whole
batch rather than a few for each callback (DLR-2, DLR-4, SCALE-2)."""

from __future__ import annotations

from typing import Any

import pytest

from appliance.config import Settings
from appliance.reports.apply import Receipt, settle_due
from appliance.reports.inbox import RawCallback, due_rows
from appliance.store import Store, dialect
from appliance.store.connection import Connection
from appliance.store.pg import PgConnection
from appliance.store.pg_store import open_postgresql
from appliance.web import callback_store
from appliance.web.callback_store import Callback, store_batch
from appliance.web.callback_store import _store_together as store_together
from tests.reports.support import PROVIDER, add_account, add_message, inbox_rows, message, one
from tests.reports.support import report as a_report

NOW = 1_700_000_000_000
# Past a 64-bit integer: neither engine can file a report that was sent at this time,
# so its callback's interpretation fails (as a report that breaks a rule would).
UNSTORABLE_AT = 2**64


def callback(n: int, reports: list[Any], parse_error: str | None = None) -> Callback:
    raw = RawCallback(PROVIDER, "POST", "application/json", "", b'{"n": %d}' % n)
    return (n, PROVIDER, raw, reports, parse_error, None, [], None)


def store(s: Store[Any], batch: list[Callback]) -> list[Receipt | None]:
    return s.writer.call(lambda c: store_batch(c, batch, NOW, Settings()))


stored = store  # for a test whose ``store`` is the fixture


@pytest.mark.parametrize("with_bad", [False, True], ids=["together", "one-bad"])
def test_each_callback_of_a_batch_is_stored_as_alone_and_a_bad_one_costs_no_other(
        store_on_both: Store[Any], with_bad: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stored together (``with_bad`` False) or, as one of them cannot be filed, one by
    one after the try together was undone: each answered as it would be alone."""
    def messages(c: Connection) -> None:
        account = add_account(c)
        add_message(c, account, "known")
        add_message(c, account, "twice")
        add_message(c, account, "queued", state="QUEUED", submitted_at=None)
        add_message(c, account, "by-id", provider_msg_id="p-1")
    store_on_both.writer.call(messages)
    batch = [
        callback(1, [a_report("unknown", "DELIVERED", 1000)]),
        callback(2, [a_report("known", "DELIVERED", 2000)]),
        callback(3, [a_report("bad", "DELIVERED", UNSTORABLE_AT)]),
        callback(4, [], parse_error="not JSON"),
        callback(5, [a_report("twice", "ENROUTE", 3000), a_report("twice", "DELIVERED", 4000)]),
        callback(6, [a_report("queued", "DELIVERED", 5000)]),
        callback(7, [a_report("", "DELIVERED", 6000, provider_msg_id="p-1")]),
    ]
    tries: list[bool] = []  # whether each try together stored the batch

    def together(*args: Any) -> Any:
        stored = store_together(*args)
        tries.append(stored is not None)
        return stored
    monkeypatch.setattr(callback_store, "_store_together", together)
    receipts = store(store_on_both, batch if with_bad else batch[:2] + batch[3:])
    assert tries == [not with_bad]
    assert all(r is not None for r in receipts)  # each answered 2xx: on disk
    answered = [r for r in receipts if r is not None]
    if not with_bad:
        answered.insert(2, answered[0])  # in its place, to read the others by name
    unknown, known, bad, unparsed, twice, queued, by_id = answered
    assert (unknown.filed, unknown.outcomes, unknown.waiting) == (1, {"WAIT": 1}, ["unknown"])
    assert (known.filed, known.outcomes, known.error) == (1, {"APPLY": 1}, None)
    if with_bad:
        assert bad.filed == 0 and bad.error is not None
    assert unparsed.error == "not JSON" and unparsed.filed == 0
    assert (twice.filed, twice.outcomes) == (2, {"APPLY": 2})
    assert (queued.outcomes, queued.waiting) == ({"WAIT": 1}, ["queued"])
    assert by_id.outcomes == {"APPLY": 1}

    def read(c: Connection) -> dict[str, Any]:
        return {
            "raw": one(c, "SELECT count(*) FROM raw_reports")[0],
            "bad": one(c, "SELECT parsed, error IS NOT NULL FROM raw_reports WHERE id = ?",
                       bad.raw_id) if with_bad else None,
            "unparsed": one(c, "SELECT parsed FROM raw_reports WHERE id = ?",
                            unparsed.raw_id)[0],
            "unknown": [(r["attempts"], r["next_try_at"], r["applied_at"], r["raw_id"])
                        for r in inbox_rows(c, "unknown")],
            "known": message(c, "known")["state"],
            "twice": message(c, "twice")["state"],
            "queued": [(r["attempts"], r["next_try_at"]) for r in inbox_rows(c, "queued")],
            "by-id": message(c, "by-id")["state"],
            "filed": one(c, "SELECT count(*) FROM report_inbox")[0],
        }
    got = store_on_both.readers.call(read)
    assert got["raw"] == (7 if with_bad else 6)
    if with_bad:
        assert got["bad"] == (0, 1)  # kept raw, marked unparsed with the reason
    assert got["unparsed"] == 0
    assert got["unknown"] == [(1, NOW + 1000, None, unknown.raw_id)]  # waiting, next in 1 s
    assert (got["known"], got["twice"], got["by-id"]) == ("DELIVERED",) * 3
    assert got["queued"] == [(1, NOW + 1000)]  # not sent yet: waits as an unknown one
    assert got["filed"] == 6


def test_a_repeat_in_the_same_batch_is_counted_as_a_repeat(store_on_both: Store[Any]) -> None:
    same = a_report("again", "DELIVERED", 1000)
    receipts = store(store_on_both, [callback(1, [same]), callback(2, [same])])
    assert [(r.filed, r.repeats) for r in receipts if r is not None] == [(1, 0), (0, 1)]
    rows = store_on_both.readers.call(lambda c: inbox_rows(c, "again"))
    assert [(r["repeats"], r["attempts"]) for r in rows] == [(1, 1)]


def round_trips(s: Store[Any], unit: Any) -> tuple[int, Any]:
    def counted(c: PgConnection) -> tuple[int, Any]:
        before = c.round_trips
        value = unit(c)
        return c.round_trips - before, value
    return s.writer.call(counted)


def test_on_postgresql_a_batch_of_unknown_reports_costs_three_round_trips(pg_url: str) -> None:
    s = open_postgresql(pg_url, read_connections=1)
    try:
        batch = [callback(i, [a_report(f"u-{i}", "DELIVERED", 1000 + i)]) for i in range(20)]
        trips, receipts = round_trips(s, lambda c: store_batch(c, batch, NOW, Settings()))
        # The raw rows, their reports' messages looked up, the reports filed (deferred
        # once, as their messages are not there): one statement each for the whole
        # batch, its savepoints sent with them.
        assert trips == 3
        assert [r.outcomes for r in receipts] == [{"WAIT": 1}] * 20
        # The reconciler's next try of all twenty: the due rows, the messages, the deferral.
        trips, counts = round_trips(
            s, lambda c: settle_due(c, due_rows(c, NOW + 1000, 500, claim=True), NOW + 1000))
        assert (trips, counts) == (3, {"WAIT": 20})
        attempts = s.readers.call(lambda c: one(
            c, "SELECT min(attempts), max(attempts), min(next_try_at) FROM report_inbox"))
        assert attempts == (2, 2, NOW + 1000 + 5000)
    finally:
        s.close()


def test_a_flood_of_batches_of_many_sizes_is_parsed_once_a_size(store: Store[Any]) -> None:
    """A flood's batches come in many sizes (1 to 32 here, as 32 connections give): once
    each size has been seen, none of the unit's statements is parsed again (each a hit
    in the writer's statement cache), and a batch past ``rows_a_statement`` is written
    in statements of that many rows, each report naming its own raw row, in order."""
    serial = iter(range(10**6))

    def batches(sizes: range) -> dict[str, int]:
        for size in sizes:
            batch = [callback(n, [a_report(f"ghost-{n}", "DELIVERED", 1000)])
                     for n in (next(serial) for _ in range(size))]
            stored(store, batch)
        return dict(store.writer.call(lambda c: c.cache_stats()))

    first = batches(range(1, 33))
    again = batches(range(1, 33))
    assert again["misses"] == first["misses"], (first, again)
    assert again["hits"] - first["hits"] >= 3 * 32  # raw rows, messages, reports
    most = dialect.SQLITE.rows_a_statement
    batches(range(2 * most + 7, 2 * most + 8))
    rows = store.readers.call(lambda c: c.execute(
        "SELECT i.ref FROM raw_reports r JOIN report_inbox i ON i.raw_id = r.id"
        " ORDER BY r.id").fetchall())
    assert [ref for (ref,) in rows] == [f"ghost-{n}" for n in range(next(serial))]
