"""ENC-1 through the whole appliance over SMPP: a Turkish campaign accepted as GSM-7
Turkish goes out in those parts, the SMSC simulator (its own process) reads every text
back whole, and every part's receipt closes its message."""

from __future__ import annotations

from pathlib import Path

from tests.harness import wait_for
from tests.smpp.appliance_rig import FINAL, campaign, numbers, query, rig

BODY = ("Sayın müşterimiz, kışlık ürünlerde %30 indirim 31.12.2026'ya kadar geçerli! Ödeme"
        " kapıda, taksit imkanıyla. Mesaj almak istemiyorsanız RET yazıp 4609'a gönderin."
        " İyi alışverişler dileriz, Çiçek Evi")


def test_a_turkish_campaign_over_smpp(tmp_path: Path) -> None:
    with rig(tmp_path, "--delivered-rate", "1", "--delay-min-ms", "0", "--delay-max-ms", "20",
             config_extra='national_language = "turkish"') as r, r.api() as api:
        to = numbers(5)
        cid = campaign(api, "tr", to, BODY)
        shown = api.get(f"/api/campaigns/{cid}").json()
        assert (shown["encoding"], shown["parts"], shown["ucs2_parts"]) == (
            "GSM-7 Turkish", 10, 15)
        wait_for(lambda: api.get(f"/api/campaigns/{cid}").json()["finalised"] == 5, 60,
                 message="every message final")
        states = query(r.data, "SELECT state, parts, encoding FROM messages")
        assert states == [("DELIVERED", 2, "GSM-7 Turkish")] * 5
        assert {s for (s,) in query(r.data, "SELECT state FROM message_parts")} <= set(FINAL)
        texts = r.smsc.smpp()["texts"]
        assert sorted(texts) == sorted([m.removeprefix("+"), BODY] for m in to)
