"""The runtime and the parts built over it (``server.assemble``), on a real SQLite file.

Every part is built at the start, once, into one frozen set; the loops are woken
through the handles the scheduler returned, and there is no waking by name.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from appliance.provider_kinds import load_settings
from appliance.runtime import Runtime
from appliance.scheduler import Scheduler
from appliance.server import assemble
from appliance.web.parts import Parts

# None when intake_port is unset. The webhook delivery is always built: an account may
# be given a receiver of its own while the server runs (TEAM-2).
OPTIONAL = {"report_intake"}


def test_assemble_builds_every_part_at_once_into_a_frozen_set(data_dir: Path) -> None:
    settings = load_settings(env={}, overrides={"data_dir": str(data_dir)})
    runtime = Runtime(settings).open()
    try:
        parts = assemble(runtime)
        for field in dataclasses.fields(Parts):
            value = getattr(parts, field.name)
            assert (value is None) == (field.name in OPTIONAL), field.name
        assert parts.runtime is runtime
        with pytest.raises(dataclasses.FrozenInstanceError):
            parts.sender = parts.sender  # type: ignore[misc]
        # The sign-in guard is made here, not by the first sign-in form.
        assert parts.sign_in_guard.appliance is runtime
    finally:
        runtime.close()


def test_a_loop_is_woken_through_its_handle_and_never_by_a_name() -> None:
    async def run() -> int:
        scheduler = Scheduler()
        steps: list[float] = []

        async def step() -> float | None:
            steps.append(asyncio.get_running_loop().time())
            return None  # then wait the interval: an hour

        wake = scheduler.add("slow", step, interval_s=3600.0)
        assert wake.name == "slow"
        scheduler.start()
        deadline = asyncio.get_running_loop().time() + 10
        while len(steps) < 1 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        wake()
        while len(steps) < 2 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.01)
        await scheduler.stop(timeout=5)
        return len(steps)

    assert asyncio.run(run()) >= 2
    assert not hasattr(Scheduler, "wake")  # no name to misspell


def test_a_loop_name_is_taken_once() -> None:
    scheduler = Scheduler()

    async def step() -> float | None:
        return None

    scheduler.add("one", step, interval_s=1.0)
    with pytest.raises(ValueError, match="already added"):
        scheduler.add("one", step, interval_s=1.0)
