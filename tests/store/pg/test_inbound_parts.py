"""An inbound message in parts, its parts filed at once by two processes (OPS-4 on
SCALE-1): the message is whole once every part is in, whichever process filed the last,
and its STOP is honoured."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from appliance.inbound.store import InboundResult, InboundRules, file_message
from appliance.optout.keywords import Keywords
from appliance.providers.base import InboundMessage
from appliance.store.pg import PgConnection
from tests.store.pg.paused import PausedAfter, UnitThread

RULES = InboundRules(Keywords(["STOP"]), "TR")
SENDER = "+905321000007"


def part(n: int, text: str) -> InboundMessage:
    return InboundMessage(msisdn=SENDER, to="4545", text=text, provider_msg_id=f"p{n}",
                          concat_ref="77", part=n, parts=3)


def test_two_parts_filed_at_once_by_two_processes_make_the_message_whole(
        two: tuple[PgConnection, PgConnection]) -> None:
    a, b = two
    a.execute("BEGIN")
    file_message(a, RULES, "sim", part(1, "ST"), raw_id=1, now_ms=1)
    a.execute("COMMIT")
    paused = PausedAfter(a, "SELECT part, text FROM inbound_parts")

    def filing(n: int, text: str) -> Callable[[Any], InboundResult]:
        return lambda c: file_message(c, RULES, "sim", part(n, text), raw_id=n, now_ms=n)

    first = UnitThread(paused, filing(2, "O")).start()
    assert paused.reached.wait(10)  # A has read parts 1 and 2, not yet written
    second = UnitThread(b, filing(3, "P")).start()
    assert second.waits(), "B waits for A's unit before it reads the parts"
    paused.go.set()
    assert first.finish().value.keyword is None  # two of three, when A filed its part
    assert second.finish().value.keyword == "STOP"
    row = a.execute("SELECT text, parts_received, keyword FROM inbound_messages").fetchone()
    assert tuple(row) == ("STOP", 3, "STOP")
    stopped = a.execute("SELECT msisdn, source FROM suppressions").fetchall()
    assert [tuple(r) for r in stopped] == [(SENDER, "inbound")]
