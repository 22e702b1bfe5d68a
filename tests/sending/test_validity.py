"""Validity (ROUTE-4) end to end: a real server, the provider simulator in its own
process counting every submission.

A message not sent within its validity ends ``CANCELLED`` (``expired before sending``)
and never reaches the provider: one held in a lane whose provider has no credit, and a
paused campaign's, resumed too late. The server's clock is a file
(``APPLIANCE_CLOCK_FILE``), so a validity runs out without waiting for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.clock import iso
from tests.harness import FileClock, Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, message, provider_config, wait_state
from tests.sending.support_campaigns import campaign, import_list, show, submissions
from tests.web.console_support import create_user, sign_in

NOW = 1_800_041_400_000  # 2027-01-15T19:30:00Z
EXPIRED = "expired before sending"
# A held lane tries again this often, on the server's clock: the file's, which stands
# still between the tests' moves. A retry taken while the credit is still 0 is due again
# only once the clock has moved on by this much (:func:`next_retry`).
RETRY_MS = 300
SENDING = f"blocked_retry_s = {RETRY_MS / 1000}\ncredit_interval_s = 3600"


@dataclass
class Rig:
    server: Server
    sim: SimulatorProcess
    api: httpx.Client
    clock: FileClock


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("validity")
    sim = SimulatorProcess(tmp).start()
    data = tmp / "data"
    data.mkdir()
    clock = FileClock(tmp / "clock", NOW)
    cfg = provider_config(tmp / "cfg.toml", sim.url, rate_per_s=200, concurrency=4,
                          sending=SENDING)
    server = Server(data, config=cfg, env=clock.env).start()
    key = create_account(data, "acme")
    try:
        with server.client(key) as api:
            yield Rig(server, sim, api, clock)
    finally:
        server.stop()
        sim.stop()


def credit(rig: Rig, value: float) -> None:
    httpx.post(rig.sim.url + "/_sim/account", json={"credit": value},
               timeout=10).raise_for_status()


def next_retry(rig: Rig) -> None:
    """The held lane's next retry comes. Its last one may have asked for the credit
    between the tests' moving the clock and the credit coming back (then it read 0 and
    set the next one ``RETRY_MS`` later); with the clock standing still that retry would
    never be due and the lane would hold forever, where a real clock resumes it within
    ``blocked_retry_s``."""
    rig.clock.advance(RETRY_MS)


def send(api: httpx.Client, to: str, **extra: Any) -> httpx.Response:
    return api.post("/api/messages", json={"to": to, "body": "hello", **extra})


def blocked(api: httpx.Client) -> bool:
    alerts = api.get("/api/stats").json()["alerts"]
    return any(a["name"] == "provider_blocked" and a["firing"] for a in alerts)


def test_a_validity_that_is_not_whole_seconds_or_is_negative_is_refused(rig: Rig) -> None:
    for bad in (-1, 1.5, "60", True):
        r = send(rig.api, "+905320000001", validity_s=bad)
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "invalid_validity"
    r = rig.api.post("/api/campaigns", json={"list": "none", "body": "x", "validity_s": -5})
    assert r.status_code == 422 and r.json()["error"] == "invalid_validity", r.text


def test_a_validity_outside_the_providers_range_is_refused_naming_the_range(rig: Rig) -> None:
    # The simulator speaks Vonage's wire: ttl from 20 s to 7 days.
    for to, value in (("+905320000002", 10), ("+905320000003", 604_801)):
        r = send(rig.api, to, validity_s=value)
        assert r.status_code == 422, r.text
        body = r.json()
        assert body["error"] == "invalid_validity" and body["range_s"] == [20, 604_800]
        assert "20 to 604800 seconds" in body["message"]
    r = rig.api.post("/api/campaigns", json={"list": "none", "body": "x", "validity_s": 5})
    assert r.status_code == 422 and r.json()["range_s"] == [20, 604_800], r.text


def test_a_message_held_past_its_validity_is_cancelled_and_never_submitted(
        rig: Rig) -> None:
    rig.clock.set(NOW)
    credit(rig, 0)
    try:
        first = send(rig.api, "+905320000010").json()["ref"]  # no validity: waits
        wait_for(lambda: blocked(rig.api), 30, interval=0.1, message="the lane held")
        r = send(rig.api, "+905320000011", validity_s=30)
        assert r.status_code == 202, r.text
        short = r.json()["ref"]
        shown = message(rig.api, short)
        assert shown["state"] == "QUEUED" and shown["expires_at"] == iso(NOW + 30_000)
        assert message(rig.api, first)["expires_at"] is None
        rig.clock.set(NOW + 31_000)  # its validity ran out while the lane was held
        credit(rig, 250)
        next_retry(rig)
        done = wait_state(rig.api, short, "CANCELLED", "SUBMITTED", "DELIVERED")
        assert done["state"] == "CANCELLED" and done["error"] == EXPIRED, done
        assert done["attempts"] == 0
        assert wait_state(rig.api, first, "SUBMITTED", "DELIVERED")["attempts"] == 1
        assert rig.sim.ref(short)["received"] == 0
        assert rig.sim.ref(first)["accepted"] == 1
    finally:
        credit(rig, 250)


def test_a_paused_campaign_resumed_too_late_cancels_its_messages_and_counts_them(
        rig: Rig) -> None:
    rig.clock.set(NOW)
    import_list(rig.api, "late", 40, "+90533")
    c = campaign(rig.api, "late", send_at=iso(NOW + 600_000), validity_s=60)
    cid = c["campaignId"]
    assert rig.api.post(f"/api/campaigns/{cid}/pause").status_code == 200
    wait_for(lambda: show(rig.api, cid)["created"] == 40, 30, message="messages created")
    before = submissions(rig.sim)
    shown = show(rig.api, cid)
    assert shown["validity_s"] == 60 and shown["expired"] == 0
    one = rig.api.get("/api/messages", params={"msisdn": "+905330000000"}).json()
    # Counted from its due time (send_at), not from its creation.
    assert one["messages"][0]["expires_at"] == iso(NOW + 660_000)
    rig.clock.set(NOW + 661_000)
    assert rig.api.post(f"/api/campaigns/{cid}/resume").status_code == 200
    done = wait_for(lambda: (d := show(rig.api, cid))["state"] == "DONE" and d, 30,
                    message="the campaign's messages cancelled")
    assert done["counts"] == {"CANCELLED": 40}, done
    assert done["expired"] == 40 and done["cancelled"] == 40 and done["unsent"] == 0
    assert submissions(rig.sim) == before


def test_within_its_validity_a_message_is_sent(rig: Rig) -> None:
    rig.clock.set(NOW)
    r = send(rig.api, "+905320000020", validity_s=600)
    assert r.status_code == 202, r.text
    done = wait_state(rig.api, r.json()["ref"], "SUBMITTED", "DELIVERED", "CANCELLED")
    assert done["state"] != "CANCELLED" and done["expires_at"] == iso(NOW + 600_000)


@pytest.mark.usefixtures("backend")
def test_on_either_store_a_message_past_its_validity_is_never_submitted(
        tmp_path: Path) -> None:
    """The claim's and the mark's statements, on SQLite and on PostgreSQL: a campaign
    resumed after its messages' validity and a single message held past its own."""
    sim = SimulatorProcess(tmp_path).start()
    data = tmp_path / "data"
    data.mkdir()
    clock = FileClock(tmp_path / "clock", NOW)
    cfg = provider_config(tmp_path / "cfg.toml", sim.url, concurrency=2,
                          sending=SENDING)
    server = Server(data, config=cfg, env=clock.env).start()
    try:
        with server.client(create_account(data, "acme")) as api:
            rig = Rig(server, sim, api, clock)
            import_list(api, "pg", 10, "+90534")
            cid = campaign(api, "pg", send_at=iso(NOW + 60_000), validity_s=60)["campaignId"]
            assert api.post(f"/api/campaigns/{cid}/pause").status_code == 200
            wait_for(lambda: show(api, cid)["created"] == 10, 30, message="messages created")
            credit(rig, 0)
            first = send(api, "+905340000100").json()["ref"]
            wait_for(lambda: blocked(api), 30, interval=0.1, message="the lane held")
            short = send(api, "+905340000101", validity_s=30).json()["ref"]
            clock.set(NOW + 121_000)
            credit(rig, 250)
            next_retry(rig)
            assert api.post(f"/api/campaigns/{cid}/resume").status_code == 200
            ended = wait_state(api, short, "CANCELLED", "SUBMITTED", "DELIVERED")
            assert ended["state"] == "CANCELLED" and ended["error"] == EXPIRED, ended
            assert ended["attempts"] == 0
            wait_state(api, first, "SUBMITTED", "DELIVERED")
            done = wait_for(lambda: (d := show(api, cid))["state"] == "DONE" and d, 30)
            assert done["expired"] == 10 and done["counts"] == {"CANCELLED": 10}
            assert set(sim.stats()["refs"]) == {first}  # nothing else reached it
            create_user(data, account="acme")
            with sign_in(server) as console:
                shown = console.get(f"/campaigns/{cid}").text
                assert "<span data-campaign-expired>10</span> expired" in shown
    finally:
        server.stop()
        sim.stop()
