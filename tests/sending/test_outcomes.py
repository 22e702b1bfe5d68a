"""Every submit outcome through a real server and the simulator in its own process.

429 with Retry-After, 5xx, permanent refusals, a timeout after the request went out,
connection refused, and kill -9 while messages are SENDING. The simulator counts what
reached it per ref: the proof that nothing was sent twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.harness import Server, create_account, free_port, wait_for
from tests.sending.support import (
    SimulatorProcess,
    message,
    provider_config,
    send,
    wait_state,
)

SETTLED = ("SUBMITTED", "ACCEPTED", "ENROUTE", "DELIVERED", "FAILED", "EXPIRED")


@dataclass
class Rig:
    server: Server
    sim: SimulatorProcess
    api: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("outcomes")
    sim = SimulatorProcess(tmp, "--delay-min-ms", "10", "--delay-max-ms", "200").start()
    data = tmp / "data"
    data.mkdir()
    cfg = provider_config(tmp / "cfg.toml", sim.url, rate_per_s=20, concurrency=4,
                          sending="submit_timeout_s = 2.5")  # room on a busy host
    server = Server(data, config=cfg).start()
    key = create_account(data, "acme")
    try:
        with server.client(key) as api:
            yield Rig(server, sim, api)
    finally:
        server.stop()
        sim.stop()


def test_429_retry_after_is_honoured(rig: Rig) -> None:
    rig.sim.script([{"http": 429, "retry_after": "2"}])
    ref = send(rig.api, "+905321230001")
    shown = wait_state(rig.api, ref, *SETTLED)
    assert shown["attempts"] == 2
    seen = rig.sim.ref(ref)
    assert seen["received"] == 2 and seen["accepted"] == 1
    first, second = seen["received_ms"]
    assert second - first >= 2000, "sent again before Retry-After allowed"


def test_5xx_is_retried_with_backoff(rig: Rig) -> None:
    rig.sim.script([{"http": 503}, {"http": 500}])
    ref = send(rig.api, "+905321230002")
    shown = wait_state(rig.api, ref, *SETTLED, timeout=60)
    assert shown["attempts"] == 3
    seen = rig.sim.ref(ref)
    assert seen["received"] == 3 and seen["accepted"] == 1
    gaps = [b - a for a, b in zip(seen["received_ms"], seen["received_ms"][1:], strict=False)]
    assert gaps[0] >= 2000 and gaps[1] >= 4000  # 2 s, then 4 s (plus jitter)


def test_permanent_refusals_are_final_and_never_resent(rig: Rig) -> None:
    rig.sim.script([{"http": 400}, {"status": "3"}])
    http_ref = send(rig.api, "+905321230003")
    rejected = wait_state(rig.api, http_ref, "REJECTED")
    status_ref = send(rig.api, "+905321230004")
    rejected_too = wait_state(rig.api, status_ref, "REJECTED")
    assert rejected["final"] and rejected["finalised_at"]
    assert "400" in rejected["error"] and "status 3" in rejected_too["error"]
    # Later traffic flows, and the refused ones were never sent again.
    later = send(rig.api, "+905321230005")
    wait_state(rig.api, later, *SETTLED)
    assert rig.sim.ref(http_ref)["received"] == 1
    assert rig.sim.ref(status_ref)["received"] == 1
    assert message(rig.api, http_ref)["attempts"] == 1


def test_timeout_after_sending_is_uncertain_and_not_resent(rig: Rig) -> None:
    rig.sim.script([{"hang_s": 6, "silent": True}])
    ref = send(rig.api, "+905321230006")
    shown = wait_state(rig.api, ref, "UNCERTAIN")
    assert "outcome unknown" in shown["error"]
    assert not shown["final"]
    later = send(rig.api, "+905321230007")
    wait_state(rig.api, later, *SETTLED)
    wait_for(lambda: rig.sim.ref(later)["received"] == 1, 10)
    assert rig.sim.ref(ref)["received"] == 1
    assert message(rig.api, ref)["state"] == "UNCERTAIN"


def test_rate_per_s_is_respected(rig: Rig) -> None:
    numbers = "\n".join(f"+9053212{i:05d}" for i in range(60)) + "\n"
    job = rig.api.post("/api/contacts/import", json={"list": "paced", "text": numbers})
    wait_for(lambda: rig.api.get(job.json()["poll"]).json()["state"] == "DONE", 30)
    c = rig.api.post("/api/campaigns", json={"list": "paced", "body": "b"})
    poll = c.json()["poll"]
    done = wait_for(lambda: (d := rig.api.get(poll).json())["state"] == "DONE" and d, 60)
    assert done["created"] == 60
    stats = rig.sim.stats()["refs"]
    refs = [m for m in stats.values() if m["received"]]
    times = sorted(t for m in refs for t in m["received_ms"])
    times = [t for t in times if t >= times[-1] - 10_000][-60:]
    assert len(times) == 60
    # No one-second window holds more than the rate plus the burst allowance (2) plus
    # a little arrival jitter (3); without the bucket all 60 arrive within a second.
    worst = max(sum(1 for t in times if start <= t < start + 1000) for start in times)
    assert worst <= 25, f"{worst} submissions within one second at rate_per_s = 20"
    span_s = (times[-1] - times[0]) / 1000
    assert span_s >= (60 - 2) / 20 * 0.95


def test_connection_refused_is_retried_and_sent_later(tmp_path: Path) -> None:
    port = free_port()
    data = tmp_path / "data"
    data.mkdir()
    cfg = provider_config(tmp_path / "cfg.toml", f"http://127.0.0.1:{port}")
    server = Server(data, config=cfg).start()
    sim = SimulatorProcess(tmp_path, port=port)
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            ref = send(api, "+905321230008")
            waiting = wait_state(api, ref, "RETRY")
            assert "ConnectError" in waiting["error"]
            sim.start()
            shown = wait_state(api, ref, *SETTLED, timeout=30)
            # The refused tries reached nobody, so they are not counted against
            # max_attempts (test_provider_outage.py): the one that went is.
            assert shown["attempts"] == 1
            assert sim.ref(ref)["received"] == 1
    finally:
        server.stop()
        sim.stop()


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
def test_kill9_while_sending_leaves_only_the_in_flight_uncertain_never_resent(
        tmp_path: Path) -> None:
    sim = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    cfg = provider_config(tmp_path / "cfg.toml", sim.url, rate_per_s=100, concurrency=4,
                          sending="submit_timeout_s = 60.0")
    server = Server(data, config=cfg).start()
    try:
        key = create_account(data, "acme")
        sim.script([{"hang_s": 60, "silent": True}] * 4)
        numbers = [f"+90532124{i:04d}" for i in range(10)]
        with server.client(key) as api:
            # A campaign, so that all ten are reserved in one batch: four reach the
            # provider (concurrency 4) and hang there, SENDING; six wait their turn,
            # reserved but still QUEUED: nothing of them has left the process.
            job = api.post("/api/contacts/import", json={"list": "k", "text": "\n".join(numbers)})
            wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 30)
            api.post("/api/campaigns", json={"list": "k", "body": "b"}).raise_for_status()
            wait_for(lambda: sim.stats()["submissions"] == 4, 30,
                     message="four submissions in flight")
            refs = [api.get("/api/messages", params={"msisdn": n}).json()["messages"][0]["ref"]
                    for n in numbers]
            states = [message(api, r)["state"] for r in refs]
            assert sorted(states) == ["QUEUED"] * 6 + ["SENDING"] * 4
            # Read before the restart: the six left are sent as soon as it is up.
            counts = sim.stats()["refs"]
            in_flight = [r for r in refs if counts.get(r, {}).get("received", 0)]
            assert len(in_flight) == 4
        server.kill9()
        server.restart()
        with server.client(key) as api:
            after = {r: message(api, r) for r in in_flight}
            # Only what may have reached the provider is UNCERTAIN, and it is never resent.
            assert {m["state"] for m in after.values()} == {"UNCERTAIN"}
            assert all("interrupted" in m["error"] for m in after.values())
            # What never left the process is sent after the restart, once.
            rest = [r for r in refs if r not in in_flight]
            for r in rest:
                wait_state(api, r, *SETTLED)
            counts = sim.stats()["refs"]
            assert all(counts[r]["received"] == 1 for r in refs)
            assert all(message(api, r)["state"] == "UNCERTAIN" for r in in_flight)
    finally:
        server.stop()
        sim.stop()
