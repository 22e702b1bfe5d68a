"""A real appliance server sends to the fake Verimor (written from Verimor's guide, not
from our client) and applies the reports the fake pushes; a push without the right
``callback_token`` is ``401`` and nothing is stored."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from appliance.simulator.verimor_fake import RunningFake, VerimorFake
from tests.harness import Server, create_account, db_rows, run_cli, wait_for
from tests.sending.support import message, send, wait_state

TOKEN = "tok-3f9a1c"


def config(path: Path, base_url: str, token: str = TOKEN, extra: str = "") -> Path:
    token_line = f'callback_token = "{token}"\n' if token else ""
    path.write_text(f"""[sending]
blocked_retry_s = 1  # a held lane tries again at once here

[providers.vr]
kind = "verimor"
base_url = "{base_url}"
username = "908501234567"
password = "api-pass-1"
sender = "BASLIGIM"
{token_line}{extra}""")
    return path


def test_a_campaign_goes_out_and_the_pushed_reports_close_every_message(
        data_dir: Path, tmp_path: Path) -> None:
    fake = VerimorFake(fates={"905321234503": ("NOT_DELIVERED", "27")})
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(tmp_path / "a.toml", running.base_url))
        fake.push_url = f"{server.url}/callbacks/vr?token={TOKEN}"
        server.start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                refs = [send(api, f"+90532123450{i}", f"Merhaba {i}") for i in range(5)]
                done = {ref: wait_state(api, ref, "DELIVERED", "FAILED") for ref in refs}
        finally:
            server.stop()
    states = [done[ref]["state"] for ref in refs]
    assert states == ["DELIVERED", "DELIVERED", "DELIVERED", "FAILED", "DELIVERED"]
    assert "27 EC_ABSENT_SUBSCRIBER" in (done[refs[3]]["error"] or "")
    # The request as the guide writes it, with our ref as the message's id.
    # (in whatever order the lane sent them)
    assert sorted(s["messages"][0]["id"] for s in fake.sends) == sorted(refs)
    assert {s["source_addr"] for s in fake.sends} == {"BASLIGIM"}
    assert sorted(str(m.custom_id) for m in fake.messages()) == sorted(refs)
    assert all(code == 200 for code, _ in fake.pushes)
    ids = db_rows(data_dir, "SELECT provider_msg_id FROM messages ORDER BY id")
    assert [row[0].split(":")[1] for row in ids] == [f"90532123450{i}" for i in range(5)]


def test_a_push_without_the_right_token_is_refused_and_nothing_is_stored(
        data_dir: Path, tmp_path: Path) -> None:
    server = Server(data_dir, config=config(tmp_path / "b.toml", "http://127.0.0.1:9")).start()
    entry = [{"type": "outbound", "campaign_id": 20121, "message_id": "13582302",
              "message_custom_id": "NO-SUCH-REF", "dest": "905319876543",
              "status": "DELIVERED", "gsm_error": "0", "done_at": "2015-02-20 16:06:00"}]
    try:
        for query in ("", "?token=wrong", f"?token={TOKEN}x"):
            got = httpx.post(f"{server.url}/callbacks/vr{query}", json=entry, timeout=10)
            assert got.status_code == 401, (query, got.text)
        assert db_rows(data_dir, "SELECT count(*) FROM raw_reports") == [(0,)]
        good = httpx.post(f"{server.url}/callbacks/vr?token={TOKEN}", json=entry, timeout=10)
        assert good.status_code == 200
        assert db_rows(data_dir, "SELECT count(*) FROM raw_reports") == [(1,)]
    finally:
        server.stop()


def test_without_a_token_pushes_are_taken_and_config_check_warns(
        data_dir: Path, tmp_path: Path) -> None:
    open_config = config(tmp_path / "c.toml", "http://127.0.0.1:9", token="")
    checked = run_cli("config", "check", "--config", str(open_config),
                      "--data-dir", str(data_dir))
    assert checked.returncode == 0, checked.stderr
    assert "provider vr: no callback_token" in checked.stderr
    assert "mark its messages delivered" in checked.stderr
    masked = json.loads(checked.stdout)["providers"]["vr"]
    assert masked["password"] == "***"
    guarded = run_cli("config", "check", "--config", str(config(tmp_path / "d.toml",
                                                                "http://127.0.0.1:9")),
                      "--data-dir", str(data_dir))
    assert "no callback_token" not in guarded.stderr
    assert f"/callbacks/vr?token={TOKEN}" in guarded.stderr
    assert json.loads(guarded.stdout)["providers"]["vr"]["callback_token"] == "***"
    server = Server(data_dir, config=open_config).start()
    try:
        assert "no callback_token" in server.log()
        entry = [{"type": "outbound", "campaign_id": 1, "message_custom_id": "R",
                  "dest": "905319876543", "status": "DELIVERED"}]
        got = httpx.post(f"{server.url}/callbacks/vr", json=entry, timeout=10)
        assert got.status_code == 200
        wait_for(lambda: db_rows(data_dir, "SELECT count(*) FROM raw_reports")[0][0] == 1 or None,
                 timeout=10, message="the push stored")
    finally:
        server.stop()


def test_no_credit_holds_the_lane_and_a_duplicate_is_rejected(
        data_dir: Path, tmp_path: Path) -> None:
    fake = VerimorFake()
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(tmp_path / "e.toml", running.base_url))
        fake.push_url = f"{server.url}/callbacks/vr?token={TOKEN}"
        server.start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                first = send(api, "+905321234567", "Aynı metin")
                wait_state(api, first, "DELIVERED")
                again = send(api, "+905321234567", "Aynı metin")
                dup = wait_state(api, again, "REJECTED")
                assert "DOUBLE_SEND_ERROR" in (dup["error"] or "")
                fake.answer_next(400, "INSUFFICIENT_CREDITS", times=1)
                held = send(api, "+905321234568", "Kredi yok")
                # Not refused: held, tried again, and it goes once the credit is there.
                done = wait_state(api, held, "DELIVERED", "REJECTED", "FAILED", timeout=120)
                assert done["state"] == "DELIVERED", done
                assert fake.requests["send"] == 4
        finally:
            server.stop()


def test_an_unregistered_header_or_address_holds_the_lane_and_html_is_uncertain(
        data_dir: Path, tmp_path: Path) -> None:
    fake = VerimorFake(headers=["BASKA"], ip_allowed=False)
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(tmp_path / "f.toml", running.base_url))
        fake.push_url = f"{server.url}/callbacks/vr?token={TOKEN}"
        server.start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                held = send(api, "+905321234570", "Bekleyen")
                # The address is not allowed, then the header is not registered: the
                # message waits, its attempts not counted, until the panel is fixed.
                wait_for(lambda: fake.requests["send"] >= 1 or None, timeout=30,
                         message="a try refused for the address")
                fake.ip_allowed = True
                wait_for(lambda: fake.requests["send"] >= 2 or None, timeout=60,
                         message="a try refused for the header")
                # The refusal recorded (the try is SENDING, counted, until it is).
                waiting = wait_for(lambda: (m := message(api, held))["state"] != "SENDING"
                                   and m, timeout=30, message="the refusal recorded")
                assert waiting["state"] not in ("REJECTED", "FAILED", "DELIVERED"), waiting
                assert waiting["attempts"] == 0, waiting
                fake.headers.append("BASLIGIM")
                done = wait_state(api, held, "DELIVERED", "REJECTED", "FAILED", timeout=120)
                assert done["state"] == "DELIVERED", done
                refused = [s for s in fake.sends if s["messages"][0]["id"] == held]
                assert len(refused) >= 3  # every try carried the same ref
                fake.answer_next(200, "<html><body>502 Bad Gateway</body></html>")
                odd = send(api, "+905321234571", "HTML")
                uncertain = wait_state(api, odd, "UNCERTAIN", timeout=30)
                assert "unreadable" in (uncertain["error"] or ""), uncertain
        finally:
            server.stop()
