"""``kind = "smpp"`` when things break: the appliance killed, the session lost, the
store failing, answers that come late (SMPP-2, SMPP-4, SMPP-5), and STOP over SMPP."""

from __future__ import annotations

import time
from pathlib import Path

import apsw
import httpx
import pytest

from appliance.message_text.segments import segment
from appliance.smpp.receipt import state_of
from appliance.smpp.status import ESME_RX_T_APPN
from tests.harness import free_port, wait_for
from tests.smpp.appliance_rig import (
    FINAL,
    PROVIDER,
    Rig,
    TakenSegment,
    campaign,
    expected_message_states,
    key_of,
    metric,
    numbers,
    parts,
    query,
    rig,
    taken_segments,
)
from tests.web.console_support import create_user, sign_in

TWO_PARTS = ("Sayın müşterimiz, siparişiniz yola çıktı ve yarın teslim edilecek. "
             "Takip için bağlantıya tıklayın; sorular için bize yazın.")
OPEN = ("QUEUED", "SENDING", "RETRY")


assert segment(TWO_PARTS).count == 2


def settled(r: Rig) -> bool:
    """Nothing is left to send or being sent."""
    marks = ",".join(f"'{s}'" for s in OPEN)
    return bool(query(r.data, f"SELECT count(*) FROM messages WHERE state IN ({marks})"
                      )[0][0] == 0)


def every_taken_segment_settled(r: Rig) -> list[TakenSegment] | None:
    """The SMSC's segments, once each one's part holds the state its receipts say."""
    taken = taken_segments(r.smsc.smpp())
    have = {(p.msisdn, p.part): p for p in parts(r.data)}
    for s in taken:
        p = have.get((s.msisdn, s.part))
        if p is None or (p.provider_msg_id, p.state) != (key_of(s.smsc_id), s.final_state):
            return None
    return taken


def check_nothing_lost(r: Rig, taken: list[TakenSegment], to: list[str]) -> None:
    """Nothing sent twice; every receipt the SMSC was answered ESME_ROK for is applied;
    a part left UNCERTAIN is one the SMSC never took."""
    stats = r.smsc.smpp()
    assert {s.times_taken for s in taken} == {1}
    for smsc_id, words in stats["receipts_acked"].items():
        rows = query(r.data, "SELECT state FROM message_parts WHERE provider_msg_id = ?",
                     (key_of(smsc_id),))
        final = [w for w in words if state_of(w) in FINAL]
        assert rows == [(state_of(final[0]),)] if final else len(rows) == 1, smsc_id
    assert query(r.data, "SELECT count(*) FROM report_inbox WHERE applied_at IS NULL"
                 )[0][0] == 0
    got = {(s.msisdn, s.part) for s in taken}
    for p in parts(r.data):
        if p.state == "UNCERTAIN":
            assert (p.msisdn, p.part) not in got, p
    expected = expected_message_states(taken, dict.fromkeys(to, 2))
    for p in parts(r.data):
        if p.msisdn in expected:
            assert p.message_state == expected[p.msisdn], p


@pytest.mark.slow
def test_kill9_mid_campaign_restart_rebinds_sends_nothing_twice_and_applies_every_receipt(
        tmp_path: Path) -> None:
    flags = ("--seed", "5", "--delay-min-ms", "0", "--delay-max-ms", "300",
             "--early-reports", "0.3", "--duplicate-rate", "0.2",
             "--smpp-ids", "hex-text-decimal", "--smpp-no-tlvs")
    with rig(tmp_path, *flags, rate_per_s=300) as r, r.api() as api:
        to = numbers(500)
        campaign(api, "killed", to, TWO_PARTS)
        wait_for(lambda: len(r.smsc.smpp()["receipts_acked"]) >= 150, 30,
                 message="receipts under way")
        r.server.kill9()
        before = r.smsc.smpp()
        assert len(before["taken"]) < len(to) * 2  # killed mid-campaign
        r.server.restart()
        wait_for(lambda: settled(r), 60, interval=0.25, message="sending over")
        taken = wait_for(lambda: every_taken_segment_settled(r), 60, interval=0.25,
                         message="every taken segment's receipt applied")
        after = r.smsc.smpp()
        assert after["binds"] >= 2 and after["sessions"] == 1
        check_nothing_lost(r, taken, to)
        # At most the transport's concurrency (the window, in messages) was SENDING when
        # the process died (OPS-6): only those can be UNCERTAIN. A receipt for a part of
        # theirs whose answer died with the process is matched to it by what it carries
        # (how many there are depends on where the kill landed; the session-loss test
        # proves the matching itself).
        uncertain = query(r.data, "SELECT count(*) FROM messages WHERE state = 'UNCERTAIN'")
        assert int(uncertain[0][0]) <= 10


def test_session_lost_mid_window_uncertain_if_written_retry_if_not(tmp_path: Path) -> None:
    flags = ("--seed", "9", "--delay-min-ms", "0", "--delay-max-ms", "20",
             "--smpp-resp-delay-ms", "400")
    with rig(tmp_path, *flags, rate_per_s=5000) as r, r.api() as api:
        to = numbers(60)
        campaign(api, "lost", to, TWO_PARTS)
        wait_for(lambda: metric(r.server, "appliance_smpp_window_in_use",
                                provider=PROVIDER) == 10, 20, message="the window full")
        assert r.smsc.drop() == 1
        wait_for(lambda: settled(r), 60, interval=0.25, message="sending over")
        taken = wait_for(lambda: every_taken_segment_settled(r), 60, interval=0.25,
                         message="every taken segment settled")
        check_nothing_lost(r, taken, to)
        # The ten written and unanswered became UNCERTAIN, never sent again; those
        # still waiting for the window were RETRY, and sent after the rebind.
        assert metric(r.server, "appliance_smpp_submit_sm_total", outcome="uncertain",
                      provider=PROVIDER) == 10
        assert metric(r.server, "appliance_smpp_submit_sm_total", outcome="retried",
                      provider=PROVIDER) > 0
        # The SMSC had taken (and would never answer) some of them: their receipts,
        # whose ids we never learnt, resolved those UNCERTAIN parts.
        assert metric(r.server, "appliance_smpp_orphan_receipts_matched_total",
                      provider=PROVIDER) > 0
        uncertain = query(r.data, "SELECT error FROM message_parts WHERE state = 'UNCERTAIN'")
        assert all("session lost before submit_sm_resp" in str(e[0]) for e in uncertain)


def test_a_late_answer_records_the_id_and_its_receipt_applies(tmp_path: Path) -> None:
    flags = ("--seed", "3", "--delay-min-ms", "0", "--delay-max-ms", "0",
             "--delivered-rate", "1", "--smpp-resp-delay-ms", "1200")
    with rig(tmp_path, *flags, response_timeout_s=0.4) as r, r.api() as api:
        ref = api.post("/api/messages", json={"to": "+905321110000", "body": "geç cevap"})
        assert ref.status_code == 202, ref.text

        def delivered() -> dict[str, object] | None:
            m: dict[str, object] = api.get(f"/api/messages/{ref.json()['ref']}").json()
            return m if m["state"] == "DELIVERED" else None

        shown = wait_for(delivered, 20, message="delivered")
        [smsc_id] = r.smsc.smpp()["accepted"].values()
        part_reports = shown["part_reports"]
        assert isinstance(part_reports, list)
        assert part_reports[0]["provider_msg_id"] == key_of(smsc_id)
        assert metric(r.server, "appliance_smpp_late_ids_recorded_total",
                      provider=PROVIDER) == 1
        assert r.smsc.smpp()["taken"] == {k: 1 for k in r.smsc.smpp()["taken"]}


FAIL_SMPP_RECEIPTS = """
CREATE TRIGGER test_fail_smpp_receipts BEFORE INSERT ON raw_reports
WHEN NEW.method = 'SMPP'
BEGIN SELECT RAISE(ABORT, 'the disk refused the write'); END;
"""


def test_a_receipt_that_cannot_be_stored_is_answered_temporary_and_its_redelivery_applies(
        tmp_path: Path) -> None:
    flags = ("--seed", "4", "--delay-min-ms", "0", "--delay-max-ms", "0",
             "--delivered-rate", "1", "--smpp-redeliver-ms", "100")
    with rig(tmp_path, *flags) as r, r.api() as api:
        # The store refuses the receipt's write unit (a trigger in the live database:
        # SQLite itself fails the unit, as a full disk would).
        db = apsw.Connection(str(r.data / "appliance.db"))
        db.set_busy_timeout(5000)
        db.execute(FAIL_SMPP_RECEIPTS)
        try:
            sent = api.post("/api/messages", json={"to": "+905321110001", "body": "hello"})
            ref = sent.json()["ref"]
            wait_for(lambda: r.smsc.smpp()["deliver_statuses"].get(str(ESME_RX_T_APPN), 0)
                     >= 2, 20, message="the receipt answered ESME_RX_T_APPN")
            assert api.get(f"/api/messages/{ref}").json()["state"] == "SUBMITTED"
            assert not r.smsc.smpp()["receipts_acked"]
        finally:
            db.execute("DROP TRIGGER test_fail_smpp_receipts")
            db.close()
        wait_for(lambda: api.get(f"/api/messages/{ref}").json()["state"] == "DELIVERED", 20,
                 message="the redelivered receipt applied")
        stats = r.smsc.smpp()
        assert stats["deliver_statuses"]["0"] == 1
        assert list(stats["receipts_acked"].values()) == [["DELIVRD"]]
        assert metric(r.server, "appliance_smpp_deliver_sm_total", result="temp_error",
                      provider=PROVIDER) >= 2
        assert query(r.data, "SELECT count(*) FROM raw_reports")[0][0] == 1


def test_stop_over_smpp_suppresses_the_number(tmp_path: Path) -> None:
    flags = ("--seed", "6", "--delay-min-ms", "0", "--delay-max-ms", "0")
    with rig(tmp_path, *flags) as r, r.api() as api:
        number = "+905321110002"
        assert api.post("/api/messages", json={"to": number, "body": "hi"}).status_code == 202
        r.smsc.mo(number, "STOP")
        wait_for(lambda: r.smsc.smpp()["mo_acked"] == ["STOP"], 20, message="MO answered")
        entries = api.get("/api/suppressions").json()["suppressions"]
        assert [(e["msisdn"], e["source"]) for e in entries] == [(number, "inbound")]
        refused = api.post("/api/messages", json={"to": number, "body": "again"})
        assert refused.status_code == 409 and refused.json()["error"] == "suppressed"
        [inbound] = api.get("/api/inbound").json()["inbound"]
        assert (inbound["from"], inbound["text"], inbound["stop"]) == (number, "STOP", True)
        raw = query(r.data, "SELECT method, content_type FROM raw_inbound")
        assert raw == [("SMPP", "application/vnd.smpp.deliver-sm")]
        assert httpx.get(r.server.url + "/readyz").status_code == 200


def test_sessions_are_shown_bound_or_not_and_an_unbound_one_leaves_the_appliance_ready(
        tmp_path: Path) -> None:
    down = free_port()  # nothing listens there
    extra = f"""
[providers.down]
kind = "smpp"
host = "127.0.0.1"
port = {down}
system_id = "appliance"
password = "secret"
source_addr = "ACME"
"""
    flags = ("--seed", "8", "--delay-min-ms", "0", "--delay-max-ms", "0")
    with rig(tmp_path, *flags, top=extra) as r:
        wait_for(lambda: metric(r.server, "appliance_smpp_bound", provider=PROVIDER) == 1, 20,
                 message="bound")
        ready = httpx.get(r.server.url + "/readyz")
        assert ready.status_code == 200, ready.text
        checks = ready.json()["checks"]
        assert checks["smpp:smsc"]["ok"] and checks["smpp:smsc"]["advisory"]
        assert not checks["smpp:down"]["ok"] and checks["smpp:down"]["advisory"]
        assert "cannot bind" in checks["smpp:down"]["detail"]
        assert ready.json()["reasons"] == []
        assert metric(r.server, "appliance_smpp_bound", provider="down") == 0
        create_user(r.data)
        with sign_in(r.server) as console:
            page = console.get("/dashboard/figures")
            assert page.status_code == 200
            assert 'data-smpp="smsc" data-bound="yes"' in page.text
            assert 'data-smpp="down" data-bound="no"' in page.text
        assert "smpp down: cannot transceiver-bind" in r.server.log()


@pytest.mark.serial  # times itself: run alone (Makefile)
def test_sigterm_mid_campaign_unbinds_within_the_budget_and_records_every_batch(
        tmp_path: Path) -> None:
    flags = ("--seed", "12", "--delay-min-ms", "0", "--delay-max-ms", "20",
             "--smpp-resp-delay-ms", "200")
    with rig(tmp_path, *flags, rate_per_s=200, top="shutdown_timeout_s = 4") as r, \
            r.api() as api:
        to = numbers(300)
        campaign(api, "stopped", to, "kısa mesaj")
        wait_for(lambda: len(r.smsc.smpp()["taken"]) >= 50, 20, message="sending")
        started = time.monotonic()
        assert r.server.terminate(timeout=15) == 0
        assert time.monotonic() - started < 4 + 1
        stats = r.smsc.smpp()
        assert stats["unbinds"] == 1
        assert query(r.data, "SELECT count(*) FROM messages WHERE state = 'SENDING'"
                     )[0][0] == 0  # every batch in flight was recorded
        r.server.start()
        wait_for(lambda: settled(r), 60, interval=0.25, message="sending over")
        taken = wait_for(lambda: every_taken_segment_settled(r), 30, interval=0.25,
                         message="receipts applied")
        assert {s.times_taken for s in taken} == {1}
        assert len(taken) == len(to)  # the rest went after the restart, none twice
