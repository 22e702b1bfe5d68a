"""A real appliance server sends to the fake Netgsm (written from Netgsm's client library,
not from our client): each message reaches ``SUBMITTED`` with the pair (bulk id, number)
recorded as its provider id; a header Netgsm does not know holds the message instead of
refusing it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.providers.status_query import PullTarget
from appliance.simulator.netgsm_fake import NetgsmFake, RunningFake
from tests.harness import Server, create_account, db_rows, run_cli, wait_for
from tests.providers.netgsm_support import adapter, exchange, stored
from tests.sending.support import message, send, wait_state

TOKEN = "tok-7c2e"


def config(path: Path, base_url: str, sender: str = "BASLIGIM", extra: str = "") -> Path:
    path.write_text(f"""[providers.ng]
kind = "netgsm"
base_url = "{base_url}"
usercode = "8503001234"
password = "api-pass-1"
sender = "{sender}"
callback_token = "{TOKEN}"
{extra}""")
    return path


def test_messages_reach_submitted_with_the_bulk_id_and_number_recorded(
        data_dir: Path, tmp_path: Path) -> None:
    fake = NetgsmFake()
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(tmp_path / "a.toml", running.base_url)).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                refs = [send(api, f"+90532123450{i}", f"Merhaba {i}") for i in range(3)]
                done = [wait_state(api, ref, "SUBMITTED") for ref in refs]
        finally:
            server.stop()
        assert [d["state"] for d in done] == ["SUBMITTED"] * 3
        assert [s["pairs"] for s in fake.sends] == [[(f"Merhaba {i}", f"90532123450{i}")]
                                                   for i in range(3)]
        assert {(s["usercode"], s["msgheader"], s["type"]) for s in fake.sends} == {
            ("8503001234", "BASLIGIM", "1:n")}
        rows = db_rows(data_dir, "SELECT ref, provider_msg_id FROM messages ORDER BY id")
        assert rows == [(ref, f"{bulk}:90532123450{i}")
                        for i, (ref, bulk) in enumerate(zip(refs, sorted(fake.tasks),
                                                            strict=True))]
        # What was recorded is what the report query needs: each message is asked about
        # by its bulk id, and the answer names it by its ref.
        query = adapter(running.base_url)
        for i, (ref, pid) in enumerate(rows):
            target = PullTarget(ref, pid, f"+90532123450{i}", 0)
            request = query.build_status_request([target])
            answer = query.read_status_answer([target], 200,
                                              stored(request, exchange(request)))
            [one] = answer.reports
            assert (one.ref, one.provider_msg_id, one.state) == (ref, pid, "DELIVERED")


def test_a_header_netgsm_does_not_know_holds_the_message_and_refuses_nothing(
        data_dir: Path, tmp_path: Path) -> None:
    fake = NetgsmFake()
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(tmp_path / "b.toml", running.base_url,
                                                sender="NOTMINE")).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                ref = send(api, "+905321234567", "Merhaba")
                wait_for(lambda: fake.requests["send"] >= 1 or None, timeout=30,
                         message="the send to reach the fake")
                held = wait_for(lambda: ((m := message(api, ref))["error"] and m) or None,
                                timeout=30, message="the refusal to be recorded")
        finally:
            server.stop()
    assert held["state"] not in ("REJECTED", "FAILED", "SUBMITTED"), held
    assert "netgsm 40" in held["error"]
    assert fake.tasks == {}


def test_config_check_masks_the_password_and_the_token(data_dir: Path, tmp_path: Path) -> None:
    checked = run_cli("config", "check", "--config",
                      str(config(tmp_path / "c.toml", "http://127.0.0.1:9")),
                      "--data-dir", str(data_dir))
    assert checked.returncode == 0, checked.stderr
    shown = json.loads(checked.stdout)["providers"]["ng"]
    assert (shown["password"], shown["callback_token"], shown["usercode"]) == (
        "***", "***", "8503001234")
    assert "no callback_token" not in checked.stderr


@pytest.mark.slow
def test_netgsm_never_pushes_and_every_message_closes_by_asking(
        data_dir: Path, tmp_path: Path) -> None:
    fake = NetgsmFake(fates={"905321234501": ("11", "106")})
    with RunningFake(fake) as running:
        server = Server(data_dir, config=config(
            tmp_path / "d.toml", running.base_url,
            extra="pull_after_s = 1\npull_rate_per_s = 0.15\n")).start()
        try:
            key = create_account(data_dir)
            with server.client(key) as api:
                refs = [send(api, f"+90532123450{i}", f"Merhaba {i}") for i in range(3)]
                done = [wait_state(api, ref, "DELIVERED", "REJECTED", timeout=90)
                        for ref in refs]
        finally:
            server.stop()
    assert [d["state"] for d in done] == ["DELIVERED", "REJECTED", "DELIVERED"]
    assert "106 SMS refused, blacklist" in (done[1]["error"] or "")
    assert fake.requests["report"] <= 3 * 2  # a few asks a message at most
