"""The puller never asks a provider faster than its published limit of status queries
(ROUTE-2): Netgsm takes 10 report queries a minute, Verimor 20. The kind declares it
(``status_queries_per_s``) and the smallest of ``pull_rate_per_s``, ``requests_per_s``
and that limit is the pace, whatever the table says."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from appliance.config import ProviderSettings
from appliance.provider_kinds import KINDS
from appliance.reports.puller import pull_rate
from appliance.simulator.verimor_fake import RunningFake, VerimorFake
from tests.harness import Server, create_account, wait_for
from tests.providers.test_verimor_server import config
from tests.sending.support import send, wait_state

FAST = 1000.0  # a pull_rate_per_s above every published limit
# Status requests a second the puller makes at pull_rate_per_s = FAST, requests_per_s
# unset: the kind's published limit of status queries, else of requests, else FAST.
PACE_AT_FAST = {
    "simulator": FAST,
    "twilio": FAST,
    "infobip": FAST,
    "verimor": 20 / 60,  # the guide, "GENEL NOTLAR": 20 status queries a minute
    "iletimerkezi": 100.0,  # its published 100 requests a second
    "netgsm": 10 / 60,  # the reference: code 80 past 10 report queries a minute
    "smpp": FAST,
}
# The kinds whose provider publishes a limit of status queries.
STATUS_LIMIT = {"verimor": 20 / 60, "netgsm": 10 / 60}


def settings(kind: str, **changes: float) -> ProviderSettings:
    return ProviderSettings(name="p", kind=kind, pull_rate_per_s=changes.get("pull", FAST),
                            requests_per_s=changes.get("requests", 0.0))


def test_every_kind_that_can_be_asked_has_its_pace() -> None:
    asked = {name for name, kind in KINDS.items() if kind.status_query}
    assert asked == set(PACE_AT_FAST)
    for name, pace in PACE_AT_FAST.items():
        assert pull_rate(settings(name), KINDS[name]) == pytest.approx(pace), name


@pytest.mark.parametrize("kind", sorted(PACE_AT_FAST))
def test_the_smallest_of_the_setting_and_the_published_limits_wins(kind: str) -> None:
    declared = KINDS[kind]
    # A setting below every limit is the pace.
    assert pull_rate(settings(kind, pull=0.01), declared) == pytest.approx(0.01)
    # A table's own requests_per_s below the limits bounds the pulls too.
    assert pull_rate(settings(kind, requests=0.05), declared) == pytest.approx(0.05)
    # A table's requests_per_s (what the provider agreed) replaces the kind's published
    # request rate, but no setting lifts the published limit of status queries.
    assert pull_rate(settings(kind, requests=500.0), declared) == pytest.approx(
        min(500.0, STATUS_LIMIT.get(kind, FAST)))
    assert declared.status_queries_per_s == pytest.approx(STATUS_LIMIT.get(kind, 0.0))


def test_the_puller_asks_verimor_no_faster_than_its_published_limit(
        data_dir: Path, tmp_path: Path) -> None:
    """``pull_rate_per_s = 50`` in the table, and four campaigns due at once: the status
    queries still go 3 s apart (20 a minute), so the fake never answers ``429``."""
    fake = VerimorFake(push="none", status_limit_per_min=20)
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(
            tmp_path / "vr.toml", running.base_url,
            extra="pull_after_s = 1\npull_rate_per_s = 50\n")).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                # Four texts, four requests: four campaigns, each asked about on its own.
                refs = [send(api, f"+90532123450{i}", f"Kampanya {i}") for i in range(4)]
                seen: dict[int, float] = {}

                def asked(n: int) -> bool:
                    count = fake.requests["status"]
                    for k in range(1, count + 1):
                        seen.setdefault(k, time.monotonic())
                    return count >= n

                wait_for(lambda: asked(1), 30, interval=0.02, message="the first status query")
                wait_for(lambda: asked(3), 30, interval=0.02, message="the third status query")
                done = [wait_state(api, ref, "DELIVERED", timeout=30) for ref in refs]
        finally:
            server.stop()
    assert [d["state"] for d in done] == ["DELIVERED"] * 4
    # Two gaps of 3 s at least (each time is seen a poll late, and a request may reach
    # the fake a little sooner after leaving than the one before did).
    assert seen[3] - seen[1] >= 2 * 3.0 - 0.3, seen
    assert fake.requests["status"] == 4  # one a campaign: none answered 429, none again
