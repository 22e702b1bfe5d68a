"""OPS-5 end to end: a real server, the provider simulator, a real receiver.

A receiver that fails its first three requests and is down across a ``kill -9`` of the
appliance still gets every event, signed, in order per message, each event under one
id; every kind of state change reaches it; nothing is written while webhooks are off;
a slow receiver does not slow sending.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import FileClock, Server, create_account, db_rows, wait_for
from tests.sending.support import SimulatorProcess, provider_config, send, wait_state
from tests.web.console_support import create_user, csrf_of, sign_in
from tests.webhooks.support import Received, Receiver, by_message, signed, webhook_config

MINUTE = 60_000


def outbox(server: Server) -> list[tuple[Any, ...]]:
    """The outbox as stored: (event_id, ref, state, previous, delivered_at) by id."""
    return db_rows(server.data_dir, "SELECT event_id, ref, state, previous, delivered_at"
                   " FROM webhook_outbox ORDER BY id")


def webhook_stats(api: httpx.Client) -> dict[str, Any]:
    data: dict[str, Any] = api.get("/api/stats").json()["webhooks"]
    return data


def tried_since(api: httpx.Client, failed: int) -> bool:
    return int(webhook_stats(api)["failed_attempts"]) > failed


def moving(clock: FileClock, done: Callable[[], bool], what: str) -> None:
    """Move the server's clock on a minute at a time (through the backoff) until done."""
    def step() -> bool:
        if done():
            return True
        clock.advance(MINUTE)
        return False

    wait_for(step, 30, interval=0.1, message=what)


def check_received(requests: list[Received], stored: list[tuple[Any, ...]]) -> None:
    """Every stored event was taken at least once, signed, in order per message."""
    assert requests and all(signed(r) for r in requests), "an unsigned or badly signed POST"
    assert all(r.headers["User-Agent"].startswith("appliance/") for r in requests)
    taken = [r for r in requests if r.taken]
    want: dict[str, list[tuple[str, str, str | None]]] = {}
    for event_id, ref, state, previous, delivered_at in stored:
        assert delivered_at is not None, f"{event_id} was never marked delivered"
        want.setdefault(ref, []).append((event_id, state, previous))
    # In arrival order, every POST (failed ones too): never event n+1 before event n.
    for seen in (by_message(requests), by_message(taken)):
        got = {ref: [(e["event_id"], e["state"], e["previous"]) for e in events]
               for ref, events in seen.items()}
        assert got == want
    ids = [r.event["event_id"] for r in taken]
    distinct = {r.event["event_id"]: (r.event["ref"], r.event["state"]) for r in taken}
    assert len(set(distinct.values())) == len(distinct) == len(stored) <= len(ids)


@dataclass
class Rig:
    tmp: Path
    sim: SimulatorProcess
    clock: FileClock

    def config(self, name: str, receiver: Receiver | None, extra: str = "",
               sending: str = "") -> Path:
        cfg = provider_config(self.tmp / f"{name}.toml", self.sim.url, rate_per_s=500,
                              concurrency=8, sending=sending)
        if receiver is not None:
            webhook_config(cfg, receiver, extra)
        return cfg

    def server(self, name: str, cfg: Path) -> Server:
        data = self.tmp / name
        data.mkdir()
        return Server(data, config=cfg, env=self.clock.env).start()


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("webhooks")
    sim = SimulatorProcess(tmp, "--delay-min-ms", "5", "--delay-max-ms", "50",
                           "--delivered-rate", "1").start()
    try:
        yield Rig(tmp, sim, FileClock(tmp / "clock", time.time_ns() // 1_000_000))
    finally:
        sim.stop()


@pytest.mark.slow
def test_a_failing_receiver_down_across_kill_9_gets_every_event_signed_in_order(
        rig: Rig, backend: str) -> None:
    receiver = Receiver(fail_first=3).start()
    server = rig.server(f"crash-{backend}", rig.config(f"crash-{backend}", receiver))
    try:
        # A command beside the running server, its settings without [webhooks]: on
        # PostgreSQL it must leave the server's event triggers alone.
        key = create_account(server.data_dir)
        with server.client(key) as api:
            first = [send(api, f"+9053212100{i:02d}") for i in range(6)]
            for ref in first:
                wait_state(api, ref, "DELIVERED")
            # Three 503s, then some events taken (the clock moves through the backoff).
            moving(rig.clock, lambda: len(receiver.taken()) >= 4, "the receiver to take events")
            assert [r.taken for r in receiver.all()[:4]] == [False, False, False, True]
            receiver.stop()
            second = [send(api, f"+9053212101{i:02d}") for i in range(6)]
            for ref in second:
                wait_state(api, ref, "DELIVERED")
            assert webhook_stats(api)["waiting"] > 0
        server.kill9()
        server.restart()
        with server.client(key) as api:
            third = [send(api, f"+9053212102{i:02d}") for i in range(3)]
            for ref in third:
                wait_state(api, ref, "DELIVERED")
            for _ in range(2):  # attempts while it is down; the second after 20 min
                failed = webhook_stats(api)["failed_attempts"]
                rig.clock.advance(20 * MINUTE)
                wait_for(partial(tried_since, api, failed), 10,
                         message="an attempt at the receiver while it is down")
            assert "cannot connect" in webhook_stats(api)["last_error"]
            # The clock stands still now: the receiver's backoff holds every event.
            [stale] = [a for a in api.get("/api/stats").json()["alerts"]
                       if a["name"] == "outbox_stale"]
            assert stale["firing"] is True and "cannot connect" in stale["message"]
            receiver.start()  # back, on the same port
            # The operator's "Try now": no waiting out the backoff.
            create_user(server.data_dir, account="acme")
            with sign_in(server) as console:
                shown = console.get("/webhooks")
                assert "cannot connect" in shown.text and "data-try-now" in shown.text
                answer = console.post("/webhooks/retry",
                                      data={"csrf_token": csrf_of(shown.text)})
                assert answer.status_code == 303
            stats = wait_for(lambda: (s := webhook_stats(api))["waiting"] == 0 and s, 30,
                             message="every event delivered")
            assert stats["consecutive_failures"] == 0 and stats["last_success_at"]
    finally:
        server.stop()
        receiver.stop()
    stored = outbox(server)
    refs = first + second + third
    assert {row[1] for row in stored} == set(refs)
    for ref in refs:
        assert [row[2] for row in stored if row[1] == ref] == ["QUEUED", "SUBMITTED", "DELIVERED"]
    check_received(receiver.all(), stored)


def test_every_kind_of_state_change_reaches_the_receiver(rig: Rig) -> None:
    receiver = Receiver().start()
    cfg = rig.config("kinds", receiver,
                     sending="submit_timeout_s = 1.0\ndelivery_window_hours = 1.0")
    server = rig.server("kinds", cfg)
    want: dict[str, list[tuple[str | None, str]]] = {}
    try:
        key = create_account(server.data_dir)
        with server.client(key) as api:
            def one(number: str, step: dict[str, Any] | None, *states: str) -> str:
                if step is not None:
                    rig.sim.script([step])
                ref = send(api, number)
                wait_state(api, ref, states[-1])
                return ref

            delivered = one("+905321220001", None, "DELIVERED")
            want[delivered] = [(None, "QUEUED"), ("QUEUED", "SUBMITTED"),
                               ("SUBMITTED", "DELIVERED")]
            failed = one("+905321220002", {"fail_part": 1}, "FAILED")
            want[failed] = [(None, "QUEUED"), ("QUEUED", "SUBMITTED"), ("SUBMITTED", "FAILED")]
            rejected = one("+905321220003", {"status": "3"}, "REJECTED")
            want[rejected] = [(None, "QUEUED"), ("QUEUED", "REJECTED")]
            uncertain = one("+905321220004", {"hang_s": 3, "silent": True}, "UNCERTAIN")
            want[uncertain] = [(None, "QUEUED"), ("QUEUED", "UNCERTAIN"),
                               ("UNCERTAIN", "UNKNOWN")]  # cut off too, with no report
            retried = one("+905321220005", {"http": 503}, "RETRY")
            rig.clock.advance(MINUTE)  # its next attempt is due
            wait_state(api, retried, "DELIVERED")
            want[retried] = [(None, "QUEUED"), ("QUEUED", "RETRY"), ("RETRY", "SUBMITTED"),
                             ("SUBMITTED", "DELIVERED")]
            silent = one("+905321220006", {"silent": True}, "SUBMITTED")
            want[silent] = [(None, "QUEUED"), ("QUEUED", "SUBMITTED"), ("SUBMITTED", "UNKNOWN")]

            numbers = ["+905321220010", "+905321220011"]
            api.post("/api/suppressions", json={"msisdn": numbers[1]}).raise_for_status()
            job = api.post("/api/contacts/import", json={"list": "k", "text": "\n".join(numbers)})
            wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 30)
            campaign = api.post("/api/campaigns", json={"list": "k", "body": "hi"}).json()
            wait_for(lambda: api.get(campaign["poll"]).json()["finalised"] == 2, 30,
                     message="the campaign's messages final")
            sent, skipped = (api.get("/api/messages", params={"msisdn": n}
                                     ).json()["messages"][0]["ref"] for n in numbers)
            want[sent] = [(None, "QUEUED"), ("QUEUED", "SUBMITTED"), ("SUBMITTED", "DELIVERED")]
            want[skipped] = [(None, "CANCELLED")]  # a suppressed contact: created cancelled

            rig.clock.advance(2 * 60 * MINUTE)  # past the delivery window: cut off
            wait_state(api, silent, "UNKNOWN", timeout=30)

            def received() -> dict[str, list[tuple[str | None, str]]]:
                return {ref: [(e["previous"], e["state"]) for e in events]
                        for ref, events in by_message(receiver.taken()).items()}

            with contextlib.suppress(AssertionError):  # the assert below says what differs
                wait_for(lambda: received() == want, 30, message="every event")
            assert received() == want
            events = [r.event for r in receiver.taken()]
            assert {e["campaign_id"] for e in events if e["ref"] in (sent, skipped)} \
                == {campaign["campaignId"]}
            assert {e["campaign_id"] for e in events if e["ref"] not in (sent, skipped)} \
                == {None}
            assert all(e["at"].endswith("Z") and len(e["at"]) == 24 for e in events)
            assert all(signed(r) for r in receiver.taken())
            stats = wait_for(lambda: (s := webhook_stats(api))["waiting"] == 0 and s, 10)
            assert stats["delivered"] == stats["written"] == len(events)
            metrics = server.client().get("/metrics").text
            assert f"appliance_webhook_events_written_total {float(len(events))}" in metrics
            assert f"appliance_webhook_events_delivered_total {float(len(events))}" in metrics
            assert "appliance_webhook_events_waiting 0.0" in metrics
            assert 'appliance_alert_holding{alert="outbox_stale"} 0.0' in metrics
    finally:
        server.stop()
        receiver.stop()


def test_nothing_is_written_while_webhooks_are_not_configured(rig: Rig) -> None:
    receiver = Receiver().start()
    cfg = rig.config("off", None)
    server = rig.server("off", cfg)
    try:
        key = create_account(server.data_dir)
        with server.client(key) as api:
            ref = send(api, "+905321230001")
            wait_state(api, ref, "DELIVERED")
            assert webhook_stats(api) | {"enabled": False, "waiting": 0, "written": 0} \
                == webhook_stats(api)
            assert outbox(server) == []
            assert "appliance_webhook_enabled 0.0" in server.client().get("/metrics").text
        create_user(server.data_dir, account="acme")
        assert server.client().get("/webhooks").status_code == 303  # to the sign-in
        with sign_in(server) as console:
            shown = console.get("/webhooks")
            assert "data-webhooks-off" in shown.text and "data-try-now" not in shown.text
        server.terminate()
        webhook_config(cfg, receiver)  # turned on: from the next state change on
        server.restart()
        with server.client(key) as api:
            later = send(api, "+905321230002")
            wait_state(api, later, "DELIVERED")
            wait_for(lambda: len(receiver.taken()) == 3, 10, message="three events")
        assert {row[1] for row in outbox(server)} == {later}
    finally:
        server.stop()
        receiver.stop()


def test_a_slow_receiver_does_not_slow_sending(rig: Rig) -> None:
    receiver = Receiver(delay_s=1.0).start()
    server = rig.server("slow", rig.config("slow", receiver, "concurrency = 2"))
    try:
        key = create_account(server.data_dir)
        with server.client(key) as api:
            numbers = [f"+9053212400{i:02d}" for i in range(40)]
            job = api.post("/api/contacts/import", json={"list": "s", "text": "\n".join(numbers)})
            wait_for(lambda: api.get(job.json()["poll"]).json()["state"] == "DONE", 30)
            started = time.monotonic()
            campaign = api.post("/api/campaigns", json={"list": "s", "body": "hi"}).json()
            wait_for(lambda: api.get(campaign["poll"]).json()["finalised"] == 40, 30,
                     message="every message delivered")
            took = time.monotonic() - started
            # 120 events at two a second would take a minute; the messages did not wait.
            got = len(receiver.all())
            stats = webhook_stats(api)
            assert got < 40 and stats["waiting"] > 80, (took, got, stats)
            assert took < 20
    finally:
        server.stop()
        receiver.stop()
