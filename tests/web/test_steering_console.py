"""The console's steering (OPS-2, OPS-3, OPS-6): a scheduled, personalised campaign
confirmed with its parts after substitution; pause, resume and cancel asked first with
the counts; an UNCERTAIN message resolved with the warning, audited as the user."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest

from tests.harness import FileClock, Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, provider_config, send, wait_state
from tests.sending.support_campaigns import import_list, show
from tests.web.console_support import create_user, page_token, sign_in

EVENING = 1_800_041_400_000  # 2027-01-15T19:30:00Z


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, SimulatorProcess,
                                                                     str, FileClock]]:
    tmp = tmp_path_factory.mktemp("steer")
    sim = SimulatorProcess(tmp, "--silent-rate", "1").start()
    data = tmp / "data"
    data.mkdir()
    key = create_account(data, "default")
    create_user(data, "alice", "default")
    clock = FileClock(tmp / "clock", EVENING)
    cfg = provider_config(tmp / "cfg.toml", sim.url, rate_per_s=20, concurrency=2,
                          sending="submit_timeout_s = 1.0")
    server = Server(data, config=cfg, env=clock.env).start()
    try:
        yield server, sim, key, clock
    finally:
        server.stop()
        sim.stop()


def hidden(page: str) -> dict[str, str]:
    return {k: html.unescape(v) for k, v in
            re.findall(r'type="hidden" name="([^"]+)" value="([^"]*)"', page)}


def test_a_scheduled_personalised_campaign_is_confirmed_paused_resumed_and_cancelled(
        rig: tuple[Server, SimulatorProcess, str, FileClock]) -> None:
    server, sim, key, clock = rig
    with server.client(key) as api:
        import_list(api, "people", 40, "+90547", names=["Ayşe"] + ["Ali"] * 39)
    with sign_in(server) as client:
        token = page_token(client, "/send")
        keys = re.findall(r'name="send_key" value="([^"]+)"', client.get("/send").text)
        review = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": keys[1], "list": "people",
            "body": "Merhaba {name|Müşterimiz}! " + "x" * 40,
            "send_at": "2027-01-15T20:30", "window_from": "09:00", "window_to": "23:00",
            "window_tz": "Europe/Istanbul"})
        assert review.status_code == 200, review.text
        # Ayşe's text is UCS-2 (ş): 1 part of 55 characters; the 39 others GSM-7, 1 each
        assert 'data-confirm-parts="40"' in review.text and "after personalisation" in review.text
        assert "because of 'ş'" in review.text and "1 of them in UCS-2" in review.text
        assert "2027-01-15T20:30:00.000Z" in review.text and "Europe/Istanbul" in review.text
        made = client.post("/send/campaign", data=hidden(review.text))
        assert made.status_code == 303, made.text
        page = client.get(made.headers["location"])
        assert 'data-phase="SCHEDULED"' in page.text
        cid = int(made.headers["location"].rsplit("/", 1)[1])
        with server.client(key) as api:
            assert show(api, cid)["window"] == {"from": "09:00", "to": "23:00",
                                                "tz": "Europe/Istanbul"}
            wait_for(lambda: show(api, cid)["created"] == 40, 30)
        ask = client.get(f"/campaigns/{cid}/pause")
        assert 'data-control-count="40"' in ask.text and "Pausing holds the 40 messages" in ask.text
        paused = client.post(f"/campaigns/{cid}/pause", data={"csrf_token": csrf(ask.text)})
        assert paused.status_code == 303
        assert 'data-phase="PAUSED"' in client.get(paused.headers["location"]).text
        clock.set(EVENING + 3_600_000)  # send_at passed, 23:30 local: the window is closed
        ask = client.get(f"/campaigns/{cid}/resume")
        client.post(f"/campaigns/{cid}/resume", data={"csrf_token": csrf(ask.text)})
        page = client.get(f"/campaigns/{cid}")
        assert "Outside its sending window" in page.text
        assert sim.stats()["submissions"] == 0
        ask = client.get(f"/campaigns/{cid}/cancel")
        assert "Cancelling makes the 40 messages not yet sent CANCELLED" in ask.text
        client.post(f"/campaigns/{cid}/cancel", data={"csrf_token": csrf(ask.text)})
        with server.client(key) as api:
            assert show(api, cid)["counts"] == {"CANCELLED": 40}
        assert sim.stats()["submissions"] == 0


def csrf(page: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert found
    return found.group(1)


def test_an_uncertain_message_is_resolved_from_its_page_with_the_warning(
        rig: tuple[Server, SimulatorProcess, str, FileClock]) -> None:
    server, sim, key, clock = rig
    clock.set(EVENING)
    sim.script([{"hang_s": 3, "silent": True}])
    with server.client(key) as api:
        ref = send(api, "+905471110001")
        wait_state(api, ref, "UNCERTAIN")
    with sign_in(server) as client:
        page = client.get(f"/messages?q={ref}")
        assert "data-decide" in page.text and "may already have this message" in page.text
        done = client.post(f"/messages/{ref}/resolve",
                           data={"csrf_token": csrf(page.text), "action": "resend"})
        assert done.status_code == 303
        with server.client(key) as api:
            shown = wait_state(api, ref, "SUBMITTED")
        assert shown["actions"][0]["by"] == "console user alice"
        assert sim.ref(ref)["received"] == 2
        page = client.get(f"/messages?q={ref}")
        assert "Resend requested by console user alice" in page.text
        assert "data-decide" not in page.text
