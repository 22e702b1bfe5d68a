"""The İYS fields each kind writes for one message (:mod:`appliance.providers.iys`):
commercial with its recipient type, transactional with İYS off, and, without
``[compliance]`` (no fields given), the table's options as before. A request of many
messages carries one set of fields: messages that differ are never put in one."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

import httpx
import pytest

from appliance.providers import CallbackRequest, Outcome, SubmitResult
from appliance.providers.batch import BatchWireFormat
from appliance.providers.iletimerkezi_codes import send_outcome
from appliance.providers.iys import Iys, refused_for_iys
from appliance.providers.status_query import PullTarget
from tests.providers import iletimerkezi_support as im
from tests.providers import netgsm_support as ng
from tests.providers.provider_test_support import message
from tests.providers.test_provider_infobip import adapter as infobip
from tests.providers.test_verimor_batch import campaign as verimor_batch
from tests.providers.test_verimor_wire import adapter as verimor
from tests.providers.test_verimor_wire import answer as verimor_answer

BIREYSEL = Iys(commercial=True, recipient_type="BIREYSEL", brand_code="654321")
TACIR = Iys(commercial=True, recipient_type="TACIR", brand_code="654321")
OFF = Iys(commercial=False, brand_code="654321")


def test_infobip_sends_turkey_iys_for_a_commercial_message_only() -> None:
    wire = infobip()
    [one] = wire.request_body(replace(message(), iys=TACIR))["messages"]
    assert one["regional"] == {"turkeyIys": {"brandCode": 654321, "recipientType": "TACIR"}}
    [plain] = wire.request_body(replace(message(), iys=OFF))["messages"]
    assert "regional" not in plain
    assert "regional" not in wire.request_body(message())["messages"][0]
    sent = json.loads(wire.build_request(replace(message(), iys=BIREYSEL)).content)
    assert sent["messages"][0]["regional"]["turkeyIys"]["recipientType"] == "BIREYSEL"
    # No brand code set: Infobip uses the account's default.
    bare = wire.request_body(replace(message(), iys=Iys(commercial=True)))["messages"][0]
    assert bare["regional"] == {"turkeyIys": {"recipientType": "BIREYSEL"}}


def test_iletimerkezi_writes_iys_and_the_list_per_message_else_its_options() -> None:
    wire = im.adapter(iys=False, iys_list="TACIR")
    order = json.loads(wire.build_request(replace(im.msg(1), iys=BIREYSEL)).content)[
        "request"]["order"]
    assert (order["iys"], order["iysList"]) == ("1", "BIREYSEL")
    order = json.loads(wire.build_request(replace(im.msg(1), iys=OFF)).content)[
        "request"]["order"]
    assert order["iys"] == "0"
    order = json.loads(wire.build_request(im.msg(1)).content)["request"]["order"]
    assert (order["iys"], order["iysList"]) == ("0", "TACIR")


def test_netgsm_filter_is_11_12_or_0_per_message_else_its_option() -> None:
    wire = ng.adapter(iys_filter="12")
    one = ng.batch(1)[0]
    assert "<filter>11</filter>" in wire.send_body([replace(one, iys=BIREYSEL)])
    assert "<filter>12</filter>" in wire.send_body([replace(one, iys=TACIR)])
    assert "<filter>0</filter>" in wire.send_body([replace(one, iys=OFF)])
    assert "<filter>12</filter>" in wire.send_body([one])


def test_verimor_says_is_commercial_and_the_recipient_type() -> None:
    wire = verimor()
    msgs = verimor_batch(2)
    body = wire.send_body([replace(m, iys=TACIR) for m in msgs])
    assert (body["is_commercial"], body["iys_recipient_type"]) == (True, "TACIR")
    off = wire.send_body([replace(m, iys=OFF) for m in msgs])
    assert off["is_commercial"] is False and "iys_recipient_type" not in off
    assert "is_commercial" not in wire.send_body(msgs)


@pytest.mark.parametrize("wire", ["iletimerkezi", "netgsm", "verimor"])
def test_a_request_never_mixes_two_recipient_types(wire: str) -> None:
    adapter: BatchWireFormat
    if wire == "iletimerkezi":
        a, b = replace(im.msg(1), iys=BIREYSEL), replace(im.msg(2), iys=TACIR)
        adapter = im.adapter()
    elif wire == "netgsm":
        a, b = (replace(m, iys=i) for m, i in zip(ng.batch(2), (BIREYSEL, TACIR),
                                                  strict=True))
        adapter = ng.adapter()
    else:
        a, b = (replace(m, iys=i) for m, i in zip(verimor_batch(2), (BIREYSEL, OFF),
                                                  strict=True))
        adapter = verimor()
    with pytest.raises(ValueError, match="one type and one recipient type"):
        adapter.build_batch_request([a, b])


def test_a_recipient_type_that_is_neither_cannot_be_made() -> None:
    with pytest.raises(ValueError):
        Iys(commercial=True, recipient_type="KURUMSAL")


def _netgsm_answer(body: str) -> httpx.Response:
    wire = ng.adapter()
    return httpx.Response(200, content=body.encode(), request=wire.build_request(ng.batch(1)[0]))


@pytest.mark.parametrize(("outcome", "kind"), [
    (lambda: send_outcome(469, "IYS listenizi seçmelisiniz", many=False), "iys"),
    (lambda: send_outcome(470, "", many=True), "iys"),
    (lambda: send_outcome(451, "Tekrar eden sipariş", many=False), None),
    (lambda: ng.adapter().interpret_response(_netgsm_answer("50")), "iys"),
    (lambda: ng.adapter().interpret_response(_netgsm_answer("51")), "iys"),
    (lambda: ng.adapter().interpret_response(_netgsm_answer("20")), None),
    (lambda: verimor().interpret_response(verimor_answer(400, "NO_AHS_BRAND_ERROR")), "iys"),
    (lambda: verimor().interpret_response(verimor_answer(400, "INVALID_IYS_RECIPIENT_TYPE")),
     "iys"),
    (lambda: verimor().interpret_response(verimor_answer(400, "FORBIDDEN_MESSAGE")), None),
])
def test_an_iys_refusal_is_rejected_with_error_kind_iys(outcome: Callable[[], Outcome],
                                                        kind: str | None) -> None:
    got = outcome()
    assert got.result is SubmitResult.REJECTED and got.error_kind == kind, got


@pytest.mark.parametrize("outcome", [
    lambda: send_outcome(499, "", many=False),
    lambda: ng.adapter().interpret_response(_netgsm_answer("52")),
    lambda: verimor().interpret_response(verimor_answer(400, "NOT_A_WORD_OF_THE_GUIDE")),
])
def test_an_unknown_code_stays_as_it_was_and_is_never_an_iys_refusal(
        outcome: Callable[[], Outcome]) -> None:
    got = outcome()
    assert got.result in (SubmitResult.UNCERTAIN, SubmitResult.RETRY), got
    assert got.error_kind is None


def test_a_report_of_an_iys_refusal_carries_the_mark_to_the_message() -> None:
    wire = verimor()
    refused = wire.report_of({"status": "NOT_ALLOWED_BY_IYS", "message_custom_id": "R1",
                              "campaign_id": 7, "dest": "905321234567", "gsm_error": "0"})
    assert refused.state == "REJECTED" and refused_for_iys(refused.error_code)
    other = wire.report_of({"status": "REJECTED", "message_custom_id": "R2",
                            "campaign_id": 7, "dest": "905321234568", "gsm_error": "0"})
    assert other.state == "REJECTED" and not refused_for_iys(other.error_code)


def test_a_netgsm_report_of_state_16_is_marked_as_refused_by_iys() -> None:
    wire = ng.adapter()
    target = PullTarget("R1", "1311033503:905321234500", "+905321234500", 0)
    body = (b"905321234500 16 10 1 05.12.2026 10:00:00 0<br>")
    answer = wire.read_status_answer([target], 200, CallbackRequest(
        method="PULL", url="", query="", headers={}, body=body))
    [one] = answer.reports
    assert one.state == "REJECTED" and refused_for_iys(one.error_code), one
    body = (b"905321234500 3 10 1 05.12.2026 10:00:00 105<br>")
    [other] = wire.read_status_answer([target], 200, CallbackRequest(
        method="PULL", url="", query="", headers={}, body=body)).reports
    assert other.state == "REJECTED" and not refused_for_iys(other.error_code), other
