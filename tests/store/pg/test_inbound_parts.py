"""An inbound message in parts, its parts filed at once by two processes (OPS-4 on
SCALE-1): the message is whole once every part is in, whichever process filed the last,
and its STOP is honoured."""

from __future__ import annotations

import threading
from typing import Any

from appliance.inbound.store import InboundResult, InboundRules, file_message
from appliance.optout.keywords import Keywords
from appliance.providers.base import InboundMessage
from appliance.store import pg_schema
from appliance.store.pg import PgConnection
from tests.store.pg.paused import PausedAfter

RULES = InboundRules(Keywords(["STOP"]), "TR")
SENDER = "+905321000007"


def part(n: int, text: str) -> InboundMessage:
    return InboundMessage(msisdn=SENDER, to="4545", text=text, provider_msg_id=f"p{n}",
                          concat_ref="77", part=n, parts=3)


def test_two_parts_filed_at_once_by_two_processes_make_the_message_whole(
        pg_url: str) -> None:
    a, b = PgConnection.connect(pg_url), PgConnection.connect(pg_url)
    try:
        pg_schema.migrate(a)
        a.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)")
        a.execute("BEGIN")
        file_message(a, RULES, "sim", part(1, "ST"), raw_id=1, now_ms=1)
        a.execute("COMMIT")
        paused = PausedAfter(a, "SELECT part, text FROM inbound_parts")
        results: dict[str, InboundResult] = {}

        def file(name: str, conn: Any, n: int, text: str) -> None:
            conn.execute("BEGIN")
            results[name] = file_message(conn, RULES, "sim", part(n, text), raw_id=n,
                                         now_ms=n)
            conn.execute("COMMIT")

        first = threading.Thread(target=file, args=("a", paused, 2, "O"))
        first.start()
        assert paused.reached.wait(10)  # A has read parts 1 and 2, not yet written
        second = threading.Thread(target=file, args=("b", b, 3, "P"))
        second.start()
        second.join(0.5)
        assert second.is_alive(), "B waits for A's unit before it reads the parts"
        paused.go.set()
        first.join(10)
        second.join(10)
        assert not first.is_alive() and not second.is_alive()
        assert results["a"].keyword is None and results["b"].keyword == "STOP"
        row = a.execute("SELECT text, parts_received, keyword FROM inbound_messages").fetchone()
        assert tuple(row) == ("STOP", 3, "STOP")
        stopped = a.execute("SELECT msisdn, source FROM suppressions").fetchall()
        assert [tuple(r) for r in stopped] == [(SENDER, "inbound")]
    finally:
        a.close()
        b.close()
