"""Verimor's inbound messages (MO), pushed as its guide writes them ("GELEN SMS ALIMI",
"PUSH ile Gelen SMS Alımı") to the one push URL of its panel, which is also its reports'
URL: a real server files them from ``/callbacks/NAME`` (on its own port and on the
report intake's) as from ``/inbound/NAME``, a RET or STOP suppresses the number, and a
push without the token is refused with nothing stored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import apsw
import httpx
import pytest

from appliance.providers import InboundParseError
from appliance.providers.verimor import VerimorInbound
from appliance.providers.verimor_wire import entry_type
from appliance.simulator.verimor_fake import VerimorFake
from tests.harness import Server, create_account, free_port, wait_for
from tests.providers.provider_test_support import callback
from tests.providers.test_verimor_wire import CB, adapter, entry

TOKEN = "tok-inbound-7"


def inbound_entry(**changes: Any) -> dict[str, Any]:
    """One inbound entry, as the guide's push example writes it."""
    out: dict[str, Any] = {
        "message_id": 1234, "type": "inbound", "created_at": "2017-01-01 09:00:00",
        "network": "TURKCELL", "source_addr": "905319876543",
        "destination_addr": "908501234567", "keyword": "", "content": "verimor deneme",
        "received_at": "2017-01-01 09:00:00"}
    out.update(changes)
    return out


def reader() -> VerimorInbound:
    return VerimorInbound(adapter())


def body(entries: list[Any]) -> Any:
    return callback(CB, body=json.dumps(entries).encode(),
                    headers={"Content-Type": "application/json"})


# -- the reading ------------------------------------------------------------------------


def test_an_inbound_push_is_read_as_the_guide_writes_it() -> None:
    [msg] = reader().parse_inbound(body([inbound_entry()]))
    assert (msg.msisdn, msg.to, msg.text, msg.provider_msg_id) == (
        "905319876543", "908501234567", "verimor deneme", "1234")
    assert msg.sent_at_ms == 1_483_250_400_000  # 09:00 in Türkiye is 06:00 UTC


def test_reports_and_inbound_messages_in_one_push_go_each_their_way() -> None:
    push = body([entry(), inbound_entry(content="RET")])
    assert [m.text for m in reader().parse_inbound(push)] == ["RET"]
    assert [r.ref for r in adapter().parse_reports(push)] == ["01HF3Z9K2M8Q4R6T7V"]
    assert VerimorInbound.at_report_url


def test_an_entry_without_a_type_is_told_by_its_fields() -> None:
    # The /v2/inbound_messages and /v2/status answers write no type.
    untyped = {k: v for k, v in inbound_entry().items() if k != "type"}
    assert entry_type(untyped) == "inbound"
    assert entry_type({k: v for k, v in entry().items() if k != "type"}) == "outbound"
    assert len(reader().parse_inbound(body([untyped]))) == 1


@pytest.mark.parametrize("entries", [
    {"message_id": 1}, [1], [inbound_entry(source_addr="")],
    [inbound_entry(message_id=None)], [inbound_entry(content=["x"])]])
def test_an_unreadable_inbound_push_is_a_parse_error(entries: Any) -> None:
    with pytest.raises(InboundParseError):
        reader().parse_inbound(body(entries))


# -- through a real server --------------------------------------------------------------


@dataclass
class Rig:
    server: Server
    intake_url: str
    alpha: httpx.Client
    beta: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("verimor-inbound")
    intake_port = free_port()
    config = tmp / "appliance.toml"
    config.write_text(f"""[providers.vr]
kind = "verimor"
base_url = "http://127.0.0.1:{free_port()}"
username = "908501234567"
password = "api-pass-1"
sender = "BASLIGIM"
callback_token = "{TOKEN}"

[reports]
intake_port = {intake_port}
""")
    data = tmp / "data"
    data.mkdir()
    server = Server(data, config=config).start()
    intake_url = f"http://127.0.0.1:{intake_port}"

    def intake_up() -> bool | None:
        try:
            return httpx.post(f"{intake_url}/callbacks/vr", timeout=2).status_code == 401
        except httpx.TransportError:
            return None

    wait_for(intake_up, 30, message="the report intake to answer")
    a, b = create_account(data, "alpha"), create_account(data, "beta")
    try:
        with server.client(a) as alpha, server.client(b) as beta:
            yield Rig(server, intake_url, alpha, beta)
    finally:
        server.stop()


def counts(rig: Rig) -> tuple[int, int, int, int]:
    conn = apsw.Connection(str(rig.server.data_dir / "appliance.db"),
                           flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5000)
    try:
        [row] = list(conn.execute(
            "SELECT (SELECT count(*) FROM raw_reports), (SELECT count(*) FROM raw_inbound),"
            " (SELECT count(*) FROM inbound_messages), (SELECT count(*) FROM suppressions)"))
    finally:
        conn.close()
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def fake_pushing_to(url: str) -> VerimorFake:
    return VerimorFake(push_url=url)


def inbound_of(rig: Rig, msisdn: str) -> list[dict[str, Any]]:
    """The inbound messages stored from ``msisdn``: no account sent to these numbers, so
    none lists them (the store is read instead)."""
    for api in (rig.alpha, rig.beta):
        assert api.get("/api/inbound", params={"msisdn": msisdn}).json()["inbound"] == []
    conn = apsw.Connection(str(rig.server.data_dir / "appliance.db"),
                           flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5000)
    try:
        found = list(conn.execute("SELECT text, keyword, provider FROM inbound_messages"
                                  " WHERE msisdn = ? ORDER BY id", (msisdn,)))
    finally:
        conn.close()
    return [{"text": text, "stop": keyword is not None, "provider": provider}
            for text, keyword, provider in found]


@pytest.mark.parametrize(("where", "text"), [("server", "RET"), ("intake", "Ret ACME"),
                                             ("inbound", "STOP")])
def test_a_ret_pushed_to_the_panel_url_suppresses_the_number(rig: Rig, where: str,
                                                              text: str) -> None:
    number = ["server", "intake", "inbound"].index(where)
    sender = f"90532900{number:04d}"
    base = rig.intake_url if where == "intake" else rig.server.url
    route = "inbound" if where == "inbound" else "callbacks"
    fake = fake_pushing_to(f"{base}/{route}/vr?token={TOKEN}")
    assert fake.push_inbound(sender, text, message_id=700 + number) == 200
    [got] = inbound_of(rig, "+" + sender)
    assert (got["text"], got["stop"], got["provider"]) == (text, True, "vr")
    for api in (rig.alpha, rig.beta):  # nobody sent to it: every account stops
        [entry_] = api.get("/api/suppressions", params={"msisdn": "+" + sender}
                           ).json()["suppressions"]
        assert entry_["source"] == "inbound"
    # Verimor pushes again when it got no 200: one message all the same.
    assert fake.push_inbound(sender, text, message_id=700 + number) == 200
    assert len(inbound_of(rig, "+" + sender)) == 1


def test_an_ordinary_message_and_a_report_in_one_push_are_both_kept(rig: Rig) -> None:
    before = counts(rig)
    push = [entry(message_custom_id="NO-SUCH-REF"),
            inbound_entry(message_id=991, source_addr="905329100001", content="Merhaba")]
    got = httpx.post(f"{rig.server.url}/callbacks/vr?token={TOKEN}", json=push, timeout=10)
    assert got.status_code == 200, got.text
    raw_reports, raw_inbound, inbound, suppressed = counts(rig)
    assert (raw_reports, raw_inbound, inbound, suppressed) == (
        before[0] + 1, before[1] + 1, before[2] + 1, before[3])
    [msg] = inbound_of(rig, "+905329100001")
    assert (msg["text"], msg["stop"]) == ("Merhaba", False)


def test_a_push_of_reports_alone_files_no_inbound_request(rig: Rig) -> None:
    before = counts(rig)
    got = httpx.post(f"{rig.server.url}/callbacks/vr?token={TOKEN}",
                     json=[entry(message_custom_id="NO-SUCH-REF-2")], timeout=10)
    assert got.status_code == 200
    assert counts(rig)[:2] == (before[0] + 1, before[1])


@pytest.mark.parametrize("query", ["", "?token=wrong", f"?token={TOKEN}&token={TOKEN}"])
@pytest.mark.parametrize("where", ["server", "intake"])
def test_a_push_without_the_token_is_refused_and_nothing_is_stored(
        rig: Rig, where: str, query: str) -> None:
    before = counts(rig)
    base = rig.intake_url if where == "intake" else rig.server.url
    push = [inbound_entry(message_id=555, source_addr="905329200001", content="RET")]
    got = httpx.post(f"{base}/callbacks/vr{query}", json=push, timeout=10)
    assert got.status_code == 401
    assert counts(rig) == before
    assert inbound_of(rig, "+905329200001") == []


def test_an_unreadable_inbound_entry_is_kept_raw_and_answered(rig: Rig) -> None:
    before = counts(rig)
    push = [inbound_entry(message_id=556, source_addr="")]
    got = httpx.post(f"{rig.server.url}/callbacks/vr?token={TOKEN}", json=push, timeout=10)
    assert got.status_code == 200
    after = counts(rig)
    assert (after[1], after[2]) == (before[1] + 1, before[2])
