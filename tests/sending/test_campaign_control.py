"""OPS-1 and OPS-2 end to end: a real server, the provider simulator in its own process
counting every submission with the time it arrived.

Pause, resume, cancel, ``send_at`` and a sending window; two campaigns sharing the
rate. The server's clock is a file (``APPLIANCE_CLOCK_FILE``) so a schedule or a window
can be crossed without waiting for it; the rate is paced by the real clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.harness import FileClock, Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, provider_config
from tests.sending.support_campaigns import (
    assert_quiet,
    campaign,
    import_list,
    now_ms,
    received_times,
    sent,
    show,
    submissions,
)

# 2027-01-15T19:30:00Z: 22:30 in Istanbul (UTC+3 all year)
EVENING = 1_800_041_400_000
NEXT_0900_ISTANBUL = "2027-01-16T06:00:00.000Z"


@dataclass
class Rig:
    server: Server
    sim: SimulatorProcess
    api: httpx.Client
    clock: FileClock


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("control")
    sim = SimulatorProcess(tmp, "--silent-rate", "1").start()
    data = tmp / "data"
    data.mkdir()
    clock = FileClock(tmp / "clock", EVENING)
    cfg = provider_config(tmp / "cfg.toml", sim.url, rate_per_s=100, concurrency=4)
    server = Server(data, config=cfg, env=clock.env).start()
    key = create_account(data, "acme")
    try:
        with server.client(key) as api:
            yield Rig(server, sim, api, clock)
    finally:
        server.stop()
        sim.stop()


@pytest.fixture(autouse=True)
def quiet_start(rig: Rig) -> None:
    """Every test starts with nothing left to send."""
    rig.clock.set(EVENING)
    for c in rig.api.get("/api/campaigns").json()["campaigns"]:
        if c["state"] in ("RUNNING", "SCHEDULED", "PAUSED"):
            assert rig.api.post(f"/api/campaigns/{c['id']}/cancel").status_code == 200


def test_pause_stops_every_submission_from_its_answer_on_and_resume_goes_on(rig: Rig) -> None:
    import_list(rig.api, "pause", 400, "+90533")
    start = submissions(rig.sim)
    c = campaign(rig.api, "pause")
    wait_for(lambda: submissions(rig.sim) - start >= 100, 30, message="sending under way")
    answer = rig.api.post(f"/api/campaigns/{c['campaignId']}/pause")
    acknowledged = now_ms()
    assert answer.status_code == 200, answer.text
    paused = answer.json()
    assert paused["state"] == "PAUSED" and paused["unsent"] > 0
    last = received_times(rig.sim)[-1]
    assert last <= acknowledged, f"a submission arrived {last - acknowledged} ms after the pause"
    assert_quiet(rig.sim, 1.5, "after the pause was acknowledged")  # at 100/s: ~150 missing
    held = show(rig.api, c["campaignId"])
    assert held["state"] == "PAUSED" and held["counts"].get("SENDING", 0) == 0
    assert sent(held) == submissions(rig.sim) - start
    # pausing again changes nothing; resuming sends the rest, each once
    assert rig.api.post(f"/api/campaigns/{c['campaignId']}/pause").json()["state"] == "PAUSED"
    resumed = rig.api.post(f"/api/campaigns/{c['campaignId']}/resume")
    assert resumed.status_code == 200 and resumed.json()["state"] == "RUNNING"
    done = wait_for(lambda: (d := show(rig.api, c["campaignId"]))["state"] == "DONE" and d, 60,
                    message="the campaign to finish after resume")
    assert done["counts"] == {"SUBMITTED": 400}
    refs = rig.sim.stats()["refs"]
    assert submissions(rig.sim) - start == 400
    assert all(r["received"] == 1 for r in refs.values())


def test_cancel_leaves_nothing_queued_and_sends_nothing_more(rig: Rig) -> None:
    import_list(rig.api, "cancel", 800, "+90534")
    start = submissions(rig.sim)
    c = campaign(rig.api, "cancel")
    wait_for(lambda: submissions(rig.sim) - start >= 50, 30, message="sending under way")
    answer = rig.api.post(f"/api/campaigns/{c['campaignId']}/cancel")
    acknowledged = now_ms()
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["state"] == "CANCELLED" and body["cancelled_now"] > 0
    assert received_times(rig.sim)[-1] <= acknowledged
    assert_quiet(rig.sim, 1.5, "after the cancel was acknowledged")
    after = show(rig.api, c["campaignId"])
    counts = after["counts"]
    assert not {"QUEUED", "RETRY", "SENDING"} & set(counts), counts
    went = submissions(rig.sim) - start
    assert counts.get("SUBMITTED", 0) == went
    assert after["cancelled"] == 800 - went and after["unsent"] == 0
    # final: it cannot be resumed, and cancelling again is harmless
    assert rig.api.post(f"/api/campaigns/{c['campaignId']}/resume").status_code == 409
    assert rig.api.post(f"/api/campaigns/{c['campaignId']}/cancel").status_code == 200


def test_send_at_in_the_future_sends_nothing_before_it(rig: Rig) -> None:
    import_list(rig.api, "later", 50, "+90535")
    at = EVENING + 3_600_000
    c = campaign(rig.api, "later", send_at="2027-01-15T20:30:00Z")
    assert c["state"] == "SCHEDULED" and c["send_at"] == "2027-01-15T20:30:00.000Z"
    # its messages are created ahead of time, but none is claimed
    wait_for(lambda: show(rig.api, c["campaignId"])["created"] == 50, 30)
    start = submissions(rig.sim)
    assert_quiet(rig.sim, 1.5, "before send_at")
    scheduled = show(rig.api, c["campaignId"])
    assert scheduled["state"] == "SCHEDULED" and scheduled["counts"] == {"QUEUED": 50}
    rig.clock.set(at - 1_000)
    assert_quiet(rig.sim, 1.0, "a second before send_at")
    rig.clock.set(at)
    wait_for(lambda: submissions(rig.sim) - start == 50, 30, message="the campaign at send_at")
    wait_for(lambda: show(rig.api, c["campaignId"])["state"] == "DONE", 30)


def test_a_window_closed_now_holds_the_campaign_until_it_opens(rig: Rig) -> None:
    import_list(rig.api, "window", 50, "+90536")
    window = {"from": "09:00", "to": "20:00", "tz": "Europe/Istanbul"}
    c = campaign(rig.api, "window", window=window)
    wait_for(lambda: show(rig.api, c["campaignId"])["created"] == 50, 30)
    start = submissions(rig.sim)
    assert_quiet(rig.sim, 1.5, "outside the window")
    held = show(rig.api, c["campaignId"])
    assert held["window"] == window and held["window_open"] is False
    assert held["window_opens_at"] == NEXT_0900_ISTANBUL
    assert held["eta_s"] is None and held["counts"] == {"QUEUED": 50}
    rig.clock.set(1_800_078_540_000)  # 08:49 in Istanbul: still closed
    assert_quiet(rig.sim, 1.0, "at 08:49 local")
    rig.clock.set(1_800_079_200_000)  # 09:00 in Istanbul
    wait_for(lambda: submissions(rig.sim) - start == 50, 30, message="sending once it opens")
    assert show(rig.api, c["campaignId"])["window_open"] is True


@pytest.mark.slow
def test_two_campaigns_started_together_progress_together(rig: Rig) -> None:
    import_list(rig.api, "fair-a", 600, "+90537")
    import_list(rig.api, "fair-b", 600, "+90538")
    # Both scheduled for the same moment, so "together" is exact: one created a few
    # milliseconds before the other would otherwise get its first batch out alone.
    at = "2027-01-15T19:31:00Z"
    a = campaign(rig.api, "fair-a", send_at=at)
    b = campaign(rig.api, "fair-b", send_at=at)
    for c in (a, b):
        wait_for(lambda: show(rig.api, c["campaignId"])["created"] == 600, 30)  # noqa: B023
    start = submissions(rig.sim)
    rig.clock.set(EVENING + 60_000)
    checked = 0
    while checked < 3:  # three looks while both are sending (at 100/s: 12 s in all)
        goal = start + 300 * (checked + 1)
        wait_for(lambda: submissions(rig.sim) >= goal, 30)  # noqa: B023 - used at once
        one, two = show(rig.api, a["campaignId"]), show(rig.api, b["campaignId"])
        x, y = sent(one), sent(two)
        assert abs(x - y) <= 0.1 * max(x, y), f"campaign a sent {x}, campaign b {y}"
        assert one["messages_per_s"] > 0 and one["eta_s"] is not None
        checked += 1
    for cid in (a["campaignId"], b["campaignId"]):
        wait_for(lambda: show(rig.api, cid)["state"] == "DONE", 60)  # noqa: B023


def test_controls_refuse_what_cannot_be_done(rig: Rig) -> None:
    assert rig.api.post("/api/campaigns/999999/pause").status_code == 404
    import_list(rig.api, "tiny", 3, "+90539")
    c = campaign(rig.api, "tiny")
    wait_for(lambda: show(rig.api, c["campaignId"])["state"] == "DONE", 30)
    refused = rig.api.post(f"/api/campaigns/{c['campaignId']}/pause")
    assert refused.status_code == 409 and refused.json()["state"] == "DONE"
    for bad in ({"send_at": "tomorrow"}, {"send_at": "2027-01-15T20:30:00"},
                {"window": {"from": "9", "to": "20:00", "tz": "Europe/Istanbul"}},
                {"window": {"from": "09:00", "to": "20:00", "tz": "Mars/Olympus"}},
                {"window": {"from": "09:00", "to": "09:00", "tz": "UTC"}}):
        r = rig.api.post("/api/campaigns", json={"list": "tiny", "body": "x", **bad})
        assert r.status_code == 422, (bad, r.text)
        assert r.json()["error"] in ("invalid_send_at", "invalid_window")
