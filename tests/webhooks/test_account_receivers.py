"""TEAM-2 and TEAM-3 end to end: each account its own receiver, inbound forwarded.

Real servers on 127.0.0.1: the appliance, the provider simulator and three receivers
(``[webhooks]``'s, alpha's and beta's; gamma has none of its own). Each receiver gets
only its account's events, each signed with its account's secret and not another's; a
receiver that is down backs off alone while another account's events keep flowing; an
inbound message goes to the receivers of the accounts that messaged its number, and
one from a number nobody messaged goes to nobody. With ``[webhooks]`` off, an account
given a receiver while the server runs has its events written and delivered, and an
account without one has none written.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import FileClock, Server, create_account, db_rows, run_cli, wait_for
from tests.sending.support import SimulatorProcess, provider_config, send, wait_state
from tests.web.console_support import create_user, csrf_of, sign_in
from tests.webhooks.support import SECRET, Received, Receiver, by_message, signed, webhook_config

MINUTE = 60_000
SECRETS = {"alpha": "alpha-secret-for-tests", "beta": "beta-secret-for-tests"}


def give_receiver(data: Path, account: str, receiver: Receiver, via_stdin: bool = False) -> str:
    """``appliance account webhook``: the secret as an option, or typed when asked."""
    secret = SECRETS[account]
    if via_stdin:
        return run_cli("account", "webhook", account, "--url", receiver.url,
                       "--data-dir", str(data), input=f"{secret}\n{secret}\n".encode()).stdout
    return run_cli("account", "webhook", account, "--url", receiver.url, "--secret", secret,
                   "--data-dir", str(data)).stdout


def stats(api: httpx.Client) -> dict[str, Any]:
    data: dict[str, Any] = api.get("/api/stats").json()
    return data


def status_refs(receiver: Receiver) -> set[str]:
    return {r.event["ref"] for r in receiver.taken() if r.event["type"] == "message.status"}


def inbound_from(receiver: Receiver) -> list[dict[str, Any]]:
    return [r.event for r in receiver.taken() if r.event["type"] == "inbound.received"]


def events_of(receiver: Receiver, refs: list[str]) -> bool:
    """Each of ``refs`` reached ``receiver`` as far as DELIVERED."""
    seen = by_message([r for r in receiver.taken() if r.event["type"] == "message.status"])
    return all([e["state"] for e in seen.get(ref, [])][-1:] == ["DELIVERED"] for ref in refs)


def inbound(sim: SimulatorProcess, server: Server, sender: str, text: str, msg_id: str) -> None:
    answer = httpx.post(sim.url + "/_sim/inbound", timeout=30, json={
        "from": sender, "text": text, "message_id": msg_id, "to": "ACME",
        "url": f"{server.url}/inbound/sim"})
    assert answer.status_code == 200 and answer.json()["statuses"] == [200], answer.text


def signed_only_with(requests: list[Received], secret: str, others: list[str]) -> None:
    assert requests and all(signed(r, secret) for r in requests), "not signed with its secret"
    for other in others:
        assert not any(signed(r, other) for r in requests), "signed with another's secret"


@pytest.mark.slow
def test_each_account_its_own_receiver_signed_and_backing_off_alone(
        backend: str, tmp_path: Path) -> None:
    sim = SimulatorProcess(tmp_path, "--delay-min-ms", "5", "--delay-max-ms", "50",
                           "--delivered-rate", "1").start()
    shared, ra, rb = Receiver().start(), Receiver().start(), Receiver().start()
    clock = FileClock(tmp_path / "clock", time.time_ns() // 1_000_000)
    cfg = provider_config(tmp_path / "c.toml", sim.url, rate_per_s=500)
    webhook_config(cfg, shared)
    data = tmp_path / "data"
    data.mkdir()
    server = Server(data, config=cfg, env=clock.env).start()
    try:
        keys = {name: create_account(data, name) for name in ("alpha", "beta", "gamma")}
        assert "alpha's events" in give_receiver(data, "alpha", ra)
        give_receiver(data, "beta", rb, via_stdin=True)
        with server.client(keys["alpha"]) as alpha, server.client(keys["beta"]) as beta, \
                server.client(keys["gamma"]) as gamma:
            refs = {name: [send(api, f"+90532130{i}{n:03d}") for n in range(3)]
                    for i, (name, api) in enumerate((("alpha", alpha), ("beta", beta),
                                                     ("gamma", gamma)))}
            for api, name in ((alpha, "alpha"), (beta, "beta"), (gamma, "gamma")):
                for ref in refs[name]:
                    wait_state(api, ref, "DELIVERED")
            for receiver, name in ((ra, "alpha"), (rb, "beta"), (shared, "gamma")):
                wait_for(partial(events_of, receiver, refs[name]), 30,
                         message=f"{name}'s events at its receiver")
            # Each receiver: only its account's events, signed with its secret only.
            assert status_refs(ra) == set(refs["alpha"])
            assert status_refs(rb) == set(refs["beta"])
            assert status_refs(shared) == set(refs["gamma"])
            signed_only_with(ra.all(), SECRETS["alpha"], [SECRETS["beta"], SECRET])
            signed_only_with(rb.all(), SECRETS["beta"], [SECRETS["alpha"], SECRET])
            signed_only_with(shared.all(), SECRET, list(SECRETS.values()))
            assert all(r.event["type"] == "message.status" for r in ra.all())
            # /api/stats: the caller's account's receiver.
            assert stats(alpha)["webhooks"]["receiver"] == "account"
            assert stats(gamma)["webhooks"]["receiver"] == "webhooks"
            assert stats(alpha)["webhooks"]["delivered"] == len(ra.taken())

            # Inbound: from a number alpha and beta messaged, one only gamma did, and one
            # nobody did.
            both, gammas, nobody = "+905321300000", "+905321302000", "+905329999999"
            send(beta, both)
            inbound(sim, server, nobody, "who is this", "mo-nobody")
            inbound(sim, server, both, "hello both", "mo-both")
            inbound(sim, server, gammas, "hello gamma", "mo-gamma")
            for receiver in (ra, rb, shared):
                wait_for(partial(inbound_from, receiver), 30,
                         message="an inbound event at each receiver")
            for receiver, sender in ((ra, both), (rb, both), (shared, gammas)):
                [event] = inbound_from(receiver)
                assert set(event) == {"event_id", "type", "from", "to", "text", "provider",
                                      "received_at"}
                assert (event["from"], event["provider"]) == (sender, "sim")
                assert event["text"] == ("hello both" if sender == both else "hello gamma")
                assert event["received_at"].endswith("Z")
            assert inbound_from(ra)[0]["event_id"] != inbound_from(rb)[0]["event_id"]
            signed_only_with(rb.all(), SECRETS["beta"], [SECRETS["alpha"], SECRET])
            [(nobody_id,)] = db_rows(data, "SELECT id FROM inbound_messages WHERE msisdn = ?",
                                     (nobody,))
            assert db_rows(data, "SELECT count(*) FROM webhook_outbox WHERE inbound_id = ?",
                           (nobody_id,)) == [(0,)]

            # alpha's receiver goes down: it backs off alone; beta's events keep flowing.
            ra.stop()
            down_a = [send(alpha, f"+90532140{n:04d}") for n in range(3)]
            wait_for(lambda: stats(alpha)["webhooks"]["consecutive_failures"] >= 1, 30,
                     message="alpha's receiver failing")
            failed = stats(alpha)["webhooks"]["failed_attempts"]
            for round_ in range(2):
                flowing = [send(beta, f"+90532150{round_}{n:03d}") for n in range(3)]
                wait_for(partial(events_of, rb, flowing), 30,
                         message="beta's events while alpha's receiver is down")
            assert stats(beta)["webhooks"]["consecutive_failures"] == 0
            shown = stats(alpha)["webhooks"]
            assert "cannot connect" in shown["last_error"] and shown["waiting"] > 0
            # Backing off: a handful of POSTs at most, not one per waiting event.
            assert shown["failed_attempts"] - failed <= 4
            # The stale alert names alpha's receiver, not beta's.
            clock.advance(20 * MINUTE)
            wait_for(lambda: stats(alpha)["webhooks"]["failed_attempts"] > failed, 30,
                     message="another attempt at alpha's receiver")
            # The stale alert: alpha's /api/stats says its receiver's; beta's is quiet
            # and names no other account; the appliance's (metrics) holds.
            [stale] = [a for a in stats(alpha)["alerts"] if a["name"] == "outbox_stale"]
            assert stale["firing"] is True and "cannot connect" in stale["message"]
            assert "this account's receiver" in stale["message"]
            [quiet] = [a for a in stats(beta)["alerts"] if a["name"] == "outbox_stale"]
            assert quiet["firing"] is False and "alpha" not in quiet["message"]
            metrics = server.client().get("/metrics").text
            assert 'appliance_alert_holding{alert="outbox_stale"} 1.0' in metrics
            # The console shows each account its own receiver; alpha's Try now ends
            # alpha's receiver's backoff (the clock stands still from here).
            create_user(data, "alice", account="alpha")
            create_user(data, "gus", account="gamma")
            with sign_in(server, "gus") as console:
                shown = console.get("/webhooks").text
                assert "data-receiver-default" in shown and "cannot connect" not in shown
            ra.start()
            with sign_in(server, "alice") as console:
                shown = console.get("/webhooks")
                assert "data-receiver-own" in shown.text and "cannot connect" in shown.text
                assert f"127.0.0.1:{ra.port}/hooks" in shown.text
                answer = console.post("/webhooks/retry",
                                      data={"csrf_token": csrf_of(shown.text)})
                assert answer.status_code == 303
            wait_for(partial(events_of, ra, down_a), 30, message="alpha's events after Try now")
            assert status_refs(rb) & set(refs["alpha"] + down_a) == set()
    finally:
        server.stop()
        for r in (shared, ra, rb):
            r.stop()
        sim.stop()


def test_an_account_receiver_set_while_serving_without_webhooks_gets_its_events(
        backend: str, tmp_path: Path) -> None:
    sim = SimulatorProcess(tmp_path, "--delay-min-ms", "5", "--delay-max-ms", "20",
                           "--delivered-rate", "1").start()
    ra = Receiver().start()
    cfg = provider_config(tmp_path / "c.toml", sim.url)  # no [webhooks]
    data = tmp_path / "data"
    data.mkdir()
    server = Server(data, config=cfg).start()
    try:
        ka, kb = create_account(data, "alpha"), create_account(data, "beta")
        with server.client(ka) as alpha, server.client(kb) as beta:
            before = send(alpha, "+905321600001")
            wait_state(alpha, before, "DELIVERED")
            assert stats(alpha)["webhooks"]["enabled"] is False
            give_receiver(data, "alpha", ra)  # while the server runs
            ref = send(alpha, "+905321600002")
            other = send(beta, "+905321600003")
            wait_state(alpha, ref, "DELIVERED")
            wait_state(beta, other, "DELIVERED")
            wait_for(partial(events_of, ra, [ref]), 30, message="alpha's events")
            assert status_refs(ra) == {ref}
            signed_only_with(ra.all(), SECRETS["alpha"], [SECRET])
            assert {r[0] for r in db_rows(data, "SELECT ref FROM webhook_outbox")} == {ref}
            shown = stats(alpha)["webhooks"]
            assert shown["receiver"] == "account" and shown["enabled"] is True
            assert stats(beta)["webhooks"] | {"receiver": "webhooks", "enabled": False,
                                              "written": 0} == stats(beta)["webhooks"]
    finally:
        server.stop()
        ra.stop()
        sim.stop()
