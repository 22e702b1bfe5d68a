"""Real processes for the puller's tests: the simulator (pushing some or none of its
receipts) and a server that asks it about the rest."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.harness import Server, create_account, db_rows, wait_for
from tests.sending.support import SimulatorProcess, provider_config

SIM_STATES = {"delivered": "DELIVERED", "failed": "FAILED", "expired": "EXPIRED"}
FINAL = ("DELIVERED", "FAILED", "EXPIRED", "REJECTED", "UNKNOWN")


def pull_config(path: Path, base_url: str, *, pull_after_s: float = 2,
                pull_rate_per_s: float = 50, extra: str = "", sending: str = "") -> Path:
    return provider_config(path, base_url, rate_per_s=500, extra=(
        f"pull_after_s = {pull_after_s}\npull_rate_per_s = {pull_rate_per_s}\n{extra}"),
        sending=sending)


class PullSimulator(SimulatorProcess):
    """The simulator with its status-query hooks."""

    def pull_script(self, steps: list[dict[str, Any]]) -> None:
        httpx.post(self.url + "/_sim/pull_script", json=steps, timeout=10).raise_for_status()


@dataclass
class Rig:
    sim: PullSimulator
    server: Server
    api: httpx.Client
    data: Path


@contextmanager
def rig(tmp: Path, *sim_flags: str, sim_port: int | None = None,
        **config: Any) -> Iterator[Rig]:
    sim = PullSimulator(tmp, "--delay-min-ms", "50", "--delay-max-ms", "400", *sim_flags,
                        port=sim_port)
    sim.start()
    data = tmp / "data"
    data.mkdir()
    server = Server(data, config=pull_config(tmp / "cfg.toml", sim.url, **config)).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            yield Rig(sim, server, api, data)
    finally:
        server.stop()
        sim.stop()


def send_many(api: httpx.Client, n: int, body: str = "hello") -> list[str]:
    refs = []
    for i in range(n):
        r = api.post("/api/messages", json={"to": f"+90532{i:07d}", "body": body})
        assert r.status_code == 202, r.text
        refs.append(r.json()["ref"])
    return refs


def states(data: Path) -> dict[str, str]:
    return {str(r): str(s) for r, s in db_rows(data, "SELECT ref, state FROM messages")}


def wait_all_final(data: Path, n: int, timeout: float = 120) -> dict[str, str]:
    last: dict[str, str] = {}

    def done() -> dict[str, str] | None:
        nonlocal last
        last = states(data)
        return last if len(last) == n and all(s in FINAL for s in last.values()) else None

    try:
        return wait_for(done, timeout, interval=0.2, message="every message final")
    except AssertionError:
        still = {ref: s for ref, s in last.items() if s not in FINAL}
        pulls = db_rows(data, "SELECT m.ref, p.pulls, p.next_at, p.last_outcome FROM"
                        " message_pulls p JOIN messages m ON m.id = p.message_id")
        raise AssertionError(f"{len(still)} of {n} not final: {still}; asks: {pulls}") from None
