"""The puller (ROUTE-2) against a real simulator and a real server: a provider that
never pushes reaches full coverage by pulls; one that pushes half has the other half
pulled, nothing applied twice; a pulled report and the same one pushed are one fact."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.simulator.behaviour import Behaviour
from appliance.simulator.vonage_format import receipt_params
from tests.harness import db_rows, free_port, wait_for
from tests.reports.pull_support import SIM_STATES, rig, send_many, states, wait_all_final
from tests.sending.support import wait_state

N = 40


def test_a_provider_that_never_pushes_reaches_full_coverage_by_pulls(tmp_path: Path) -> None:
    with rig(tmp_path, "--no-push", "--seed", "3") as r:
        refs = send_many(r.api, N)
        final = wait_all_final(r.data, N)
        stats = r.sim.stats()
        assert stats["reports_pushed"] == 0
        sim_refs = stats["refs"]
        # Every message has the simulator's own final word, found by asking.
        assert {ref: SIM_STATES[sim_refs[ref]["final"]] for ref in refs} == final
        # A few status requests a message at most: the simulator knows the answer
        # before the first ask, and a request asks about many messages.
        assert all(1 <= sim_refs[ref]["pulls"] <= 2 for ref in refs), \
            [sim_refs[ref]["pulls"] for ref in refs]
        assert stats["pull_requests"] <= N
        m = r.api.get(f"/api/messages/{refs[0]}").json()
        assert m["pulls"] >= 1
        assert m["history"] and all(h["source"] == "pull" for h in m["history"])
        # Each answer kept raw first, like a callback, and nothing left waiting.
        raw = db_rows(r.data, "SELECT count(*) FROM raw_reports WHERE method = 'PULL'")
        assert raw[0][0] >= 1
        waiting = db_rows(r.data, "SELECT count(*) FROM report_inbox WHERE applied_at IS NULL")
        assert waiting[0][0] == 0
        outcomes = db_rows(r.data, "SELECT DISTINCT last_outcome FROM message_pulls")
        assert {o for (o,) in outcomes} == {"final"}
        metrics = r.api.get("/metrics").text
        assert 'appliance_report_pulls_total{outcome="final",provider="sim"} 40.0' in metrics


def test_a_provider_that_pushes_half_has_the_other_half_pulled(tmp_path: Path) -> None:
    with rig(tmp_path, "--push-rate", "0.5", "--seed", "11") as r:
        refs = send_many(r.api, N)
        final = wait_all_final(r.data, N)
        sim_refs = r.sim.stats()["refs"]
        assert {ref: SIM_STATES[sim_refs[ref]["final"]] for ref in refs} == final
        pushed = [ref for ref in refs if sim_refs[ref]["pushed"]]
        pulled = [ref for ref in refs if not sim_refs[ref]["pushed"]]
        assert pushed and pulled
        by_source = {(ref, source) for ref, source in db_rows(
            r.data, "SELECT ref, source FROM report_inbox")}
        assert {ref for ref, s in by_source if s == "pull"} >= set(pulled)
        # One fact per part and status: never a second row for the same report, and a
        # report applied once (the other is at most a repeat or kept as STALE).
        rows = db_rows(r.data, "SELECT ref, provider_msg_id, status, count(*),"
                       " sum(CASE WHEN outcome = 'APPLIED' THEN 1 ELSE 0 END)"
                       " FROM report_inbox GROUP BY ref, provider_msg_id, status")
        assert all(count == 1 and applied == 1 for _, _, _, count, applied in rows), rows
        # The pushed half is final by its push, at most once asked about (a push slower
        # than pull_after_s, on a busy host, meets the ask: still one fact, above).
        assert all(sim_refs[ref]["pulls"] <= 1 for ref in pushed), \
            [(ref, sim_refs[ref]["pulls"]) for ref in pushed]
        assert states(r.data) == final
        wait_for(lambda: r.sim.stats()["pending_reports"] == 0, 30)


def test_a_pulled_answer_older_than_a_pushed_one_never_overwrites_it(tmp_path: Path) -> None:
    with rig(tmp_path, "--no-push", pull_after_s=3600) as r:
        ref = send_many(r.api, 1)[0]
        wait_state(r.api, ref, "SUBMITTED")
        msg_id = r.sim.ref(ref)["message_id"]
        now = time.time()
        older = {k: v for k, v in receipt_params(
            Behaviour(), "905320000000", ref, msg_id, "failed", now - 600).items() if k != "sig"}
        # The status request is answered late, with an older report; the push of a
        # newer one lands while it is on its way.
        r.sim.pull_script([{"hang_s": 2, "items": [{"client-ref": ref, "state": "reported",
                                                    "receipts": [older]}]}])
        asked = r.api.post(f"/api/messages/{ref}/pull")
        assert asked.status_code == 202 and asked.json() == {"ref": ref, "pull": "queued"}
        wait_for(lambda: r.sim.stats()["pull_requests"] == 1, 30)
        pushed = receipt_params(Behaviour(), "905320000000", ref, msg_id, "delivered", now)
        assert httpx.post(r.server.url + "/callbacks/sim", data=pushed).status_code == 200
        wait_state(r.api, ref, "DELIVERED")

        def pulled() -> dict[str, Any] | None:
            m = r.api.get(f"/api/messages/{ref}").json()
            return m if any(h["source"] == "pull" for h in m["history"]) else None

        m = wait_for(pulled, 30, message="the pulled answer in the history")
        assert m["state"] == "DELIVERED" and m["pulls"] == 1
        entry = next(h for h in m["history"] if h["source"] == "pull")
        assert (entry["status"], entry["outcome"]) == ("failed", "STALE")
        assert [h["source"] for h in m["history"]] == ["callback", "pull"]


def test_a_pull_racing_a_push_stores_one_fact(tmp_path: Path) -> None:
    with rig(tmp_path, "--no-push", pull_after_s=3600) as r:
        refs = send_many(r.api, 20)
        wait_for(lambda: set(states(r.data).values()) == {"SUBMITTED"}, 30)
        with ThreadPoolExecutor(2) as pool:
            asks = pool.submit(lambda: [r.api.post(f"/api/messages/{ref}/pull").status_code
                                        for ref in refs])
            pushes = pool.submit(lambda: r.sim.push_now(refs))
            assert pushes.result()["taken"] == 20
            assert set(asks.result()) <= {202, 409}  # 409: final by the push already
        final = wait_all_final(r.data, 20)
        sim_refs = r.sim.stats()["refs"]
        assert {ref: SIM_STATES[sim_refs[ref]["final"]] for ref in refs} == final
        rows = db_rows(r.data, "SELECT ref, provider_msg_id, status, count(*),"
                       " sum(CASE WHEN outcome = 'APPLIED' THEN 1 ELSE 0 END)"
                       " FROM report_inbox GROUP BY ref, provider_msg_id, status")
        assert len(rows) == 20
        assert all(count == 1 and applied == 1 for *_, count, applied in rows), rows


@pytest.mark.slow
def test_pulls_stop_at_the_cut_off_with_backoff_and_a_last_ask(tmp_path: Path) -> None:
    # A 12.6 s delivery window: asks at 0.5 s, 2 s (+1.5), 6.5 s (+4.5), each a little
    # late (the provider's pull rate, its answer), and 11.3 s (90% of the window, the
    # last), then the cut-off closes it UNKNOWN; the simulator never learns the fate.
    with rig(tmp_path, "--no-push", "--silent-rate", "1", pull_after_s=0.5,
             sending="delivery_window_hours = 0.0035") as r:
        ref = send_many(r.api, 1)[0]
        m = wait_state(r.api, ref, "UNKNOWN", timeout=90)
        assert m["pulls"] == 4
        assert r.sim.ref(ref)["pulls"] == 4
        rows = db_rows(r.data, "SELECT next_at, last_outcome FROM message_pulls")
        assert rows == [(None, "pending")]
        assert all(h["source"] == "pull" for h in m["history"])  # none: pending is no state
        assert m["history"] == []


def test_pull_refused_where_nothing_can_be_asked(tmp_path: Path) -> None:
    extra = """
[providers.nopull]
kind = "simulator"
base_url = "{url}"
pull = false

[providers.plain]
kind = "vonage"
base_url = "{url}"
api_key = "simulator"
api_secret = "simulator-api-secret"
signature_secret = "simulator-signature-secret"

[providers.dead]
kind = "simulator"
base_url = "http://127.0.0.1:9"
"""
    sim_port = free_port()
    url = f"http://127.0.0.1:{sim_port}"
    with rig(tmp_path, "--no-push", sim_port=sim_port, pull_after_s=3600,
             extra=extra.format(url=url)) as r:
        def send(provider: str) -> str:
            made = r.api.post("/api/messages", json={"to": "+905320000001", "body": "x",
                                                     "provider": provider})
            assert made.status_code == 202, made.text
            ref: str = made.json()["ref"]
            return ref

        def refused(ref: str) -> str:
            asked = r.api.post(f"/api/messages/{ref}/pull")
            assert asked.status_code == 409, asked.text
            assert asked.json()["error"] == "not_pullable"
            message: str = asked.json()["message"]
            return message

        assert "pull = false" in refused(wait_state(r.api, send("nopull"), "SUBMITTED")["ref"])
        assert "status API" in refused(wait_state(r.api, send("plain"), "SUBMITTED")["ref"])
        dead = wait_state(r.api, send("dead"), "RETRY")["ref"]
        assert "RETRY" in refused(dead)
        final = send("sim")
        wait_state(r.api, final, "SUBMITTED")
        r.sim.push_now([final])
        wait_state(r.api, final, "DELIVERED", "FAILED", "EXPIRED")
        assert "only a submitted message" in refused(final)
        assert r.api.post("/api/messages/NOSUCHREF/pull").status_code == 404
        assert r.sim.stats()["pull_requests"] == 0


def test_a_kill_during_a_pull_batch_loses_nothing_and_asks_no_message_forever(
        tmp_path: Path) -> None:
    with rig(tmp_path, "--no-push", pull_after_s=1) as r:
        r.sim.pull_script([{"hang_s": 30}])  # the first batch is on its way at the kill
        refs = send_many(r.api, 30)
        wait_for(lambda: r.sim.stats()["pull_requests"] >= 1, 30, message="a pull batch")
        r.server.kill9()
        r.server.restart()
        final = wait_all_final(r.data, 30)
        sim_refs = r.sim.stats()["refs"]
        assert {ref: SIM_STATES[sim_refs[ref]["final"]] for ref in refs} == final
        rows = db_rows(r.data, "SELECT pulls, next_at, last_outcome FROM message_pulls")
        assert len(rows) == 30
        # Every message's asks are over, and a few of them at most (the batch cut short
        # by the kill counted as one: its messages were asked about once more).
        assert all(next_at is None and outcome == "final" and 1 <= pulls <= 3
                   for pulls, next_at, outcome in rows), rows
        assert all(1 <= sim_refs[ref]["pulls"] <= 3 for ref in refs)


@pytest.mark.slow
def test_bad_answers_are_attempts_never_made_up_states(tmp_path: Path) -> None:
    # 2.5 s for an answer: a busy host's simulator may take over 1 s to answer a send.
    with rig(tmp_path, "--no-push", pull_after_s=3600, sending="submit_timeout_s = 2.5") as r:
        ref = send_many(r.api, 1)[0]
        wait_state(r.api, ref, "SUBMITTED")
        steps: list[dict[str, Any]] = [
            {"answer": "html"}, {"answer": "truncated"}, {"answer": "unknown_code"},
            {"http": 503}, {"hang_s": 6},
            {"items": [{"client-ref": ref, "state": "reported",
                        "receipts": [{"messageId": "X", "status": "zzz", "client-ref": ref}]}]}]
        r.sim.pull_script(steps)
        asked = 0
        for step in steps:
            # One ask per scripted answer. On a starved host an ask can time out before
            # its request reaches the simulator (no answer, nothing kept, the step still
            # waiting): that ask is an error too, and the step is asked again.
            reached = r.sim.stats()["pull_requests"]
            deadline = time.monotonic() + 90
            while r.sim.stats()["pull_requests"] == reached:
                assert time.monotonic() < deadline, f"the step {step} never reached the simulator"
                assert r.api.post(f"/api/messages/{ref}/pull").status_code == 202
                asked += 1

                def recorded(n: int = asked) -> bool:
                    rows = db_rows(r.data, "SELECT pulls, last_outcome FROM message_pulls")
                    return rows == [(n, "error")]

                wait_for(recorded, 30, message=f"ask {asked} recorded as an error")
            m = r.api.get(f"/api/messages/{ref}").json()
            assert m["state"] == "SUBMITTED" and m["history"] == [] and m["pulls"] == asked
        # Each answer kept raw (the one that timed out had none), none read into a state.
        raw = db_rows(r.data, "SELECT parsed, body FROM raw_reports WHERE method = 'PULL'"
                      " ORDER BY id")
        assert [parsed for parsed, _ in raw] == [0, 0, 1, 0, 1]
        assert bytes(raw[0][1]).startswith(b"<!DOCTYPE html>")
        assert db_rows(r.data, "SELECT count(*) FROM report_inbox") == [(0,)]
        metrics = r.api.get("/metrics").text
        assert 'appliance_report_pulls_total{outcome="error",provider="sim"} 6.0' in metrics
        # A good answer at last: the message is final by it.
        assert r.api.post(f"/api/messages/{ref}/pull").status_code == 202
        m = wait_state(r.api, ref, "DELIVERED", "FAILED", "EXPIRED")
        assert m["pulls"] == 7 and [h["source"] for h in m["history"]] == ["pull"]
