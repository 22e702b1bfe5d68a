"""The puller's loop runs the status pulls and the inbound poll (Netgsm's) as two halves
of one step (ROUTE-2): a half that fails is logged and never skips the other, the
inbound poll keeps its own pace, and the loop sleeps until the earlier half is due.
One puller, in this process, over a real store and the simulator on 127.0.0.1."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from appliance.config import ProviderSettings
from appliance.inbound.poll import InboundPoller, Polled, PollLane
from appliance.inbound.poll import lanes_of as inbound_lanes_of
from appliance.provider_kinds import KINDS, load_settings
from appliance.providers.registry import Providers
from appliance.reports.puller import POLL_S, Puller, lanes_of
from appliance.runtime import Runtime
from appliance.simulator.behaviour import Behaviour
from appliance.simulator.run import SimulatorThread
from tests.harness import free_port
from tests.reports.support import add_account, add_due

PULL_AFTER_S = 5.0
INBOUND_POLL_S = 60.0


class Inbound(InboundPoller):
    """The poll with its asks counted, failing as a store that refuses the answer would
    when ``failing``."""

    failing = False
    calls = 0

    async def ask(self, lane: PollLane) -> Polled:
        self.calls += 1
        if self.failing:
            raise RuntimeError("the answer could not be stored")
        return Polled(None, None)


class FailingPulls(Puller):
    async def pull_step(self) -> float:
        raise RuntimeError("the due messages could not be read")


@dataclass
class Rig:
    appliance: Runtime
    providers: Providers
    sim: SimulatorThread
    account: int
    loop: asyncio.AbstractEventLoop

    def due(self, *refs: str) -> None:
        """Messages submitted long enough ago for their first ask to be due."""
        submitted = self.appliance.now_ms() - int(PULL_AFTER_S * 1000) - 1000
        self.appliance.store.writer.call(lambda c: add_due(c, self.account, refs, submitted))

    def inbound(self) -> Inbound:
        return Inbound(self.appliance, inbound_lanes_of(self.providers))

    def step(self, puller: Puller) -> float | None:
        return self.loop.run_until_complete(puller.step())


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    port = free_port()
    sim = SimulatorThread(Behaviour(push_rate=0.0), "127.0.0.1", port).start()
    base = load_settings(env={}, overrides={"data_dir": str(tmp_path / "data")})
    pulled = ProviderSettings(name="sim", kind="simulator",
                              base_url=f"http://127.0.0.1:{port}", pull_after_s=PULL_AFTER_S,
                              pull_rate_per_s=1000, batch_max=1)
    polled = ProviderSettings(name="ng", kind="netgsm", base_url="http://127.0.0.1:9",
                              sender="BASLIGIM", pull=False, inbound_poll_s=INBOUND_POLL_S,
                              usercode="8503001234", password="api-pass-1")
    appliance = Runtime(replace(base, providers={"sim": pulled, "ng": polled})).open()
    loop = asyncio.new_event_loop()
    providers = Providers(appliance.settings, KINDS, now_ms=appliance.now_ms)
    try:
        yield Rig(appliance, providers, sim, appliance.store.writer.call(add_account), loop)
        for provider in providers.all().values():
            loop.run_until_complete(provider.transport.close())
    finally:
        loop.close()
        appliance.close()
        sim.stop()


def test_a_failing_inbound_poll_never_skips_the_status_pulls_and_waits_its_turn(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    inbound = rig.inbound()
    inbound.failing = True
    puller = Puller(rig.appliance, lanes_of(rig.providers, KINDS), inbound)
    assert sorted(puller.lanes) == ["sim"] and sorted(inbound.lanes) == ["ng"]
    rig.due("A1")
    with caplog.at_level(logging.ERROR):
        wait = rig.step(puller)
    assert puller.requests["sim"] == 1 and inbound.calls == 1
    assert "inbound poll of provider ng failed" in caplog.text
    assert wait is not None and wait <= POLL_S  # the next look is the pulls'
    # The next step asks about the next message; the failed poll waits inbound_poll_s,
    # not asked again at every step.
    rig.due("A2")
    rig.step(puller)
    assert puller.requests["sim"] == 2 and inbound.calls == 1
    assert inbound.lanes["ng"].due_at > time.monotonic() + INBOUND_POLL_S - 5


def test_failing_status_pulls_never_skip_the_inbound_poll(
        rig: Rig, caplog: pytest.LogCaptureFixture) -> None:
    inbound = rig.inbound()
    puller = FailingPulls(rig.appliance, lanes_of(rig.providers, KINDS), inbound)
    with caplog.at_level(logging.ERROR):
        wait = rig.step(puller)
    assert inbound.calls == 1
    assert "status pulls failed" in caplog.text
    assert wait == POLL_S  # the pulls look again soon, whatever the poll's pace


def test_with_nothing_to_pull_the_loop_sleeps_until_the_inbound_poll_is_due(
        rig: Rig) -> None:
    inbound = rig.inbound()
    puller = Puller(rig.appliance, [], inbound)
    wait = rig.step(puller)
    assert inbound.calls == 1
    assert wait is not None and INBOUND_POLL_S - 5 < wait <= INBOUND_POLL_S
    assert rig.step(puller) is not None and inbound.calls == 1
