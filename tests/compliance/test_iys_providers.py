"""The İYS fields go to each Turkish aggregator per message (IYS-2): a real server with
``[compliance] country = "TR"`` sends a commercial campaign over ONAY numbers, individuals
(BIREYSEL) and traders (TACIR), through the fakes written from each aggregator's own
documentation (İletimerkezi, Netgsm, Verimor). Every request carries İYS on with the
recipient type of the numbers in it (a request never mixes the two), a transactional
send carries İYS off, and an İYS refusal ends the message ``REJECTED`` with
``error_kind: "iys"``, counted on the campaign and the dashboard."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.simulator import iletimerkezi_fake, netgsm_fake, verimor_fake
from tests.harness import Server, create_account, wait_for
from tests.sending.support import wait_state
from tests.sending.support_campaigns import import_list, show
from tests.web.console_support import create_user, sign_in

OK_TEXT = "Kampanya! Ret icin RET yazip 4609'a gonderin. ACME AS Mersis 0123456789"
ALL_DAY = {"from": "00:00", "to": "23:59", "tz": "UTC"}
BRAND = "654321"
TOKEN = "tok-iys"

# What one send request said: the numbers in it (E.164 digits) and its İYS fields.
Sent = tuple[list[str], dict[str, Any]]


@dataclass
class Kind:
    """One aggregator: its fake, its provider table, how its requests are read back, and
    the İYS fields its documentation gives for each kind of message."""

    name: str
    start: Callable[[], AbstractContextManager[Any]]
    table: Callable[[Any], str]
    requests: Callable[[Any], list[Sent]]
    individual: dict[str, Any]
    trader: dict[str, Any]
    transactional: dict[str, Any]
    refuse: Callable[[Any], None]  # the next send is refused for İYS


def _iletimerkezi_sent(fake: Any) -> list[Sent]:
    out: list[Sent] = []
    state = httpx.get(f"{fake.url}/_fake/state", timeout=10).json()
    for r in state["received"]:
        if r["endpoint"] != "send-sms":
            continue
        order = json.loads(r["body"])["request"]["order"]
        out.append((order["message"]["receipents"]["number"],
                    {"iys": order["iys"], "iysList": order["iysList"]}))
    return out


def _iletimerkezi_refuse(fake: Any) -> None:
    httpx.post(f"{fake.url}/_fake/script", json={"endpoint": "send-sms", "answers": [
        {"code": 469}]}, timeout=10).raise_for_status()


def _netgsm_sent(running: Any) -> list[Sent]:
    return [([n for _, n in s["pairs"]], {"filter": s["filter"]})
            for s in running.fake.sends]


def _netgsm_refuse(running: Any) -> None:
    running.fake.iys = False  # İYS-checked sending not open to the account: 50


def _verimor_sent(running: Any) -> list[Sent]:
    return [(s["messages"][0]["dest"].split(","),
             {k: s.get(k) for k in ("is_commercial", "iys_recipient_type")})
            for s in running.fake.sends]


def _verimor_refuse(running: Any) -> None:
    running.fake.answer_next(400, "NO_AHS_BRAND_ERROR")


KINDS = [
    Kind("iletimerkezi",
         lambda: iletimerkezi_fake.FakeServer(),
         lambda fake: f'kind = "iletimerkezi"\nbase_url = "{fake.base_url}"\n'
                      'key = "demo-key"\nhash = "demo-hash"\nsender = "APITEST"\n',
         _iletimerkezi_sent,
         {"iys": "1", "iysList": "BIREYSEL"}, {"iys": "1", "iysList": "TACIR"},
         {"iys": "0", "iysList": "BIREYSEL"}, _iletimerkezi_refuse),
    Kind("netgsm",
         lambda: netgsm_fake.RunningFake(netgsm_fake.NetgsmFake()),
         lambda r: f'kind = "netgsm"\nbase_url = "{r.base_url}"\nusercode = "8503001234"\n'
                   'password = "api-pass-1"\nsender = "BASLIGIM"\n',
         _netgsm_sent,
         {"filter": "11"}, {"filter": "12"}, {"filter": "0"}, _netgsm_refuse),
    Kind("verimor",
         lambda: verimor_fake.RunningFake(verimor_fake.VerimorFake()),
         lambda r: f'kind = "verimor"\nbase_url = "{r.base_url}"\n'
                   'username = "908501234567"\npassword = "api-pass-1"\nsender = "BASLIGIM"\n'
                   f'callback_token = "{TOKEN}"\n',
         _verimor_sent,
         {"is_commercial": True, "iys_recipient_type": "BIREYSEL"},
         {"is_commercial": True, "iys_recipient_type": "TACIR"},
         {"is_commercial": False, "iys_recipient_type": None}, _verimor_refuse),
]


@dataclass
class Rig:
    kind: Kind
    fake: Any
    server: Server
    api: httpx.Client
    data: Path


@pytest.fixture(params=KINDS, ids=[k.name for k in KINDS])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    kind: Kind = request.param
    data = tmp_path / "data"
    data.mkdir()
    with kind.start() as fake:
        cfg = tmp_path / "cfg.toml"
        cfg.write_text(f"[providers.tr]\n{kind.table(fake)}\n[compliance]\ncountry = \"TR\"\n"
                       f'iys_brand_code = "{BRAND}"\n')
        server = Server(data, config=cfg)
        if kind.name == "verimor":  # its reports are pushed to us
            fake.fake.push_url = f"{server.url}/callbacks/tr?token={TOKEN}"
        server.start()
        try:
            key = create_account(data)
            with server.client(key) as api:
                yield Rig(kind, fake, server, api, data)
        finally:
            server.stop()


def _campaign_done(api: httpx.Client, cid: int) -> dict[str, Any]:
    got: dict[str, Any] = wait_for(
        lambda: (c := show(api, cid))["state"] == "DONE" and c, 60, message="the campaign")
    return got


def test_each_request_carries_the_iys_fields_of_its_numbers(rig: Rig) -> None:
    numbers = import_list(rig.api, "onay", 8, prefix="+90533")
    individuals, traders = numbers[:5], numbers[5:]
    records = ([{"msisdn": n, "status": "ONAY", "recipient_type": "BIREYSEL"}
                for n in individuals]
               + [{"msisdn": n, "status": "ONAY", "recipient_type": "TACIR"} for n in traders])
    assert rig.api.post("/api/consents", json=records).json()["added"] == 8
    started = rig.api.post("/api/campaigns", json={"list": "onay", "body": OK_TEXT,
                                                   "type": "commercial", "window": ALL_DAY})
    assert started.status_code == 202, started.text
    done = _campaign_done(rig.api, started.json()["campaignId"])
    assert done["counts"].get("SUBMITTED", 0) + done["counts"].get("DELIVERED", 0) == 8, done

    sent = rig.kind.requests(rig.fake)
    seen: dict[str, dict[str, Any]] = {}
    for in_request, fields in sent:
        for number in in_request:
            seen["+" + number.removeprefix("+")] = fields
    assert sorted(seen) == sorted(numbers)
    for n in individuals:
        assert seen[n] == rig.kind.individual, (n, seen[n])
    for n in traders:
        assert seen[n] == rig.kind.trader, (n, seen[n])

    # A transactional message goes with İYS off, whatever the number's record.
    before = len(sent)
    r = rig.api.post("/api/messages", json={"to": individuals[0], "body": "Kodunuz 4821",
                                            "type": "transactional"})
    assert r.status_code == 202, r.text
    wait_state(rig.api, r.json()["ref"], "SUBMITTED", "DELIVERED")
    [(to, fields)] = rig.kind.requests(rig.fake)[before:]
    assert ["+" + n.removeprefix("+") for n in to] == [individuals[0]]
    assert fields == rig.kind.transactional


def test_an_iys_refusal_ends_the_message_rejected_with_error_kind_iys_and_is_counted(
        rig: Rig) -> None:
    numbers = import_list(rig.api, "refused", 2, prefix="+90535")
    assert rig.api.post("/api/consents", json=[
        {"msisdn": n, "status": "ONAY", "recipient_type": "BIREYSEL"} for n in numbers]
    ).json()["added"] == 2
    rig.kind.refuse(rig.fake)
    started = rig.api.post("/api/campaigns", json={"list": "refused", "body": OK_TEXT,
                                                   "type": "commercial", "window": ALL_DAY})
    assert started.status_code == 202, started.text
    done = _campaign_done(rig.api, started.json()["campaignId"])
    shown = [rig.api.get("/api/messages", params={"msisdn": n}).json()["messages"][0]
             for n in numbers]
    refused = [m for m in shown if m["state"] == "REJECTED"]
    assert refused, shown
    for m in shown:
        assert m["error_kind"] == ("iys" if m["state"] == "REJECTED" else None), m
    assert done["iys_refused"] == len(refused) == done["counts"]["REJECTED"], done
    one = rig.api.get(f"/api/messages/{refused[0]['ref']}").json()
    assert one["error_kind"] == "iys" and one["state"] == "REJECTED", one
    stats = rig.api.get("/api/stats").json()
    assert stats["iys_refused"] == len(refused), stats
    # The console shows them: on the dashboard and on the campaign's page.
    create_user(rig.data, "alice", "acme")
    with sign_in(rig.server) as console:
        figures = console.get("/dashboard/figures").text
        assert f"data-iys-refused>{len(refused)}<" in figures, figures
        page = console.get(f"/campaigns/{started.json()['campaignId']}").text
        assert f"data-campaign-iys-refused>{len(refused)}<" in page


@pytest.mark.parametrize("rig", [KINDS[2]], ids=["verimor"], indirect=True)
def test_a_report_of_an_iys_refusal_ends_the_message_rejected_for_iys(rig: Rig) -> None:
    refused, delivered = "+905360000001", "+905360000002"
    rig.fake.fake.fates["905360000001"] = ("NOT_ALLOWED_BY_IYS", "0")
    assert rig.api.post("/api/consents", json=[
        {"msisdn": n, "status": "ONAY", "recipient_type": "TACIR"}
        for n in (refused, delivered)]).json()["added"] == 2
    refs = []
    for n in (refused, delivered):
        r = rig.api.post("/api/messages", json={"to": n, "body": OK_TEXT,
                                                "type": "commercial"})
        assert r.status_code == 202, r.text
        refs.append(r.json()["ref"])
    no = wait_state(rig.api, refs[0], "REJECTED")
    yes = wait_state(rig.api, refs[1], "DELIVERED")
    assert (no["error_kind"], yes["error_kind"]) == ("iys", None), (no, yes)
    assert "NOT_ALLOWED_BY_IYS" in (no["error"] or ""), no
    assert rig.api.get("/api/stats").json()["iys_refused"] == 1
