"""Helpers for campaign tests over a real server and the provider simulator."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx

from tests.harness import wait_for
from tests.sending.support import SimulatorProcess


def import_list(api: httpx.Client, name: str, count: int, prefix: str = "+90532",
                names: Sequence[str | None] | None = None) -> list[str]:
    """Import ``count`` numbers (with a name each when given) into list ``name``."""
    width = 12 - len(prefix.lstrip("+"))  # Turkish mobiles: +90 5XX XXX XX XX
    numbers = [f"{prefix}{i:0{width}d}" for i in range(count)]
    lines = [n if names is None or names[i] is None else f"{n},{names[i]}"
             for i, n in enumerate(numbers)]
    job = api.post("/api/contacts/import", json={"list": name, "text": "\n".join(lines)})
    assert job.status_code == 202, job.text
    done = wait_for(lambda: (j := api.get(job.json()["poll"]).json())["state"] == "DONE" and j,
                    120, message=f"import of {name}")
    assert done["inserted"] == count, done
    return numbers


def campaign(api: httpx.Client, list_name: str, body: str = "hello", **extra: Any
             ) -> dict[str, Any]:
    r = api.post("/api/campaigns", json={"list": list_name, "body": body, **extra})
    assert r.status_code == 202, r.text
    data: dict[str, Any] = r.json()
    return data


def show(api: httpx.Client, campaign_id: int) -> dict[str, Any]:
    r = api.get(f"/api/campaigns/{campaign_id}")
    assert r.status_code == 200, r.text
    data: dict[str, Any] = r.json()
    return data


def sent(c: dict[str, Any]) -> int:
    """Messages of the campaign that went out (or were answered)."""
    return int(c["created"]) - sum(int(c["counts"].get(s, 0))
                                   for s in ("QUEUED", "SENDING", "RETRY", "CANCELLED"))


def submissions(sim: SimulatorProcess) -> int:
    return int(sim.stats()["submissions"])


def received_times(sim: SimulatorProcess) -> list[int]:
    """When each submission reached the simulator (its wall clock, ms)."""
    return sorted(t for r in sim.stats()["refs"].values() for t in r["received_ms"])


def assert_quiet(sim: SimulatorProcess, seconds: float, what: str) -> None:
    """Nothing reaches the provider for ``seconds``: observed, not waited on."""
    before = submissions(sim)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        now = submissions(sim)
        assert now == before, f"{now - before} submissions {what}"
        time.sleep(0.1)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
