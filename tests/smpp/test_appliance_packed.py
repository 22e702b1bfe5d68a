"""``septets = "packed"`` through the whole appliance: Turkish campaigns go out as packed
septets after their UDH, in the parts the API counted, and the SMSC simulator (its own
process, reading packed segments as the provider's option says) re-joins every text."""

from __future__ import annotations

from pathlib import Path

import httpx

from appliance.message_text.segments import segment
from appliance.smpp.encoding import encode_parts
from tests.harness import wait_for
from tests.smpp.appliance_rig import campaign, numbers, query, rig

BODIES = [
    # Two parts, the Turkish single shift beside the concatenation element.
    ("Sayın müşterimiz, kışlık ürünlerde %30 indirim 31.12.2026'ya kadar geçerli! Ödeme"
     " kapıda, taksit imkanıyla. Mesaj almak istemiyorsanız RET yazıp 4609'a gönderin."
     " İyi alışverişler dileriz, Çiçek Evi"),
    # Two parts, the locking shift; € and [ ] escaped.
    "ışığı şişşşğğğ ıııı çççç € [İ] Ş Ğ " * 6,
    # One part, no UDH, 7 septets: the last octet's 7 spare bits hold <CR>.
    "Merhaba",
]


def finalised(api: httpx.Client, campaign_id: int) -> int:
    done: int = api.get(f"/api/campaigns/{campaign_id}").json()["finalised"]
    return done


def test_a_turkish_campaign_over_smpp_in_packed_septets(tmp_path: Path) -> None:
    with rig(tmp_path, "--smpp-septets", "packed", "--delivered-rate", "1",
             "--delay-min-ms", "0", "--delay-max-ms", "20",
             config_extra='national_language = "turkish"\nseptets = "packed"') as r, \
            r.api() as api:
        expected: list[list[str]] = []
        lengths: list[int] = []
        cids: list[int] = []
        for i, body in enumerate(BODIES):
            to = numbers(3, base=5_320_000_000 + 100 * i)
            seg = segment(body, turkish=True)
            cid = campaign(api, f"tr{i}", to, body)
            shown = api.get(f"/api/campaigns/{cid}").json()
            assert (shown["encoding"], shown["parts"]) == (seg.encoding, 3 * seg.count)
            cids.append(cid)
            expected += [[m.removeprefix("+"), body] for m in to]
            packed = encode_parts(seg.parts, seg.encoding, 0, seg.tables, "packed")
            lengths += [len(p.short_message) for p in packed] * 3
        wait_for(lambda: all(finalised(api, c) == 3 for c in cids), 60,
                 message="every message final")
        assert {s for (s,) in query(r.data, "SELECT state FROM messages")} == {"DELIVERED"}
        stats = r.smsc.smpp()
        assert sorted(stats["texts"]) == sorted(expected)
        taken = [bytes.fromhex(key.split(":")[1]) for key in stats["taken"]]
        assert sorted(len(sm) for sm in taken) == sorted(lengths)  # packed, not one an octet
        assert set(stats["taken"].values()) == {1}
