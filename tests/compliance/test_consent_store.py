"""The consent store on both engines: the record in force is the greatest by
(consented_at, RET over ONAY, BIREYSEL over TACIR, source), whatever the order the
records arrive in and however often; each record is kept once in the history."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from appliance.config import Settings
from appliance.optout import consents
from appliance.optout.consents import ConsentRecord
from appliance.store import Store
from appliance.store.connection import Connection


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store[Connection]]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else ""
    s = Store.open(Settings(data_dir=tmp_path, database_url=url, read_connections=1))
    s.writer.call(lambda c: c.execute(
        "INSERT INTO accounts (name, created_at) VALUES ('acme', 0)"))
    try:
        yield s
    finally:
        s.close()


def test_any_order_any_repeat_leaves_the_same_record_in_force(
        store: Store[Connection]) -> None:
    n = "+905321112233"
    records = [ConsentRecord(n, "ONAY", "BIREYSEL", "HS_WEB", 1000),
               ConsentRecord(n, "RET", "BIREYSEL", "HS_MESAJ", 2000),
               ConsentRecord(n, "ONAY", "TACIR", "HS_WEB", 2000)]
    for i, order in enumerate(itertools.permutations(records)):
        account = i + 1
        name = f"a{account}"
        if account > 1:
            store.writer.call(partial(_add_account, name=name))
        first = store.writer.call(partial(consents.apply_many, account_id=account,
                                          records=list(order) * 2, now_ms=5))
        assert first.added == 1 and first.added + first.updated + first.unchanged == 6
        found = store.readers.call(partial(consents.get, account_id=account, msisdn=n))
        assert found is not None and (found.status, found.consented_at) == ("RET", 2000)
        assert not found.allows_commercial
        kept = store.readers.call(partial(consents.history, account_id=account, msisdn=n))
        assert len(kept) == 3


def _add_account(conn: Connection, name: str) -> None:
    conn.execute("INSERT INTO accounts (name, created_at) VALUES (?, 0)", (name,))
