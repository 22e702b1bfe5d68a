"""``query_sm`` through the whole appliance (ROUTE-2): an SMSC whose receipts are off
(the built-in one, then node-smpp's server) still reaches full coverage, every message
asked about on the session and closed by the answers, each kept raw first and shown with
``"source": "pull"``; bad answers move nothing and are kept raw."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from appliance.message_text.segments import segment
from appliance.reports.aggregate import message_state
from appliance.smpp.query import CONTENT_TYPE
from appliance.smpp.receipt import state_of
from tests.harness import Server, create_account, wait_for
from tests.smpp.appliance_rig import (
    FINAL,
    PROVIDER,
    campaign,
    metric,
    numbers,
    query,
    rig,
    smpp_config,
)
from tests.smpp.node_peer import NodeSmsc

PULL = "pull = true\npull_after_s = 1\npull_rate_per_s = 50\n"
LONG = "Kampanya başladı: tüm ürünlerde indirim var, mağazada ve sitede! " * 2


def _expected(stats: dict[str, Any]) -> dict[str, str]:
    """Each message's final state from the SMSC's own fates of its segments."""
    by_msisdn: dict[str, list[str]] = {}
    for seg, smsc_id in stats["accepted"].items():
        dest, _ = seg.split(":", 1)
        by_msisdn.setdefault("+" + dest, []).append(state_of(stats["finals"][smsc_id]))
    return {m: message_state(states) for m, states in by_msisdn.items()}


def test_receipts_off_every_message_final_by_query_sm(tmp_path: Path) -> None:
    with rig(tmp_path, "--silent-rate", "1", "--seed", "4", config_extra=PULL,
             response_timeout_s=2.5) as r, r.api() as api:
        to = numbers(12)
        assert segment(LONG).count == 2
        campaign_id = campaign(api, "silent", to, LONG)
        single = api.post("/api/messages", json={"to": "+905329999999", "body": "hello",
                                                 "provider": PROVIDER})
        assert single.status_code == 202, single.text

        def covered() -> dict[str, Any] | None:
            shown: dict[str, Any] = api.get(f"/api/campaigns/{campaign_id}").json()
            return shown if shown["coverage_pct"] == 100.0 else None

        shown = wait_for(covered, 60, interval=0.25, message="full coverage by query_sm")
        assert shown["finalised"] == len(to)
        ref = single.json()["ref"]
        wait_for(lambda: api.get(f"/api/messages/{ref}").json()["state"] in FINAL, 30,
                 interval=0.1, message="the single message final")
        stats = r.smsc.smpp()
        assert not stats["receipts_written"]  # nothing pushed: every state came by asking
        states = {m: s for m, s in query(r.data, "SELECT msisdn, state FROM messages")}
        assert states == _expected(stats)
        # One query_sm per part, each part asked by the id its SMSC answered with.
        asked = stats["queries"]
        assert set(asked) == set(stats["accepted"].values())
        assert all(1 <= n <= 3 for n in asked.values()), asked
        for (each,) in query(r.data, "SELECT ref FROM messages"):
            m = api.get(f"/api/messages/{each}").json()
            assert m["history"] and all(h["source"] == "pull" for h in m["history"]), m
        # Each answer kept raw first, the PDU as it came, and nothing left waiting.
        raw = query(r.data, "SELECT count(*), min(content_type), min(parsed) FROM raw_reports"
                            " WHERE method = 'PULL'")
        assert raw[0][1:] == (CONTENT_TYPE, 1) and raw[0][0] >= len(asked)
        assert query(r.data, "SELECT count(*) FROM report_inbox WHERE applied_at IS NULL"
                     " OR source != 'pull'")[0][0] == 0
        assert metric(r.server, "appliance_report_pulls_total", provider=PROVIDER,
                      outcome="final") == len(to) + 1
        # How the SMSC writes its ids (8 hex digits, capitals) is kept for a restart.
        kept = wait_for(lambda: query(r.data, "SELECT value FROM appliance_state WHERE key"
                                              f" = 'smpp.{PROVIDER}.id_shape'"), 10)
        assert json.loads(kept[0][0]) == {"upper": True, "width": 8}


def test_node_smpp_answers_and_its_bad_answers_move_nothing(tmp_path: Path) -> None:
    node = NodeSmsc(receipts=False)
    data = tmp_path / "data"
    server: Server | None = None
    try:
        node.wait_ready()
        cfg = smpp_config(tmp_path / "appliance.toml", node.port, extra=PULL,
                          response_timeout_s=2.5)
        key = create_account(data)
        server = Server(data, cfg)
        server.start()
        # By the recipient's last digit node's script answers DELIVERED (0, 1), a
        # message_state outside SMPP 3.4 (7), a final_date that is no time (8), ENROUTE (9).
        to = {d: f"+9053200000{d}{d}" for d in "01789"}
        with server.client(key) as api:
            refs = {}
            for d, msisdn in to.items():
                made = api.post("/api/messages", json={"to": msisdn, "body": "hello " + d})
                assert made.status_code == 202, made.text
                refs[d] = made.json()["ref"]

            def asked() -> list[Any] | None:
                rows = query(data, "SELECT m.msisdn, m.state, p.last_outcome FROM messages m"
                                   " JOIN message_pulls p ON p.message_id = m.id")
                return rows if len(rows) == 5 and all(o for _, _, o in rows) and all(
                    s == "DELIVERED" for m, s, _ in rows if m[-1] in "01") else None

            got = {m[-1]: (s, o) for m, s, o in wait_for(asked, 60, interval=0.2,
                                                         message="every message asked")}
            assert got == {"0": ("DELIVERED", "final"), "1": ("DELIVERED", "final"),
                           "7": ("SUBMITTED", "error"), "8": ("SUBMITTED", "error"),
                           "9": ("SUBMITTED", "pending")}
            for d in "0178":
                m = api.get(f"/api/messages/{refs[d]}").json()
                assert [h["source"] for h in m["history"]] == (["pull"] if d in "01" else [])
            # The bad answers are kept raw, unread, with the reason.
            bad = query(data, "SELECT query, parsed, error, length(body) FROM raw_reports"
                              " WHERE method = 'PULL' AND parsed = 0")
            reasons = " ".join(str(e) for _, _, e, _ in bad)
            assert len(bad) >= 2 and "message_state 9" in reasons and "final_date" in reasons
            assert all(n > 16 for *_, n in bad)
        assert {(q["source_addr"], q["source_ton"]) for q in node.of("query")} == {("ACME", 5)}
        assert not node.of("deliver_resp")
    finally:
        if server is not None:
            server.stop()
        node.stop()
