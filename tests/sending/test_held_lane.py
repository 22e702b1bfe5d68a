"""A provider that refuses every message until its operator acts holds its lane, not the
queue: no message is REJECTED or burnt, the alert ``provider_blocked`` names it and the
reason, other providers keep sending, and the lane resumes by itself (ROUTE-1).

The built-in simulator answers Vonage's status 9 (no credit) while its balance is 0 and
any status set with ``/_sim/account {"refuse": ...}``; the ``simulator`` kind maps 9 to
``blocked("no_credit")`` and 15 to ``blocked("sender_not_registered")``. The retry
interval is short here (``blocked_retry_s``); every wait polls with a deadline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.config import ProviderSettings
from appliance.providers.outcome import SubmitResult
from appliance.providers.simulator_kind import SimulatorAdapter
from tests.harness import Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, message, wait_state
from tests.web.console_support import create_user, sign_in


def two_providers(path: Path, held: str, other: str) -> Path:
    """``sim`` (the one that will refuse) and ``other``, both simulators."""
    path.write_text(f"""
[sending]
blocked_retry_s = 0.3
credit_interval_s = 3600

[providers.sim]
kind = "simulator"
base_url = "{held}"
rate_per_s = 200
concurrency = 4

[providers.other]
kind = "simulator"
base_url = "{other}"
rate_per_s = 200
""")
    return path


def account(url: str, **values: Any) -> None:
    httpx.post(url + "/_sim/account", json=values, timeout=10).raise_for_status()


def send_via(api: httpx.Client, provider: str, to: str) -> str:
    r = api.post("/api/messages", json={"to": to, "body": "hello", "provider": provider})
    assert r.status_code == 202, r.text
    ref: str = r.json()["ref"]
    return ref


def blocked_alert(api: httpx.Client) -> dict[str, Any]:
    alerts = api.get("/api/stats").json()["alerts"]
    found: dict[str, Any] = next(a for a in alerts if a["name"] == "provider_blocked")
    return found


def metric(api: httpx.Client, prefix: str) -> float | None:
    for line in api.get("/metrics").text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return None


def test_the_simulator_kind_maps_no_credit_and_an_unregistered_sender_to_blocked() -> None:
    adapter = SimulatorAdapter(ProviderSettings(name="s", kind="simulator"))
    for status, reason in (("9", "no_credit"), ("15", "sender_not_registered")):
        answer = httpx.Response(200, json={"message-count": "1", "messages": [
            {"to": "905321234567", "status": status, "error-text": "refused"}]})
        outcome = adapter.interpret_response(answer)
        assert outcome.blocked == reason and outcome.result is SubmitResult.RETRY
        assert outcome.unreached
    # Any other refusal keeps Vonage's mapping.
    other = httpx.Response(200, json={"messages": [{"status": "3", "error-text": "x"}]})
    assert adapter.interpret_response(other).result is SubmitResult.REJECTED
    assert adapter.read_credit(200, b'{"value": 12.5, "autoReload": false}',
                               "application/json") == 12.5


@pytest.mark.usefixtures("backend")
def test_no_credit_holds_the_lane_alerts_and_resumes_once_credit_is_back(
        tmp_path: Path) -> None:
    held = SimulatorProcess(tmp_path).start()
    other = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    account(held.url, credit=0)
    server = Server(data, config=two_providers(tmp_path / "cfg.toml", held.url,
                                               other.url)).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            refs = [send_via(api, "sim", f"+9053212{i:05d}") for i in range(12)]
            wait_for(lambda: blocked_alert(api)["firing"], 30, interval=0.1,
                     message="the provider_blocked alert")
            alert = blocked_alert(api)
            assert "provider sim" in alert["message"] and "no_credit" in alert["message"]
            assert alert["value"] == 1
            # Another provider's lane keeps sending meanwhile.
            others = [send_via(api, "other", f"+9053213{i:05d}") for i in range(3)]
            for ref in others:
                wait_state(api, ref, "SUBMITTED", "DELIVERED", "FAILED", "EXPIRED")
            # The held lane tries again by asking for the credit, not by sending: the
            # refusals stay at what was in flight when the first came back.
            refused = held.stats()["refused"]
            assert 1 <= refused <= 4
            asked = held.stats()["balance_queries"]
            wait_for(lambda: held.stats()["balance_queries"] >= asked + 3, 30, interval=0.1,
                     message="the credit asked again at each retry")
            assert held.stats()["refused"] == refused
            shown = [message(api, r) for r in refs]
            assert {m["state"] for m in shown} == {"QUEUED"}, shown
            assert all(m["attempts"] == 0 for m in shown), shown
            assert metric(api, 'appliance_provider_blocked{provider="sim",reason="no_credit"}') \
                == 1.0
            assert metric(api, 'appliance_alert_holding{alert="provider_blocked"}') == 1.0
            assert metric(api, 'appliance_provider_credit{provider="sim"}') == 0.0
            assert "refuses every message (no_credit" in server.log()
            create_user(data, account="acme")
            with sign_in(server) as console:
                shown_page = console.get("/dashboard/figures").text
                assert 'data-provider="sim" data-credit="0.0"' in shown_page
                assert 'data-held="no_credit"' in shown_page
                assert 'data-alert="provider_blocked" data-firing="yes"' in shown_page
            # Credit is back: the lane resumes by itself, each message sent once.
            account(held.url, credit=250)
            for ref in refs:
                done = wait_state(api, ref, "SUBMITTED", "DELIVERED", "FAILED", "EXPIRED")
                assert done["attempts"] == 1, done
            wait_for(lambda: not blocked_alert(api)["firing"], 30, interval=0.1,
                     message="the alert cleared")
            assert metric(api, 'appliance_provider_credit{provider="sim"}') == 250.0
            assert metric(api, "appliance_provider_blocked{") is None
            accepted = held.stats()["refs"]
            assert all(accepted[r]["accepted"] == 1 for r in refs)
            assert "takes messages again" in server.log()
    finally:
        server.stop()
        held.stop()
        other.stop()


def test_an_unregistered_sender_is_tried_again_with_one_message_at_a_time(
        tmp_path: Path) -> None:
    held = SimulatorProcess(tmp_path).start()
    other = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    account(held.url, refuse="15")
    server = Server(data, config=two_providers(tmp_path / "cfg.toml", held.url,
                                               other.url)).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            refs = [send_via(api, "sim", f"+9053214{i:05d}") for i in range(8)]
            wait_for(lambda: "sender_not_registered" in blocked_alert(api)["message"], 30,
                     interval=0.1, message="the provider_blocked alert")
            first = held.stats()["refused"]
            # No credit query answers for this reason: each retry sends one message.
            wait_for(lambda: held.stats()["refused"] >= first + 3, 30, interval=0.1,
                     message="three retries")
            shown = [message(api, r) for r in refs]
            assert {m["state"] for m in shown} == {"QUEUED"}, shown
            assert all(m["attempts"] == 0 for m in shown)
            account(held.url, refuse=None)
            for ref in refs:
                assert wait_state(api, ref, "SUBMITTED", "DELIVERED", "FAILED",
                                  "EXPIRED")["attempts"] == 1
            wait_for(lambda: not blocked_alert(api)["firing"], 30, interval=0.1,
                     message="the alert cleared")
    finally:
        server.stop()
        held.stop()
        other.stop()


def test_a_hold_outlives_a_restart(tmp_path: Path) -> None:
    held = SimulatorProcess(tmp_path).start()
    other = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    account(held.url, credit=0)
    server = Server(data, config=two_providers(tmp_path / "cfg.toml", held.url,
                                               other.url)).start()
    try:
        key = create_account(data, "acme")
        with server.client(key) as api:
            ref = send_via(api, "sim", "+905321500000")
            wait_for(lambda: blocked_alert(api)["firing"], 30, interval=0.1,
                     message="the provider_blocked alert")
        server.stop()
        refused = held.stats()["refused"]
        server.restart()
        with server.client(key) as api:
            # Held from the start: the message is not sent again to be refused.
            assert blocked_alert(api)["firing"]
            asked = held.stats()["balance_queries"]
            wait_for(lambda: held.stats()["balance_queries"] >= asked + 2, 30, interval=0.1,
                     message="retries after the restart")
            assert held.stats()["refused"] == refused
            account(held.url, credit=5)
            assert wait_state(api, ref, "SUBMITTED", "DELIVERED", "FAILED",
                              "EXPIRED")["attempts"] == 1
    finally:
        server.stop()
        held.stop()
        other.stop()
