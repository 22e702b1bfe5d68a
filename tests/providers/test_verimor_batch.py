"""Many numbers in one Verimor request, at the wire: the kind's batch request goes over
HTTP to the fake Verimor (written from the guide's "SMS GÖNDERİMİ (POST)": one text,
``dest`` the numbers, ``id`` as many ids of ours), and every message gets its own
outcome; the reports the fake then gives name each message by our ref."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from appliance.providers import Outcome, OutgoingMessage, SubmitResult
from appliance.providers.batch import batch_wire_of
from appliance.providers.verimor import VerimorAdapter
from appliance.simulator.verimor_fake import RunningFake, VerimorFake
from tests.providers.provider_test_support import callback, message
from tests.providers.test_verimor_wire import adapter


@pytest.fixture()
def fake() -> Iterator[tuple[VerimorFake, VerimorAdapter]]:
    verimor = VerimorFake(fates={"905321200007": ("NOT_DELIVERED", "1")})
    with RunningFake(verimor) as running:
        yield verimor, adapter(base_url=running.base_url)


def campaign(n: int, body: str = "Hafta sonu indirim", encoding: str = "GSM-7",
             first: int = 0) -> list[OutgoingMessage]:
    return [replace(message(ref=f"B{first + i:05d}", msisdn=f"+9053212{first + i:05d}",
                            body=body), encoding=encoding) for i in range(n)]


def send_batch(wire: VerimorAdapter, msgs: list[OutgoingMessage]) -> list[Outcome]:
    batch = batch_wire_of(wire)
    assert batch is not None
    with httpx.Client(timeout=10) as client:
        response = client.send(batch.build_batch_request(msgs))
    return list(batch.interpret_batch_response(msgs, response))


def test_a_hundred_numbers_go_in_one_request_each_with_its_own_outcome(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    msgs = campaign(100)
    outcomes = send_batch(wire, msgs)
    assert verimor.requests["send"] == 1
    [sent] = verimor.sends
    [entry] = sent["messages"]
    assert entry["dest"].split(",") == [m.msisdn.removeprefix("+") for m in msgs]
    assert entry["id"].split(",") == [m.ref for m in msgs]
    assert "custom_id" not in sent and sent["source_addr"] == "BASLIGIM"
    [made] = verimor.campaigns.values()
    assert [m.custom_id for m in made] == [m.ref for m in msgs]  # our refs, taken
    assert all(o.result is SubmitResult.ACCEPTED for o in outcomes)
    ids = [o.provider_msg_id for o in outcomes]
    assert len(set(ids)) == 100
    assert ids[7] == f"{made[0].campaign_id}:905321200007"
    # The reports the fake gives (as it would push them) name each message by our ref.
    push = [dict(m.entry(), type="outbound") for m in made]
    reports = wire.parse_reports(callback("https://sms.example.org/callbacks/vr",
                                          body=json.dumps(push).encode()))
    assert [r.ref for r in reports] == [m.ref for m in msgs]
    assert [r.provider_msg_id for r in reports] == ids
    assert reports[7].state == "FAILED" and reports[7].error_code == "1 EC_UNKNOWN_SUBSCRIBER"
    assert {r.state for i, r in enumerate(reports) if i != 7} == {"DELIVERED"}


def test_a_turkish_batch_goes_with_datacoding_1_and_abroad_numbers_with_00(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    msgs = campaign(2, "Şubat kampanyası", "GSM-7 Turkish")
    assert {o.result for o in send_batch(wire, msgs)} == {SubmitResult.ACCEPTED}
    assert verimor.sends[-1]["datacoding"] == "1"
    abroad = [replace(m, msisdn=f"+4915112345{i:03d}") for i, m in
              enumerate(campaign(2, first=50))]
    outcomes = send_batch(wire, abroad)
    assert verimor.sends[-1]["messages"][0]["dest"] == "004915112345000,004915112345001"
    assert [str(o.provider_msg_id).split(":")[1] for o in outcomes] == [
        "4915112345000", "4915112345001"]


def test_a_second_send_of_the_same_text_is_a_duplicate_per_message(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    send_batch(wire, campaign(3))
    again = [replace(m, ref=m.ref + "x") for m in campaign(3)]
    assert {o.result for o in send_batch(wire, again)} == {
        SubmitResult.ACCEPTED}  # Verimor takes the request; the report says duplicate
    second = list(verimor.campaigns.values())[-1]
    push = [dict(m.entry(), type="outbound") for m in second]
    reports = wire.parse_reports(callback("https://sms.example.org/callbacks/vr",
                                          body=json.dumps(push).encode()))
    assert {(r.status, r.state, r.final) for r in reports} == {
        ("DOUBLE_SEND_ERROR", "REJECTED", True)}
    assert [r.ref for r in reports] == [m.ref for m in again]


def test_a_refused_batch_gives_every_message_the_refusal(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    verimor.credit = 2
    outcomes = send_batch(wire, campaign(3))
    assert {o.blocked for o in outcomes} == {"no_credit"}
    assert {o.result for o in outcomes} == {SubmitResult.RETRY}
    verimor.credit = 100
    # One number Verimor cannot read: the request is refused, which number it does not
    # say; nothing was sent, so none is refused for good: all may go again.
    bad = [*campaign(2, first=10), message(ref="SHORT", msisdn="+90532", body="Hafta sonu"
                                           " indirim")]
    outcomes = send_batch(wire, bad)
    assert {o.result for o in outcomes} == {SubmitResult.RETRY}
    assert all("INVALID_DESTINATION_ADDRESS" in (o.error or "")
               for o in outcomes)
    assert len(verimor.campaigns) == 0 and verimor.credit == 100


def test_an_unreadable_batch_answer_leaves_every_message_uncertain(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    verimor.answer_next(200, "<html><body>Service Unavailable</body></html>")
    outcomes = send_batch(wire, campaign(4))
    assert {o.result for o in outcomes} == {SubmitResult.UNCERTAIN}
