"""End to end: a real ``appliance serve`` with ``kind = "iletimerkezi"`` sends to the fake
written from İletimerkezi's documentation; the message is ``SUBMITTED`` with the pair
(order id, number) recorded as its provider id, and the report the fake then pushes to
the webhook URL (with its ``callback_token``) closes it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from appliance.simulator.iletimerkezi_fake import Account, FakeServer, IletimerkeziFake
from tests.harness import Server, create_account, db_rows, run_cli, wait_for
from tests.providers.iletimerkezi_support import (
    HASH,
    KEY,
    SENDER,
    fake_state,
    script,
    set_status,
)
from tests.sending.support import message, send, wait_state


def test_a_message_is_submitted_with_its_order_and_number_and_closed_by_the_push(
        data_dir: Path, tmp_path: Path) -> None:
    account = Account()
    with FakeServer(IletimerkeziFake(account)) as fake:
        config = tmp_path / "appliance.toml"
        config.write_text(f"""[providers.im]
kind = "iletimerkezi"
base_url = "{fake.base_url}"
key = "{KEY}"
hash = "{HASH}"
sender = "{SENDER}"
callback_token = "t0ken"
""")
        server = Server(data_dir, config=config)
        account.webhook_url = f"{server.url}/callbacks/im?token=t0ken"
        server.start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                ref = send(api, "+905321234567", "Siparişiniz yola çıktı")
                submitted = wait_state(api, ref, "SUBMITTED")
                [(order_id, order)] = fake_state(fake)["orders"].items()
                assert order["numbers"] == ["5321234567"] and order["sender"] == SENDER
                assert order["text"] == "Siparişiniz yola çıktı"
                pair = f"{order_id}:905321234567"
                assert submitted["provider"] == "im"
                assert submitted["provider_msg_id"] == pair
                assert db_rows(data_dir, "SELECT provider, provider_msg_id, ref FROM"
                               " provider_ids") == [("im", pair, ref)]

                forged = httpx.post(f"{server.url}/callbacks/im", timeout=10, json={
                    "report": {"id": 1, "packet_id": int(order_id), "status": "undelivered",
                               "to": "+905321234567", "body": ""}})
                assert forged.status_code == 401
                assert set_status(fake, order_id, "5321234567", 111)["pushed"] == 200
                done = wait_state(api, ref, "DELIVERED")
                assert done["provider_msg_id"] == pair
            wait_for(lambda: db_rows(data_dir, "SELECT count(*) FROM raw_reports")[0][0] == 1,
                     message="the push kept raw")
        finally:
            server.stop()


def config(path: Path, base_url: str, token: str = "t0ken") -> Path:
    token_line = f'callback_token = "{token}"\n' if token else ""
    path.write_text(f"""[sending]
blocked_retry_s = 1  # a held lane tries again at once here

[providers.im]
kind = "iletimerkezi"
base_url = "{base_url}"
key = "{KEY}"
hash = "{HASH}"
sender = "{SENDER}"
{token_line}""")
    return path


def sends(fake: FakeServer) -> int:
    return sum(1 for r in fake_state(fake)["received"] if r["endpoint"] == "send-sms")


def test_an_unapproved_başlık_and_no_credit_hold_the_message_until_the_panel_is_fixed(
        data_dir: Path, tmp_path: Path) -> None:
    account = Account(senders=("BASKA",), sms=0)
    with FakeServer(IletimerkeziFake(account)) as fake:
        server = Server(data_dir, config=config(tmp_path / "a.toml", fake.base_url)).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                held = send(api, "+905321234570", "Bekleyen mesaj")
                wait_for(lambda: sends(fake) >= 2 or None, timeout=30,
                         message="tries refused for the başlık")
                account.senders = (SENDER,)  # approved in the panel: now the credit
                seen = sends(fake)
                # The held lane's next try (within a minute) is refused for the credit;
                # from then on it asks for the credit, not by sending.
                wait_for(lambda: sends(fake) >= seen + 1 or None, timeout=90,
                         message="a try refused for the credit")
                waiting = message(api, held)
                assert waiting["state"] not in ("REJECTED", "FAILED", "UNCERTAIN"), waiting
                assert waiting["attempts"] == 0, waiting
                assert fake_state(fake)["orders"] == {}
                account.sms = 1000  # topped up: it goes by itself
                done = wait_state(api, held, "SUBMITTED", "REJECTED", "UNCERTAIN", timeout=90)
                assert done["state"] == "SUBMITTED", done
                [order_id] = fake_state(fake)["orders"]
                assert done["provider_msg_id"] == f"{order_id}:905321234570"
        finally:
            server.stop()


def test_a_duplicate_order_is_rejected_and_an_html_answer_is_uncertain(
        data_dir: Path, tmp_path: Path) -> None:
    with FakeServer() as fake:
        server = Server(data_dir, config=config(tmp_path / "b.toml", fake.base_url)).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                first = send(api, "+905321234567", "Aynı metin")
                wait_state(api, first, "SUBMITTED")
                again = send(api, "+905321234567", "Aynı metin")
                dup = wait_state(api, again, "REJECTED")
                assert "451 duplicate order" in (dup["error"] or ""), dup
                assert len(fake_state(fake)["orders"]) == 1
                script(fake, "send-sms", {"http": 200, "body": "<html>502 Bad Gateway</html>"})
                odd = send(api, "+905321234571", "HTML")
                uncertain = wait_state(api, odd, "UNCERTAIN")
                assert "unreadable" in (uncertain["error"] or ""), uncertain
        finally:
            server.stop()


def test_config_check_masks_the_credentials_and_prints_the_webhook_url(
        data_dir: Path, tmp_path: Path) -> None:
    guarded = run_cli("config", "check", "--config", str(config(tmp_path / "c.toml",
                      "http://127.0.0.1:9")), "--data-dir", str(data_dir))
    shown = json.loads(guarded.stdout)["providers"]["im"]
    assert (shown["key"], shown["hash"], shown["callback_token"]) == ("***",) * 3
    assert "/callbacks/im?token=t0ken" in guarded.stderr
    assert KEY not in guarded.stdout + guarded.stderr
    open_one = run_cli("config", "check", "--config", str(config(tmp_path / "d.toml",
                       "http://127.0.0.1:9", token="")), "--data-dir", str(data_dir))
    assert "provider im: no callback_token" in open_one.stderr
