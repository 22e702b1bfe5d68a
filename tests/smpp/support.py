"""A session against the built-in SMSC simulator, on 127.0.0.1, in one event loop."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from appliance.message_text.segments import segment
from appliance.simulator.smsc import SmscSimulator
from appliance.simulator.smsc_behaviour import SmscBehaviour
from appliance.smpp.addresses import destination
from appliance.smpp.deliver import Deliver
from appliance.smpp.session import SmppSession
from appliance.smpp.settings import SmppSettings
from appliance.smpp.submission import LateResponse, Segment, segments

T = TypeVar("T")


def run(coro: Coroutine[Any, Any, T], timeout: float = 20.0) -> T:
    """Run one test coroutine to the end, failing it after ``timeout`` seconds."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


async def wait_until(predicate: Callable[[], object], timeout: float = 5.0,
                     what: str = "condition") -> None:
    """Poll ``predicate`` until truthy; fail at the deadline (never a bare sleep)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def settings_for(port: int, **overrides: Any) -> SmppSettings:
    base = SmppSettings(name="smsc", host="127.0.0.1", port=port, system_id="appliance",
                        password="secret", source_addr="ACME", window=10, rate_per_s=10_000,
                        enquire_link_s=30, response_timeout_s=2.0, reconnect_min_s=0.05,
                        reconnect_max_s=0.5, bound_wait_s=2.0)
    return dataclasses.replace(base, **overrides)


def message(ref: str, text: str, msisdn: str = "+905321234567",
            source: SmppSettings | None = None) -> list[Segment]:
    src = (source or settings_for(1)).source()
    seg = segment(text)
    return segments(ref, destination(msisdn), src, seg.encoding, seg.parts)


@dataclass
class Store:
    """The appliance's side of ``on_deliver``: what it stored, and a way to make it fail."""

    stored: list[Deliver] = field(default_factory=list)
    calls: list[Deliver] = field(default_factory=list)
    fail: Callable[[Deliver], bool] = lambda d: False  # True: this call does not store
    late: list[LateResponse] = field(default_factory=list)

    async def on_deliver(self, d: Deliver) -> bool:
        self.calls.append(d)
        if self.fail(d):
            return False
        self.stored.append(d)
        return True

    async def on_late(self, late: LateResponse) -> None:
        self.late.append(late)

    def receipt_keys(self) -> list[str]:
        return [d.receipt.key for d in self.stored if d.receipt is not None]


@dataclass
class Rig:
    sim: SmscSimulator
    session: SmppSession
    store: Store

    async def submit(self, segs: list[Segment]) -> Any:
        return await self.session.submit(segs)


@asynccontextmanager
async def rig(behaviour: SmscBehaviour | None = None, *, wait_bind: bool = True,
              store: Store | None = None,
              deliver: Callable[[Deliver], Awaitable[bool]] | None = None,
              **overrides: Any) -> AsyncIterator[Rig]:
    sim = SmscSimulator(behaviour or SmscBehaviour(seed=7, delay_min_ms=0, delay_max_ms=5))
    port = await sim.start()
    store = store or Store()
    session = SmppSession(settings_for(port, **overrides), deliver or store.on_deliver,
                          on_late_response=store.on_late)
    await session.start()
    try:
        if wait_bind:
            assert await session.wait_bound(5.0), session.state()
        yield Rig(sim, session, store)
    finally:
        await session.stop(timeout_s=1.0)
        await sim.stop()
