"""A RET committed while commercial messages to the number are being sent, on both
engines, from a second connection: no commercial message to that number is marked
``SENDING`` (submitted) after the RET's commit. The RET's own transaction counts the
messages marked so far; that count is, in the end, every message ever marked; the rest
are ``CANCELLED`` with ``no_consent``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.config import Settings
from appliance.optout.consents import ConsentRecord, apply_one
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.claims import claim_due, mark_sending
from appliance.store import Store
from appliance.store.connection import Connection
from appliance.store.pg import PgConnection
from appliance.store.rows import as_int
from tests.harness import wait_for

NUMBER = "+905325550000"
MESSAGES = 300
COUNT_MARKED = ("SELECT count(*) FROM messages WHERE msisdn = ? AND attempts > 0")


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[
        tuple[Store[Connection], Callable[[], Any]]]:
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else ""
    store = Store.open(Settings(data_dir=tmp_path, database_url=url, read_connections=1))

    def second() -> Any:
        if url:
            return PgConnection.connect(url)
        conn = apsw.Connection(str(tmp_path / "appliance.db"))
        conn.set_busy_timeout(30_000)
        return conn

    try:
        yield store, second
    finally:
        store.close()


def _setup(conn: Connection) -> None:
    conn.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
    apply_one(conn, 1, ConsentRecord(NUMBER, "ONAY", "BIREYSEL", "HS_WEB", 1), 1)
    for i in range(MESSAGES):
        insert_message(conn, NewMessage(1, "sim", NUMBER, f"Kampanya {i} RET mersis",
                                        message_type="commercial"), f"REF{i:05d}", 1)


def test_no_commercial_message_is_marked_sending_after_the_ret_commits(
        engine: tuple[Store[Connection], Callable[[], Any]]) -> None:
    store, second = engine
    store.writer.call(_setup)
    marked: list[int] = []

    def mark_round(conn: Connection) -> int:
        claimed = claim_due(conn, "sim", 10**12, 3)
        marked.extend(m.id for m in mark_sending(conn, claimed, 10**12, consent_gate=True))
        return len(claimed)

    def sender() -> None:
        # At a provider's pace (three messages every 10 ms), so the RET lands mid-way.
        while store.writer.call(mark_round):
            time.sleep(0.01)

    thread = threading.Thread(target=sender)
    thread.start()
    wait_for(lambda: len(marked) >= 20, 30, message="the first marks")
    other = second()
    try:
        other.execute("BEGIN IMMEDIATE" if isinstance(other, apsw.Connection) else "BEGIN")
        apply_one(other, 1, ConsentRecord(NUMBER, "RET", "BIREYSEL", "HS_MESAJ", 2), 2)
        seen = int(other.execute(COUNT_MARKED, (NUMBER,)).fetchone()[0])
        other.execute("COMMIT")
    finally:
        other.close()
    thread.join(60)
    final = store.readers.call(lambda c: c.execute(
        "SELECT state, error, count(*) FROM messages GROUP BY state, error").fetchall())
    states = {(str(s), e): as_int(n) for s, e, n in final}
    assert len(marked) == seen < MESSAGES
    assert states == {("SENDING", None): seen, ("CANCELLED", "no_consent"): MESSAGES - seen}
