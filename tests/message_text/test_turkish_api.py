"""ENC-1 through a real server and the simulator in its own process: the send answer,
the message, the dry run and the campaign say GSM-7 Turkish and what UCS-2 would take,
and the simulator splits the text into the parts the appliance counted."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.harness import FileClock, Server, create_account, run_cli, wait_for
from tests.sending.support import SimulatorProcess, message, provider_config, wait_state
from tests.sending.support_campaigns import import_list, show
from tests.web.console_support import create_user, page_token, sign_in

TURKISH = ("Merhaba Ayşe, kampanyamız başladı! Bu hafta tüm ürünlerde yüzde yirmi indirim"
           " var, kaçırmayın lütfen")  # 2 parts in UCS-2, 1 with the Turkish tables


@dataclass
class Rig:
    server: Server
    sim: SimulatorProcess
    api: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("turkish")
    sim = SimulatorProcess(tmp, "--delivered-rate", "1", "--delay-min-ms", "10",
                           "--delay-max-ms", "50").start()
    data = tmp / "data"
    data.mkdir()
    clock = FileClock(tmp / "clock", time.time_ns() // 1_000_000)
    cfg = provider_config(tmp / "cfg.toml", sim.url, extra='national_language = "turkish"\n')
    server = Server(data, config=cfg, env=clock.env).start()
    key = create_account(data, "acme")
    create_user(data, "alice", "acme")
    try:
        with server.client(key) as api:
            yield Rig(server, sim, api)
    finally:
        server.stop()
        sim.stop()


def test_a_send_says_gsm7_turkish_and_what_ucs2_would_take(rig: Rig) -> None:
    r = rig.api.post("/api/messages", json={"to": "+905321112233", "body": TURKISH})
    assert r.status_code == 202, r.text
    answer = r.json()
    assert (answer["encoding"], answer["parts"], answer["ucs2_parts"],
            answer["ucs2_because"]) == ("GSM-7 Turkish", 1, 2, None)
    m = wait_state(rig.api, answer["ref"], "DELIVERED")
    assert (m["encoding"], m["parts"], m["ucs2_parts"]) == ("GSM-7 Turkish", 1, 2)
    assert len(m["part_reports"]) == 1
    assert rig.sim.ref(answer["ref"])["parts"] == 1  # the simulator split it the same way


def test_abroad_and_outside_the_tables_it_stays_ucs2(rig: Rig) -> None:
    abroad = rig.api.post("/api/messages", json={"to": "+447911123456", "body": TURKISH})
    assert abroad.status_code == 202, abroad.text
    assert (abroad.json()["encoding"], abroad.json()["parts"]) == ("UCS-2", 2)
    lira = rig.api.post("/api/messages", json={"to": "+905321112234",
                                               "body": "Sepetiniz 100₺, ödeme bekliyor"})
    got = message(rig.api, lira.json()["ref"])
    assert (got["encoding"], got["ucs2_because"], got["ucs2_parts"]) == ("UCS-2", "₺", 1)


def test_dry_run_and_campaign_say_what_ucs2_would_take(rig: Rig) -> None:
    import_list(rig.api, "tr", 5)
    body = TURKISH + " Sayın müşterimiz, RET yazıp 4609'a gönderin."  # 1 part, 3 in UCS-2
    dry = rig.api.post("/api/campaigns", json={"list": "tr", "body": body, "dry_run": True})
    assert dry.status_code == 200, dry.text
    d = dry.json()
    assert (d["encoding"], d["messages"], d["parts"], d["ucs2_parts"]) == (
        "GSM-7 Turkish", 5, 5, 15)
    made = rig.api.post("/api/campaigns", json={"list": "tr", "body": body})
    assert made.status_code == 202, made.text
    cid = made.json()["campaignId"]
    c = wait_for(lambda: (s := show(rig.api, cid))["created"] == 5 and s, 30,
                 message="campaign expanded")
    assert (c["encoding"], c["parts"], c["ucs2_parts"]) == (
        d["encoding"], d["parts"], d["ucs2_parts"])


def test_a_provider_that_cannot_send_the_tables_is_refused(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[providers.v]\nkind = "vonage"\napi_key = "k"\napi_secret = "s"\n'
                   'national_language = "turkish"\n')
    out = run_cli("config", "check", "--config", str(cfg), "--data-dir", str(tmp_path / "d"),
                  check=False)
    assert out.returncode != 0
    assert "national_language: kind 'vonage' cannot send national language tables" in (
        out.stdout + out.stderr)


def test_the_console_confirmation_says_what_ucs2_would_be(rig: Rig) -> None:
    import_list(rig.api, "tr-console", 3, prefix="+90533")
    with sign_in(rig.server) as client:
        token = page_token(client, "/send")
        keys = re.findall(r'name="send_key" value="([^"]+)"', client.get("/send").text)
        review = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": keys[1], "list": "tr-console", "body": TURKISH})
        assert review.status_code == 200, review.text
        shown = re.sub(r"<[^>]+>", "", html.unescape(review.text))
        assert "3 messages, 3 parts (UCS-2 would be 6), GSM-7 Turkish" in shown
        assert 'data-confirm-ucs2-parts="6"' in review.text
