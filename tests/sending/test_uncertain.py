"""OPS-6 and OPS-1 end to end: UNCERTAIN only for what was really in flight, resolved by
an operator; a single message ahead of a campaign. Real servers, real ``kill -9``, and
the provider simulator in its own process counting what reached it per ref."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import Server, create_account, db_rows, wait_for
from tests.sending.support import SimulatorProcess, message, provider_config, send, wait_state
from tests.sending.support_campaigns import campaign, import_list, show, submissions

CONCURRENCY = 8


def states_by_ref(data: Path, campaign_id: int) -> dict[str, str]:
    return {str(r): str(s) for r, s in db_rows(
        data, "SELECT ref, state FROM messages WHERE campaign_id = ?", (campaign_id,))}


@pytest.mark.slow
def test_kill9_at_full_rate_five_times_leaves_at_most_the_in_flight_uncertain(
        tmp_path: Path) -> None:
    sim = SimulatorProcess(tmp_path, "--silent-rate", "1").start()
    data = tmp_path / "data"
    data.mkdir()
    cfg = provider_config(tmp_path / "cfg.toml", sim.url, rate_per_s=2000,
                          concurrency=CONCURRENCY)
    server = Server(data, config=cfg).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            import_list(api, "full", 3000)
            cid = campaign(api, "full")["campaignId"]
        uncertain = 0
        for round_ in range(5):
            goal = submissions(sim) + 150
            wait_for(lambda: submissions(sim) >= goal, 60,  # noqa: B023 - used at once
                     message=f"sending under way (round {round_})")
            server.kill9()
            server.restart()
            # The sender recovers before its first claim: once something is sent again,
            # what the crash left SENDING has been decided.
            after = submissions(sim)
            wait_for(lambda: submissions(sim) > after, 60,  # noqa: B023 - used at once
                     message="sending again after the restart")
            with server.client(key) as api:
                now = show(api, cid)["uncertain"]
            assert now - uncertain <= CONCURRENCY, \
                f"kill {round_ + 1}: {now - uncertain} became UNCERTAIN"
            uncertain = now
        with server.client(key) as api:
            wait_for(lambda: show(api, cid)["unsent"] == 0, 60, message="the rest to be sent")
            final = show(api, cid)
        assert final["state"] == "RUNNING" and final["needs_decision"] == (uncertain > 0)
        received = {r: s["received"] for r, s in sim.stats()["refs"].items()}
        states = states_by_ref(data, cid)
        assert len(states) == 3000
        assert max(received.values()) == 1, "a message was submitted twice"
        for ref, state in states.items():
            if state == "UNCERTAIN":
                assert received.get(ref, 0) <= 1
            else:  # never received before a kill: sent after the restart, once
                assert state == "SUBMITTED" and received.get(ref) == 1, (ref, state)
    finally:
        server.stop()
        sim.stop()


@dataclass
class Rig:
    server: Server
    sim: SimulatorProcess
    api: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("resolve")
    sim = SimulatorProcess(tmp, "--silent-rate", "1").start()
    data = tmp / "data"
    data.mkdir()
    cfg = provider_config(tmp / "cfg.toml", sim.url, rate_per_s=50, concurrency=4,
                          sending="submit_timeout_s = 1.0")
    server = Server(data, config=cfg).start()
    key = create_account(data, "acme")
    try:
        with server.client(key) as api:
            yield Rig(server, sim, api)
    finally:
        server.stop()
        sim.stop()


def uncertain_message(rig: Rig, to: str) -> str:
    rig.sim.script([{"hang_s": 3, "silent": True}])
    ref = send(rig.api, to)
    wait_state(rig.api, ref, "UNCERTAIN")
    return ref


def resolve(rig: Rig, ref: str, action: str) -> httpx.Response:
    return rig.api.post(f"/api/messages/{ref}/resolve", json={"action": action})


def test_resend_warns_submits_exactly_once_more_and_is_audited(rig: Rig) -> None:
    ref = uncertain_message(rig, "+905421110001")
    shown = message(rig.api, ref)
    assert shown["resolve"]["url"] == f"/api/messages/{ref}/resolve"
    assert "may already have" in shown["resolve"]["warning"]
    answer = resolve(rig, ref, "resend")
    assert answer.status_code == 200, answer.text
    assert "may already have" in answer.json()["warning"]
    done = wait_state(rig.api, ref, "SUBMITTED")
    wait_for(lambda: rig.sim.ref(ref)["received"] == 2, 10)
    [audit] = done["actions"]
    assert audit["action"] == "resend" and audit["from"] == "UNCERTAIN"
    assert audit["to"] == "RETRY" and audit["by"].startswith("API key apl_")
    assert done["attempts"] == 2
    # once more: nothing to decide, and nothing else is sent
    again = resolve(rig, ref, "resend")
    assert again.status_code == 409 and again.json()["error"] == "not_uncertain"
    later = send(rig.api, "+905421110009")
    wait_state(rig.api, later, "SUBMITTED")
    assert rig.sim.ref(ref)["received"] == 2


def test_mark_failed_is_final_never_sent_and_audited(rig: Rig) -> None:
    ref = uncertain_message(rig, "+905421110002")
    answer = resolve(rig, ref, "mark_failed")
    assert answer.status_code == 200, answer.text
    shown = answer.json()
    assert shown["state"] == "FAILED" and shown["final"] and shown["finalised_at"]
    assert "marked failed by API key" in shown["error"]
    assert [(a["action"], a["to"]) for a in shown["actions"]] == [("mark_failed", "FAILED")]
    assert resolve(rig, ref, "resend").status_code == 409
    later = send(rig.api, "+905421110008")
    wait_state(rig.api, later, "SUBMITTED")
    assert rig.sim.ref(ref)["received"] == 1
    assert message(rig.api, ref)["state"] == "FAILED"


def test_bad_resolve_requests_are_refused(rig: Rig) -> None:
    ref = send(rig.api, "+905421110003")
    wait_state(rig.api, ref, "SUBMITTED")
    assert resolve(rig, ref, "resend").status_code == 409
    assert resolve(rig, ref, "delete").status_code == 422
    assert resolve(rig, "0" * 26, "resend").status_code == 404
    assert rig.api.post("/api/campaigns/424242/resolve",
                        json={"action": "resend"}).status_code == 404


def test_a_campaign_with_uncertain_messages_is_not_done_until_they_are_resolved(
        rig: Rig) -> None:
    import_list(rig.api, "unsure", 6, "+90543")
    rig.sim.script([{"hang_s": 3, "silent": True}] * 2)
    cid = campaign(rig.api, "unsure")["campaignId"]
    held = wait_for(lambda: (c := show(rig.api, cid))["unsent"] == 0 and c["uncertain"] == 2
                    and c, 30, message="two uncertain, nothing left to send")
    assert held["state"] == "RUNNING" and held["needs_decision"] is True
    answer = rig.api.post(f"/api/campaigns/{cid}/resolve", json={"action": "mark_failed"})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert body["resolved"] == 2 and body["state"] == "DONE" and body["uncertain"] == 0
    assert body["counts"] == {"FAILED": 2, "SUBMITTED": 4}


@pytest.mark.slow
@pytest.mark.serial  # times itself: run alone (Makefile)
def test_a_single_message_is_submitted_within_2s_during_a_20000_message_campaign(
        tmp_path: Path) -> None:
    sim = SimulatorProcess(tmp_path, "--silent-rate", "1").start()
    data = tmp_path / "data"
    data.mkdir()
    cfg = provider_config(tmp_path / "cfg.toml", sim.url, rate_per_s=200, concurrency=8)
    server = Server(data, config=cfg).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            import_list(api, "big", 20_000)
            cid = campaign(api, "big")["campaignId"]
            wait_for(lambda: submissions(sim) >= 600, 60, message="the campaign under way")
            for i in range(3):
                answer = api.post("/api/messages", json={"to": f"+90555000000{i}",
                                                         "body": "your code is 1234"})
                accepted = time.monotonic()
                assert answer.status_code == 202 and answer.json()["priority"] == "high"
                ref = answer.json()["ref"]
                wait_state(api, ref, "SUBMITTED", timeout=10)
                took = time.monotonic() - accepted
                assert took <= 2.0, f"the single message took {took:.2f} s behind the campaign"
            progress = show(api, cid)
            assert progress["state"] == "RUNNING" and progress["unsent"] > 10_000
            rate = progress["messages_per_s"]
            assert 0 < rate <= 260  # at most the provider's rate (plus its burst)
            assert progress["eta_s"] == pytest.approx(progress["unsent"] / rate, rel=0.05)
    finally:
        server.stop()
        sim.stop()
