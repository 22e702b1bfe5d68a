"""The puller asking an SMSC with ``query_sm`` (ROUTE-2), in this process, over a real
store and the built-in SMSC on 127.0.0.1: while the session is not bound nothing is
asked (no ask counted, no state); once bound, an id the SMSC does not know is an
attempt, its answer kept raw, the message as it was."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from appliance.config import ProviderSettings
from appliance.provider_kinds import KINDS, load_settings
from appliance.providers.registry import Providers
from appliance.reports.puller import Puller, PullLane, lanes_of
from appliance.runtime import Runtime
from appliance.simulator.smsc import SmscSimulator
from appliance.simulator.smsc_behaviour import SmscBehaviour
from appliance.smpp.query import CONTENT_TYPE, ESME_RQUERYFAIL
from appliance.smpp.transport import SmppTransport
from appliance.store.connection import Connection
from tests.reports.support import add_account, add_message

PULL_AFTER_S = 5.0


@dataclass
class Rig:
    appliance: Runtime
    puller: Puller
    lane: PullLane
    transport: SmppTransport
    sim: SmscSimulator
    loop: asyncio.AbstractEventLoop

    def rows(self, sql: str) -> list[tuple[object, ...]]:
        return [tuple(r) for r in self.appliance.store.readers.call(
            lambda c: c.execute(sql).fetchall())]


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    loop = asyncio.new_event_loop()
    sim = SmscSimulator(SmscBehaviour(seed=3, silent_rate=1.0))
    port = loop.run_until_complete(sim.start())
    base = load_settings(env={}, overrides={"data_dir": str(tmp_path / "data")})
    provider = ProviderSettings(
        name="smsc", kind="smpp", pull=True, pull_after_s=PULL_AFTER_S, pull_rate_per_s=1000,
        options={"host": "127.0.0.1", "port": port, "system_id": "appliance",
                 "password": "secret", "source_addr": "ACME", "response_timeout_s": 5.0})
    appliance = Runtime(replace(base, providers={"smsc": provider})).open()
    try:
        [lane] = lanes_of(Providers(appliance.settings, KINDS, now_ms=appliance.now_ms), KINDS)
        transport = lane.provider.transport
        assert isinstance(transport, SmppTransport)
        account = appliance.store.writer.call(add_account)
        submitted = appliance.now_ms() - int(PULL_AFTER_S * 1000) - 1000

        def add(c: Connection) -> None:
            message_id = add_message(c, account, "Q1", submitted_at=submitted,
                                     created_at=submitted, provider="smsc",
                                     provider_msg_id="4242")
            c.execute("INSERT INTO message_parts (message_id, part, provider_msg_id, state,"
                      " updated_at) VALUES (?, 1, '4242', 'SUBMITTED', 0)", (message_id,))

        appliance.store.writer.call(add)
        yield Rig(appliance, Puller(appliance, [lane]), lane, transport, sim, loop)
        loop.run_until_complete(transport.close())
    finally:
        loop.run_until_complete(sim.stop())
        loop.close()
        appliance.close()


def test_nothing_is_asked_unbound_and_an_unknown_id_is_an_attempt(rig: Rig) -> None:
    # Not bound: the due message is not asked about, and no ask is counted.
    assert rig.loop.run_until_complete(rig.puller.ask(rig.lane)) is False
    assert rig.rows("SELECT count(*) FROM message_pulls") == [(0,)]
    assert not rig.sim.book.asked
    rig.loop.run_until_complete(rig.transport.start())
    assert rig.loop.run_until_complete(rig.transport.session.wait_bound(5))
    assert rig.loop.run_until_complete(rig.puller.ask(rig.lane)) is True
    assert dict(rig.sim.book.asked) == {"4242": 1}  # the id as written, from ACME
    assert rig.rows("SELECT pulls, last_outcome, next_at IS NOT NULL FROM message_pulls"
                    ) == [(1, "unknown_id", 1)]
    assert rig.rows("SELECT state FROM messages") == [("SUBMITTED",)]
    assert rig.rows("SELECT count(*) FROM report_inbox") == [(0,)]
    raw = rig.rows("SELECT method, content_type, query, parsed, body FROM raw_reports")
    assert [r[:4] for r in raw] == [("PULL", CONTENT_TYPE, "message_id=4242&part=1", 1)]
    body = raw[0][4]
    assert isinstance(body, bytes) and int.from_bytes(body[8:12], "big") == ESME_RQUERYFAIL
    assert rig.puller.counts[("smsc", "unknown_id")] == 1
