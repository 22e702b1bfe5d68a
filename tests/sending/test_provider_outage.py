"""A provider that cannot be reached delays its messages; it never rejects them.

Connection refused, a connect timeout or an SMPP session that is not bound mean that
nothing left the process: such an attempt is given back (it does not count against
``[sending] max_attempts``) and the provider's lane holds, trying again after 1, 2,
4 ... 30 s, so an outage longer than the retry ladder (about four minutes with the
default eight attempts) costs time, not messages. A provider that answers (a 5xx, a
throttle) still counts every attempt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import httpx

from appliance.providers.base import Outcome, SubmitResult
from appliance.providers.http_transport import classify_transport_error
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.claims import Claimed, claim_due, mark_sending
from appliance.sending.outcomes import record_outcomes
from appliance.store import Store
from tests.harness import Server, create_account, free_port, wait_for
from tests.sending.support import SimulatorProcess, message, provider_config, send

NOW = 1_700_000_000_000
PROVIDER = "sim"


def queued(store: Store, ref: str) -> None:
    def unit(c: apsw.Connection) -> None:
        made: Any = c.execute("INSERT INTO accounts (name, created_at) VALUES ('acme', 0)"
                              " RETURNING id").fetchone()
        acct = int(made[0])
        insert_message(c, NewMessage(acct, PROVIDER, "+905321234567", "hi"), ref, NOW)

    store.writer.call(unit)


def attempt(store: Store, outcome: Outcome, now: int, max_attempts: int) -> Claimed:
    claimed = store.writer.call(
        lambda c: mark_sending(c, claim_due(c, PROVIDER, now, 10), now))
    assert len(claimed) == 1
    store.writer.call(lambda c: record_outcomes(
        c, PROVIDER, [(claimed[0], outcome)], now, max_attempts=max_attempts,
        dedupes_on_ref=False, map_provider_ids=False))
    return claimed[0]


def row(store: Store) -> tuple[str, int, str | None]:
    r: Any = store.readers.call(lambda c: c.execute(
        "SELECT state, attempts, error FROM messages").fetchone())
    return str(r[0]), int(r[1]), r[2]


def test_connection_errors_are_unreached_and_other_failures_are_not() -> None:
    import aiohttp

    refused = aiohttp.ClientConnectorError(
        aiohttp.client_reqrep.ConnectionKey("127.0.0.1", 9, False, True, None, None, None),
        ConnectionRefusedError(111, "refused"))
    assert classify_transport_error(refused).unreached
    assert classify_transport_error(httpx.ConnectError("refused")).unreached
    assert not classify_transport_error(httpx.PoolTimeout("busy")).unreached
    assert not classify_transport_error(httpx.ReadTimeout("slow")).unreached  # UNCERTAIN


def test_an_outage_longer_than_the_ladder_leaves_the_message_queued(store: Store) -> None:
    queued(store, "r1")
    down = Outcome(SubmitResult.RETRY, error="not sent: ConnectError", retry_after_s=0.0,
                   unreached=True)
    for i in range(10):  # many more tries than max_attempts allows
        attempt(store, down, NOW + i, max_attempts=3)
        assert row(store) == ("RETRY", 0, "not sent: ConnectError")
    # The provider is back: the message goes, its one real attempt counted.
    attempt(store, Outcome(SubmitResult.ACCEPTED, provider_msg_id="P1"), NOW + 100, 3)
    assert row(store)[:2] == ("SUBMITTED", 1)


def test_a_provider_that_answers_still_counts_every_attempt(store: Store) -> None:
    queued(store, "r1")
    busy = Outcome(SubmitResult.RETRY, error="http 503", retry_after_s=0.0)
    for i in range(3):
        attempt(store, busy, NOW + i, max_attempts=3)
    state, attempts, error = row(store)
    assert (state, attempts) == ("REJECTED", 3)
    assert error is not None and error.startswith("gave up after 3 attempts")


def unreached_tries(api: httpx.Client) -> float:
    for line in api.get("/metrics").text.splitlines():
        if line.startswith('appliance_provider_unreached_tries{provider="sim"}'):
            return float(line.split()[-1])
    raise AssertionError("no appliance_provider_unreached_tries for sim in /metrics")


def test_a_provider_down_for_longer_than_the_ladder_gets_the_message_once_it_is_back(
        tmp_path: Path) -> None:
    port = free_port()  # nothing listens there yet: connections are refused
    data = tmp_path / "data"
    data.mkdir()
    # Two attempts, 2 s apart: without the hold the message is REJECTED within ~3 s.
    cfg = provider_config(tmp_path / "cfg.toml", f"http://127.0.0.1:{port}",
                          sending="max_attempts = 2")
    server = Server(data, config=cfg).start()
    sim = SimulatorProcess(tmp_path, port=port)
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            ref = send(api, "+905321234567")
            wait_for(lambda: message(api, ref)["state"] == "RETRY", 30,
                     message="the first try refused")
            # Down for longer than two attempts' ladder would last: three tries refused
            # (after holds of 1 and 2 s), the message still waiting, none counted.
            wait_for(lambda: unreached_tries(api) >= 3, 60, interval=0.2,
                     message="three tries that could not reach the provider")
            waiting = message(api, ref)
            assert (waiting["state"], waiting["attempts"]) == ("RETRY", 0), waiting
            assert "cannot be reached" in server.log() and "gave up" not in server.log()
            sim.start()
            done = wait_for(lambda: (m := message(api, ref))["state"] == "SUBMITTED" and m,
                            45, interval=0.2, message="the message sent once the provider"
                            " is back")
            assert done["attempts"] == 1, done
            assert sim.ref(ref)["accepted"] == 1
            wait_for(lambda: "reached again" in server.log(), 10, message="the log")
            assert unreached_tries(api) == 0
    finally:
        server.stop()
        sim.stop()
