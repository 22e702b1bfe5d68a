"""``receipt_id_format = "auto"`` switching to hexadecimal on a first session, with
receipts before their answers and duplicates after (SMPP-4, DLR-2).

The simulated SMSC counts its ids up from ``10000000``: the first ten show no letter,
so ``auto`` reads them as decimal until ``1000000A``. A receipt that came before its
``submit_sm_resp`` waits under the decimal reading; its duplicate, read after the
switch, is filed under the hexadecimal one. Re-filing the first must merge it into the
second (they are the same fact), never leave it waiting.
"""

from __future__ import annotations

from pathlib import Path

from tests.harness import wait_for
from tests.smpp.appliance_rig import key_of, numbers, parts, query, rig

FLAGS = ("--seed", "1", "--smpp-ids", "hex-counting", "--delivered-rate", "1",
         "--delay-min-ms", "0", "--delay-max-ms", "0", "--early-reports", "1",
         "--duplicate-rate", "1", "--smpp-resp-delay-ms", "150",
         "--smpp-repeat-delay-ms", "200")


def test_receipts_read_before_the_switch_merge_with_their_duplicates(tmp_path: Path) -> None:
    with rig(tmp_path, *FLAGS, rate_per_s=100) as r, r.api() as api:
        to = numbers(30)
        for i, number in enumerate(to):
            sent = api.post("/api/messages", json={"to": number, "body": f"kod {i}"})
            assert sent.status_code == 202, sent.text

        def delivered() -> bool:
            got = parts(r.data)
            return len(got) == len(to) and all(p.state == "DELIVERED" for p in got)

        wait_for(delivered, 60, interval=0.25, message="every message DELIVERED")
        stats = r.smsc.smpp()
        acked = stats["receipts_acked"]
        assert sorted(acked) == sorted(stats["accepted"].values())
        # Some ids were read both ways: the case under test happened.
        assert any(int(i, 16) < 0x1000000A for i in acked)
        duplicates = sum(len(words) - 1 for words in acked.values())
        assert duplicates == len(to)

        def inbox() -> tuple[int, int, int]:
            waiting, rows, repeats = query(
                r.data, "SELECT count(*) FILTER (WHERE applied_at IS NULL), count(*),"
                        " coalesce(sum(repeats), 0) FROM report_inbox")[0]
            return int(waiting), int(rows), int(repeats)

        # Nothing stranded: one row per receipt, its duplicate counted as a repeat.
        wait_for(lambda: inbox() == (0, len(to), duplicates), 40, interval=0.25,
                 message="every receipt filed once, its duplicate counted")
        # Every part is known by its id's hexadecimal value.
        assert {p.provider_msg_id for p in parts(r.data)} == {key_of(i) for i in acked}
        stats_api = api.get("/api/stats").json()
        assert stats_api["inbox"]["waiting"] == 0
