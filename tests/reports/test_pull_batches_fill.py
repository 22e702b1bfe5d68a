"""The puller lets a batch that is not full fill a little before asking (ROUTE-2): a
campaign's messages fall due as fast as they were sent, and asking about each few at
once spends a request on them. One puller, in this process, over a real store and the
simulator (which pushes nothing) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from appliance.config import ProviderSettings
from appliance.provider_kinds import KINDS, load_settings
from appliance.providers.registry import Providers
from appliance.reports.puller import FILL_MAX_S, Puller, PullLane, fill_wait_s, lanes_of
from appliance.runtime import Runtime
from appliance.simulator.behaviour import Behaviour
from appliance.simulator.run import SimulatorThread
from tests.harness import free_port
from tests.reports.support import add_account, add_due

PULL_AFTER_S = 5.0


@dataclass
class Rig:
    appliance: Runtime
    puller: Puller
    lane: PullLane
    sim: SimulatorThread
    account: int
    loop: asyncio.AbstractEventLoop

    def due(self, *refs: str) -> None:
        """Messages submitted long enough ago for their first ask to be due."""
        submitted = self.appliance.now_ms() - int(PULL_AFTER_S * 1000) - 1000
        self.appliance.store.writer.call(lambda c: add_due(c, self.account, refs, submitted))

    def ask(self) -> bool:
        return self.loop.run_until_complete(self.puller.ask(self.lane))

    def refs_asked(self) -> int:
        return self.sim.simulator.status_desk.refs_asked


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    port = free_port()
    sim = SimulatorThread(Behaviour(push_rate=0.0), "127.0.0.1", port).start()
    base = load_settings(env={}, overrides={"data_dir": str(tmp_path / "data")})
    provider = ProviderSettings(name="sim", kind="simulator", base_url=f"http://127.0.0.1:{port}",
                                pull_after_s=PULL_AFTER_S, pull_rate_per_s=1000, batch_max=10)
    appliance = Runtime(replace(base, providers={"sim": provider})).open()
    loop = asyncio.new_event_loop()
    try:
        [lane] = lanes_of(Providers(appliance.settings, KINDS, now_ms=appliance.now_ms), KINDS)
        puller = Puller(appliance, [lane])
        account = appliance.store.writer.call(add_account)
        yield Rig(appliance, puller, lane, sim, account, loop)
        loop.run_until_complete(lane.provider.transport.close())
    finally:
        loop.close()
        appliance.close()
        sim.stop()


def test_a_batch_not_full_waits_to_fill_then_goes_as_one_request(rig: Rig) -> None:
    assert fill_wait_s(rig.lane) == min(FILL_MAX_S, PULL_AFTER_S / 10) > 0
    rig.due("A1", "A2", "A3")
    started = time.monotonic()
    assert rig.ask() is True  # work is due: the loop looks again soon...
    assert rig.puller.requests["sim"] == 0 and rig.refs_asked() == 0  # ...but asks none yet
    assert rig.lane.free_at >= started + fill_wait_s(rig.lane) - 0.01
    rig.due("B1", "B2")  # more fall due meanwhile
    assert rig.lane.partial_since is not None
    rig.lane.partial_since -= fill_wait_s(rig.lane)  # the wait is over
    rig.lane.free_at = 0.0
    assert rig.ask() is True
    assert rig.puller.requests["sim"] == 1 and rig.refs_asked() == 5  # one request, all five


def test_a_full_batch_is_asked_at_once(rig: Rig) -> None:
    rig.due(*(f"F{i}" for i in range(rig.lane.batch)))
    assert rig.ask() is True
    assert rig.puller.requests["sim"] == 1 and rig.refs_asked() == rig.lane.batch
    assert rig.lane.partial_since is None
