"""The same text twice a day (IYS-4) with country TR: a single send answers 409
duplicate_today; a campaign over numbers that already had the text today creates those
messages CANCELLED (duplicate_today), counted; another account, another text or a
first message that failed does not block; the day is Europe/Istanbul's."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.harness import FileClock, Server, create_account, wait_for
from tests.sending.support import SimulatorProcess, provider_config
from tests.sending.support_campaigns import import_list, show

TEXT = "Siparisiniz yola cikti"
# 2026-03-10 20:30 UTC is 23:30 in Istanbul; an hour later it is the next day there.
LATE_EVENING_MS = 1_773_174_600_000


@dataclass
class Rig:
    server: Server
    clock: FileClock
    alpha: httpx.Client
    beta: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("duplicates")
    data = tmp / "data"
    data.mkdir()
    sim = SimulatorProcess(tmp).start()
    clock = FileClock(tmp / "clock", LATE_EVENING_MS)
    cfg = provider_config(tmp / "cfg.toml", sim.url, extra='\n[compliance]\ncountry = "TR"\n')
    server = Server(data, config=cfg, env=clock.env).start()
    a, b = create_account(data, "alpha"), create_account(data, "beta")
    try:
        with server.client(a) as alpha, server.client(b) as beta:
            yield Rig(server, clock, alpha, beta)
    finally:
        server.stop()
        sim.stop()


def _send(api: httpx.Client, to: str, body: str = TEXT) -> httpx.Response:
    return api.post("/api/messages", json={"to": to, "body": body, "type": "transactional"})


def test_a_single_send_of_the_same_text_the_same_day_is_refused(rig: Rig) -> None:
    assert _send(rig.alpha, "+905350000001").status_code == 202
    again = _send(rig.alpha, "0535 000 00 01")
    assert again.status_code == 409 and again.json()["error"] == "duplicate_today"
    assert _send(rig.alpha, "+905350000001", TEXT + "!").status_code == 202
    assert _send(rig.beta, "+905350000001").status_code == 202  # never across accounts
    rig.clock.set(LATE_EVENING_MS + 3_600_000)  # past midnight in Istanbul
    assert _send(rig.alpha, "+905350000001").status_code == 202


def test_a_campaign_skips_and_counts_the_numbers_that_had_the_text_today(rig: Rig) -> None:
    numbers = import_list(rig.alpha, "dups", 10, prefix="+90536")
    for n in numbers[:3]:
        assert _send(rig.alpha, n).status_code == 202
    body = {"list": "dups", "body": TEXT, "type": "transactional"}
    plan = rig.alpha.post("/api/campaigns", json={**body, "dry_run": True}).json()
    assert (plan["messages"], plan["parts"], plan["duplicate_today"]) == (7, 7, 3), plan
    other = rig.alpha.post("/api/campaigns", json={**body, "body": TEXT + ".",
                                                   "dry_run": True}).json()
    assert (other["messages"], other["duplicate_today"]) == (10, 0)  # another text
    first = rig.alpha.post("/api/campaigns", json=body).json()["campaignId"]
    done = wait_for(lambda: (c := show(rig.alpha, first))["state"] == "DONE" and c, 60,
                    message="the first campaign")
    assert done["duplicate_today"] == 3 and done["counts"]["CANCELLED"] == 3
    # The same list again under another campaign: every number had it today.
    plan = rig.alpha.post("/api/campaigns", json={**body, "dry_run": True}).json()
    assert (plan["messages"], plan["parts"], plan["duplicate_today"]) == (0, 0, 10), plan
    second = rig.alpha.post("/api/campaigns", json=body).json()["campaignId"]
    again = wait_for(lambda: (c := show(rig.alpha, second))["state"] == "DONE" and c, 60,
                     message="the second campaign")
    assert again["duplicate_today"] == 10 and again["created"] == 10
