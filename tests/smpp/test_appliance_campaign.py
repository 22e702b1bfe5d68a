"""Campaigns through ``kind = "smpp"``, the whole appliance in its own process (SMPP-1..6).

Against the built-in SMSC simulator with every misbehaviour at once, and against an
SMSC the project did not write (smpp34's server), so the appliance, the session and our
simulator cannot share a misreading of the protocol.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx
import pytest

from appliance.message_text.segments import segment
from tests.harness import Server, create_account, wait_for
from tests.smpp.appliance_rig import (
    FINAL,
    PROVIDER,
    campaign,
    expected_message_states,
    key_of,
    metric,
    numbers,
    parts,
    query,
    rig,
    smpp_config,
    taken_segments,
)
from tests.smpp.test_foreign_smsc import ForeignSmsc

# Two UCS-2 parts (ş, ğ, ı, İ are not GSM-7), each starting differently.
LONG_TURKISH = ("Değerli müşterimiz, kampanyamız başladı: tüm ürünlerde %20 indirim! "
                "Kaçırmayın, stoklar sınırlı. İyi alışverişler dileriz, ACME.")
MESSAGES = 2000


@pytest.mark.slow
def test_a_2000_message_campaign_with_every_misbehaviour_at_once(tmp_path: Path) -> None:
    seg = segment(LONG_TURKISH)
    assert (seg.encoding, seg.count) == ("UCS-2", 2)
    flags = ("--seed", "21", "--delay-min-ms", "0", "--delay-max-ms", "40",
             "--early-reports", "0.3",  # receipts before the submit_sm_resp
             "--duplicate-rate", "0.2", "--intermediate-rate", "0.2",
             "--reorder-rate", "0.1",  # ENROUTE after the final receipt
             "--throttle-rate", "0.02",  # ESME_RTHROTTLED
             "--smpp-ids", "hex-text-decimal", "--smpp-no-tlvs",  # hex answered, decimal text
             "--smpp-fail-segment-rate", "0.1",  # the last segment UNDELIV
             "--smpp-drop-every", "1700")  # the session dropped mid-window, twice
    with rig(tmp_path, *flags, rate_per_s=5000) as r, r.api() as api:
        to = numbers(MESSAGES)
        campaign_id = campaign(api, "all-at-once", to, LONG_TURKISH)

        def settled() -> bool:
            done = query(r.data, "SELECT count(*) FROM messages WHERE state IN"
                                 " ('DELIVERED', 'FAILED', 'EXPIRED', 'REJECTED')")[0][0]
            return bool(done == MESSAGES)

        wait_for(settled, 90, interval=0.25, message="every message final")
        stats = r.smsc.smpp()
        taken = taken_segments(stats)
        # Nothing sent twice: every segment taken once, and every part taken.
        assert Counter(s.times_taken for s in taken) == Counter({1: MESSAGES * 2})
        assert stats["drops"] >= 2 and stats["submit_statuses"].get("88", 0) > 0
        # Each part carries its segment's id, in the appliance's canonical form.
        by_segment = {(s.msisdn, s.part): s for s in taken}
        rows = parts(r.data)
        assert len(rows) == MESSAGES * 2
        for p in rows:
            s = by_segment[(p.msisdn, p.part)]
            assert (p.provider_msg_id, p.state) == (key_of(s.smsc_id), s.final_state), p
        # Exact final states: each message as its parts' receipts say (MSG-4).
        expected = expected_message_states(taken, dict.fromkeys(to, 2))
        states = {p.msisdn: p.message_state for p in rows}
        assert states == expected
        assert {"DELIVERED", "FAILED"} <= set(states.values())
        # 100% coverage, nothing waiting, and the race really was run.
        shown = api.get(f"/api/campaigns/{campaign_id}").json()
        assert shown["total"] == MESSAGES and shown["uncertain"] == 0
        assert shown["coverage_pct"] == 100.0 and shown["finalised"] == MESSAGES, shown
        assert sum(shown["counts"].get(s, 0) for s in FINAL) == MESSAGES, shown
        assert query(r.data, "SELECT count(*) FROM report_inbox WHERE applied_at IS NULL"
                     )[0][0] == 0
        stale = query(r.data, "SELECT count(*) FROM report_inbox WHERE outcome = 'STALE'")
        assert stale[0][0] > 0  # duplicates and late ENROUTEs kept as history only
        assert metric(r.server, "appliance_smpp_orphan_receipts_matched_total",
                      provider=PROVIDER) > 0  # receipts of the dropped window's segments
        assert metric(r.server, "appliance_smpp_throttled_total", provider=PROVIDER) > 0
        assert metric(r.server, "appliance_smpp_reconnects_total", provider=PROVIDER) >= 2
        # Every receipt the SMSC was answered ESME_ROK for is kept raw (and some more:
        # a receipt stored just before a drop, its answer lost with the session, came
        # again and was kept again).
        raw = query(r.data, "SELECT count(*), min(method), min(content_type), min(parsed)"
                            " FROM raw_reports")
        acked = sum(len(w) for w in stats["receipts_acked"].values())
        assert raw[0][0] >= acked and raw[0][1:] == (
            "SMPP", "application/vnd.smpp.deliver-sm", 1)


def test_a_campaign_through_an_smsc_we_did_not_write(tmp_path: Path) -> None:
    foreign = ForeignSmsc()
    data = tmp_path / "data"
    cfg = smpp_config(tmp_path / "appliance.toml", foreign.port)
    key = create_account(data)
    server = Server(data, cfg)
    try:
        foreign.wait_ready()
        server.start()
        with server.client(key) as api:
            to = numbers(30)
            body = "İptal için DUR yazın; kampanya bilgisi: " + "ğüşıöç " * 10
            assert segment(body).count == 2
            campaign_id = campaign(api, "foreign", to, body)

            def delivered() -> dict[str, object] | None:
                shown: dict[str, object] = api.get(f"/api/campaigns/{campaign_id}").json()
                counts = shown["counts"]
                assert isinstance(counts, dict)
                return shown if counts.get("DELIVERED") == len(to) else None

            wait_for(delivered, 30, message="the campaign delivered")
            submits = {e["id"]: e for e in foreign.of("submit")}
            assert len(submits) == len(to) * 2  # one submit_sm per segment, none twice
            rows = parts(data)
            assert sorted(p.provider_msg_id or "" for p in rows) == sorted(
                key_of(i) for i in submits)  # F00D0001...: hex, read as hex
            for e in submits.values():
                assert (e["data_coding"], e["esm_class"], e["registered_delivery"]) == (8, 0x40, 1)
            # Its inbound message came over the session and was stored.
            inbound = wait_for(lambda: api.get("/api/inbound").json()["inbound"], 10)
            assert inbound[0]["text"] == "IPTAL et" and inbound[0]["from"] == "+905320000001"
        assert httpx.get(server.url + "/readyz").json()["checks"][f"smpp:{PROVIDER}"]["ok"]
    finally:
        server.stop()
        foreign.proc.kill()
        foreign.proc.wait(5)
    assert foreign.of("unbound"), "the appliance unbinds when it stops"
