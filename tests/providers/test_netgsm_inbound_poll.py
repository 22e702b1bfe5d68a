"""A real appliance server asks the fake Netgsm (written from Netgsm's client library, not
from our client) for its inbound messages, as Netgsm never pushes them: a STOP fetched
suppresses its sender, a message listed in two answers is one inbound message, and an
answer that cannot be read is kept raw and logged while the polls go on."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from appliance.simulator.netgsm_fake import NetgsmFake, RunningFake
from tests.harness import Server, create_account, db_rows, wait_for
from tests.providers.test_netgsm_server import config

pytestmark = pytest.mark.slow
STOPPER = "905321234567"


@dataclass
class Polled:
    fake: NetgsmFake
    server: Server
    data: Path


@pytest.fixture(scope="module")
def polled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Polled]:
    root = tmp_path_factory.mktemp("netgsm-inbound")
    data = root / "data"
    data.mkdir()
    fake = NetgsmFake()
    with RunningFake(fake) as running:
        create_account(data)  # a STOP from a number nobody sent to binds every account
        server = Server(data, config=config(root / "ng.toml", running.base_url,
                                            extra="inbound_poll_s = 1\n")).start()
        try:
            yield Polled(fake, server, data)
        finally:
            server.stop()


def inbound_rows(data: Path) -> list[tuple[object, ...]]:
    return db_rows(data, "SELECT msisdn, text, keyword, repeats, provider_msg_id"
                         " FROM inbound_messages WHERE provider = 'ng' ORDER BY id")


def test_a_stop_fetched_from_netgsm_suppresses_its_sender(polled: Polled) -> None:
    polled.fake.receive(STOPPER, "STOP")
    found = wait_for(lambda: db_rows(polled.data, "SELECT msisdn, source, inbound_id"
                                                  " FROM suppressions"), 30,
                     interval=0.2, message="the STOP's suppression")
    [(msisdn, source, inbound_id)] = found
    assert (msisdn, source) == ("+" + STOPPER, "inbound") and inbound_id is not None
    [(sender, text, keyword, repeats, pid)] = inbound_rows(polled.data)
    assert (sender, text, keyword, repeats) == ("+" + STOPPER, "STOP", "STOP", 0)
    assert str(pid).startswith("netgsm-")
    # Stored raw first, as a pushed inbound request is: the answer's body as it came.
    [(method, body, parsed)] = db_rows(
        polled.data, "SELECT method, body, parsed FROM raw_inbound WHERE provider = 'ng'")
    assert method == "PULL" and parsed == 1
    assert f"{STOPPER}|STOP|".encode() in bytes(body)
    # The window's end is kept where the loops keep their state.
    assert db_rows(polled.data, "SELECT key FROM appliance_state"
                                " WHERE key = 'inbound_poll.ng'") == [("inbound_poll.ng",)]


def test_a_message_listed_in_two_answers_is_one_inbound_message(polled: Polled) -> None:
    wait_for(lambda: inbound_rows(polled.data), 30, message="the STOP filed")
    asked = polled.fake.requests["receive"]
    # Each poll's window overlaps the last one's: the STOP is listed again, twice.
    wait_for(lambda: polled.fake.requests["receive"] >= asked + 2, 30, interval=0.2,
             message="two more polls")
    assert [r[:4] for r in inbound_rows(polled.data)] == [("+" + STOPPER, "STOP", "STOP", 0)]
    assert db_rows(polled.data, "SELECT count(*) FROM raw_inbound") == [(1,)]
    assert db_rows(polled.data, "SELECT count(*) FROM suppressions") == [(1,)]


def test_an_answer_that_cannot_be_read_is_kept_raw_and_the_polls_go_on(
        polled: Polled) -> None:
    page = "<html><body><h1>502 Bad Gateway</h1></body></html>"
    polled.fake.answer_next("receive", page)
    kept = wait_for(lambda: db_rows(polled.data, "SELECT body, error FROM raw_inbound"
                                                 " WHERE parsed = 0"), 30, interval=0.2,
                    message="the unreadable answer kept raw")
    [(body, error)] = kept
    assert bytes(body) == page.encode() and "unreadable line" in str(error)
    assert len(inbound_rows(polled.data)) == 1  # nothing filed from it
    wait_for(lambda: "inbound answer kept raw, not read" in polled.server.log(), 10,
             message="the log line")
    # The loop goes on, and the window it could not read is asked again.
    polled.fake.receive("905321234568", "Merhaba, RET değil")
    def two() -> list[tuple[object, ...]] | None:
        rows = inbound_rows(polled.data)
        return rows if len(rows) == 2 else None

    rows = wait_for(two, 30, interval=0.2, message="the next message fetched")
    assert rows[1][:3] == ("+905321234568", "Merhaba, RET değil", None)
    assert polled.server.proc is not None and polled.server.proc.poll() is None


def test_a_fetched_message_is_listed_and_stops_only_in_the_accounts_that_sent_to_it(
        tmp_path: Path) -> None:
    """The poll path files as a push does: two accounts, each has messaged its own number;
    a number nobody messaged is listed to nobody, and its STOP binds both."""
    data = tmp_path / "data"
    data.mkdir()
    fake = NetgsmFake()
    mine, theirs, nobodys = "905321230001", "905321230002", "905321230003"
    with RunningFake(fake) as running:
        a, b = create_account(data, "alpha"), create_account(data, "beta")
        server = Server(data, config=config(tmp_path / "ng.toml", running.base_url,
                                            extra="inbound_poll_s = 1\n")).start()
        try:
            with server.client(a) as alpha, server.client(b) as beta:
                for api, number in ((alpha, mine), (beta, theirs)):
                    assert api.post("/api/messages", json={"to": "+" + number, "body": "hi"}
                                    ).status_code == 202
                fake.receive(mine, "STOP")
                fake.receive(theirs, "Merhaba")
                fake.receive(nobodys, "DUR")
                wait_for(lambda: len(inbound_rows(data)) == 3, 30, interval=0.2,
                         message="the three messages fetched")

                def listed(api: httpx.Client) -> list[str]:
                    return [m["from"] for m in api.get("/api/inbound").json()["inbound"]]

                def stopped(api: httpx.Client) -> list[str]:
                    return sorted(e["msisdn"] for e in api.get(
                        "/api/suppressions").json()["suppressions"])

                assert listed(alpha) == ["+" + mine] and listed(beta) == ["+" + theirs]
                assert stopped(alpha) == ["+" + mine, "+" + nobodys]
                assert stopped(beta) == ["+" + nobodys]
        finally:
            server.stop()
