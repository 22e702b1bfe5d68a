"""End to end: a real ``appliance serve`` with ``kind = "iletimerkezi"`` sends to the fake
written from İletimerkezi's documentation; the message is ``SUBMITTED`` with the pair
(order id, number) recorded as its provider id, and the report the fake then pushes to
the webhook URL (with its ``callback_token``) closes it."""

from __future__ import annotations

from pathlib import Path

import httpx

from appliance.simulator.iletimerkezi_fake import Account, FakeServer, IletimerkeziFake
from tests.harness import Server, create_account, db_rows, wait_for
from tests.providers.iletimerkezi_support import HASH, KEY, SENDER, fake_state, set_status
from tests.sending.support import send, wait_state


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
