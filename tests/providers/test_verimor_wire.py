"""Verimor: the send request and answer field by field, every code of the guide, and the
report push, as Verimor's API guide ("VERİMOR SMS API DÖKÜMANI") writes them."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import httpx
import pytest

from appliance.config import ProviderSettings
from appliance.providers import AuthError, OutgoingMessage, ReportParseError, SubmitResult
from appliance.providers.batch import batch_wire_of
from appliance.providers.verimor import VerimorAdapter
from appliance.providers.verimor_codes import REPORT_STATES, SEND_ERRORS, SendVerdict
from tests.providers.provider_test_support import adapter_of, callback, changed, message

BASE = "https://sms.verimor.com.tr"
CB = "https://sms.example.org/callbacks/vr"
REF = "01HF3Z9K2M8Q4R6T7V"


def settings(**changes: object) -> ProviderSettings:
    base = ProviderSettings(name="vr", kind="verimor", base_url=BASE, sender="BASLIGIM",
                            username="908501234567", password="api-pass-1")
    return changed(base, **changes)


def adapter(**changes: object) -> VerimorAdapter:
    return adapter_of(VerimorAdapter, settings(**changes))


def sent_json(request: httpx.Request) -> dict[str, Any]:
    body = json.loads(request.read())
    assert isinstance(body, dict)
    return body


def answer(status: int, body: str | bytes, request: httpx.Request | None = None,
           headers: dict[str, str] | None = None) -> httpx.Response:
    content = body.encode() if isinstance(body, str) else body
    req = request or adapter().build_request(message(ref=REF))
    return httpx.Response(status, content=content, request=req, headers=headers)


def batch(n: int = 3, body: str = "Kampanya başladı") -> list[OutgoingMessage]:
    return [replace(message(ref=f"REF{i:03d}", msisdn=f"+90532123450{i}", body=body),
                    encoding="GSM-7 Turkish") for i in range(n)]


# -- the send request ---------------------------------------------------------------------


def test_one_message_is_a_send_json_post_with_every_documented_field() -> None:
    request = adapter().build_request(message(ref=REF, body="Kodunuz 1234"))
    assert request.method == "POST"
    assert str(request.url) == f"{BASE}/v2/send.json"
    assert request.headers["content-type"] == "application/json"
    assert sent_json(request) == {
        "username": "908501234567",
        "password": "api-pass-1",
        "source_addr": "BASLIGIM",
        "datacoding": "0",
        "custom_id": REF,
        "messages": [{"msg": "Kodunuz 1234", "dest": "905321234567", "id": REF}],
    }


def test_a_number_abroad_goes_with_00_and_the_datacoding_follows_the_encoding() -> None:
    wire = adapter()
    abroad = wire.build_request(message(msisdn="+4915112345678"))
    assert sent_json(abroad)["messages"][0]["dest"] == "004915112345678"
    for encoding, coding in (("GSM-7", "0"), ("GSM-7 Turkish", "1"), ("UCS-2", "2")):
        msg = replace(message(body="Şirket"), encoding=encoding)
        assert sent_json(wire.build_request(msg))["datacoding"] == coding


def test_many_numbers_of_one_text_go_in_one_messages_entry_with_an_id_each() -> None:
    wire = batch_wire_of(adapter())
    assert wire is not None
    msgs = batch(3)
    body = sent_json(wire.build_batch_request(msgs))
    assert body["messages"] == [{
        "msg": "Kampanya başladı",
        "dest": "905321234500,905321234501,905321234502",
        "id": "REF000,REF001,REF002",
    }]
    assert body["datacoding"] == "1" and "custom_id" not in body
    with pytest.raises(ValueError, match="one text"):
        wire.build_batch_request([msgs[0], replace(msgs[1], body="other")])


# -- the answer --------------------------------------------------------------------------


def test_the_campaign_id_answer_is_accepted_with_the_campaign_and_number_as_id() -> None:
    outcome = adapter().interpret_response(answer(200, "20212\n"))
    assert outcome.result is SubmitResult.ACCEPTED
    assert outcome.provider_msg_id == "20212:905321234567"


def test_a_batch_answer_gives_each_message_its_own_id() -> None:
    wire = adapter()
    msgs = batch(3)
    request = wire.build_batch_request(msgs)
    outcomes = wire.interpret_batch_response(msgs, answer(200, "20212", request))
    assert [o.provider_msg_id for o in outcomes] == [
        "20212:905321234500", "20212:905321234501", "20212:905321234502"]
    assert {o.result for o in outcomes} == {SubmitResult.ACCEPTED}


@pytest.mark.parametrize("word", sorted(SEND_ERRORS))
def test_every_documented_send_error_has_its_outcome(word: str) -> None:
    wire = adapter()
    one = wire.interpret_response(answer(400, word))
    msgs = batch(2)
    many = wire.interpret_batch_response(msgs, answer(400, word, wire.build_batch_request(msgs)))
    verdict = SEND_ERRORS[word].verdict
    assert word in (one.error or "")
    if verdict is SendVerdict.NO_CREDIT:
        assert one.result is SubmitResult.RETRY and one.blocked == "no_credit"
        assert one.unreached and one.retry_after_s == 60.0
    elif verdict is SendVerdict.SENDER_NOT_REGISTERED:
        assert one.result is SubmitResult.RETRY and one.blocked == "sender_not_registered"
    elif verdict is SendVerdict.NUMBER:
        assert one.result is SubmitResult.REJECTED and one.blocked is None
        assert {o.result for o in many} == {SubmitResult.RETRY}  # which number: not said
    else:
        assert one.result is SubmitResult.REJECTED
    if verdict is not SendVerdict.NUMBER:
        assert [o.result for o in many] == [one.result, one.result]


def test_a_duplicate_and_an_invalid_number_are_final_refusals_with_the_reason() -> None:
    wire = adapter()
    dup = wire.interpret_response(answer(400, "DOUBLE_SEND_ERROR"))
    assert dup.result is SubmitResult.REJECTED and "duplicate" in (dup.error or "")
    bad = wire.interpret_response(answer(400, "INVALID_DESTINATION_ADDRESS"))
    assert bad.result is SubmitResult.REJECTED
    assert bad.error == "verimor INVALID_DESTINATION_ADDRESS: invalid number format" \
                        " (905121234567 expected)"


def test_401_holds_the_lane_for_the_address_or_the_credentials() -> None:
    wire = adapter()
    ip = wire.interpret_response(answer(401, "Hesabınızda izinli IP ayarları yapılmamış"))
    assert ip.result is SubmitResult.RETRY and ip.blocked == "address_not_allowed"
    creds = wire.interpret_response(answer(401, "Geçersiz kullanıcı adı/şifre"))
    assert creds.blocked == "credentials" and creds.unreached


@pytest.mark.parametrize(("status", "body", "result"), [
    (200, "<html><body>Bad gateway</body></html>", SubmitResult.UNCERTAIN),
    (200, "", SubmitResult.UNCERTAIN),
    (200, "2021", SubmitResult.ACCEPTED),  # a short id is still an id
    (200, "20212 OK", SubmitResult.UNCERTAIN),
    (200, b"\xff\xfe", SubmitResult.UNCERTAIN),
    (400, "<html>400 Bad Request</html>", SubmitResult.RETRY),
    (400, "SOMETHING_NEW", SubmitResult.RETRY),
    (400, "", SubmitResult.RETRY),
    (403, "Forbidden", SubmitResult.RETRY),
    (404, "Not Found", SubmitResult.RETRY),
    (413, "Request Entity Too Large", SubmitResult.REJECTED),
    (429, "Too Many Requests", SubmitResult.RETRY),
    (500, "Internal Server Error", SubmitResult.RETRY),
    (502, "<html>502</html>", SubmitResult.RETRY),
    (504, "Gateway Timeout", SubmitResult.UNCERTAIN),
])
def test_malformed_and_undocumented_answers_are_never_a_made_up_final_state(
        status: int, body: str | bytes, result: SubmitResult) -> None:
    outcome = adapter().interpret_response(answer(status, body))
    assert outcome.result is result
    if result is not SubmitResult.ACCEPTED:
        assert outcome.error


def test_429_honours_retry_after_and_an_unreadable_batch_answer_is_uncertain() -> None:
    wire = adapter()
    slow = wire.interpret_response(answer(429, "", headers={"Retry-After": "7"}))
    assert slow.retry_after_s == 7.0
    msgs = batch(3)
    html = answer(200, "<html>oops</html>", wire.build_batch_request(msgs))
    assert {o.result for o in wire.interpret_batch_response(msgs, html)} == {
        SubmitResult.UNCERTAIN}


# -- the report push ---------------------------------------------------------------------


def entry(**changes: Any) -> dict[str, Any]:
    """One report entry, as the guide's example writes it."""
    out: dict[str, Any] = {
        "type": "outbound",
        "campaign_id": 20121,
        "campaign_custom_id": "123456789",
        "message_id": "13582302",
        "message_custom_id": REF,
        "dest": "905319876543",
        "size": 1,
        "international_multiplier": 1,
        "credits": 1,
        "status": "DELIVERED",
        "gsm_error": "0",
        "sent_at": "2015-02-20 16:06:00",
        "done_at": "2015-02-20 16:06:00",
    }
    out.update(changes)
    return out


def push(entries: list[Any] | Any, url: str = CB) -> Any:
    return callback(url, body=json.dumps(entries).encode(),
                    headers={"Content-Type": "application/json"})


def test_a_push_is_an_array_of_reports_with_our_ref_and_turkey_s_clock() -> None:
    wire = adapter()
    reports = wire.parse_reports(push([entry(), entry(message_custom_id="REF2",
                                                      dest="905319876544",
                                                      status="NOT_DELIVERED",
                                                      gsm_error="27", sent_at=None)]))
    first, second = reports
    assert first.ref == REF and first.provider_msg_id == "20121:905319876543"
    assert first.state == "DELIVERED" and first.final and first.error_code is None
    assert first.reported_at_ms == 1_424_437_560_000  # 16:06 in Türkiye is 13:06 UTC
    assert second.ref == "REF2" and second.state == "FAILED"
    assert second.error_code == "27 EC_ABSENT_SUBSCRIBER"


@pytest.mark.parametrize("status", sorted(REPORT_STATES))
def test_every_documented_status_is_mapped(status: str) -> None:
    [got] = adapter().parse_reports(push([entry(status=status)]))
    assert got.status == status and got.state == REPORT_STATES[status]
    assert got.final is (status not in ("SENDING", "WAITING"))


def test_an_unknown_status_is_kept_and_never_final_and_sent_may_stay_open() -> None:
    [odd] = adapter().parse_reports(push([entry(status="SOMETHING_NEW")]))
    assert odd.status == "SOMETHING_NEW" and odd.state == "ENROUTE" and not odd.final
    [sent] = adapter(sent_final=False).parse_reports(push([entry(status="SENT")]))
    assert sent.state == "ENROUTE" and not sent.final


def test_inbound_entries_at_the_report_url_yield_no_report() -> None:
    inbound = {"message_id": 1234, "type": "inbound", "source_addr": "905319876543",
               "destination_addr": "908501234567", "content": "RET"}
    assert adapter().parse_reports(push([inbound])) == []


@pytest.mark.parametrize("body", [
    b"{}", b"<html>x</html>", b'[{"status": "DELIVERED"', b"[1]",
    b'[{"message_custom_id": "R"}]', b'[{"status": "DELIVERED"}]',
    b'[{"status": "DELIVERED", "message_custom_id": ["x"]}]'])
def test_an_unreadable_push_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(ReportParseError):
        adapter().parse_reports(callback(CB, body=body))


def test_the_callback_token_must_be_in_the_url_when_one_is_set() -> None:
    open_wire = adapter()
    open_wire.verify(push([entry()]))  # no token configured: taken as it comes
    guarded = adapter(callback_token="tok-123")
    guarded.verify(push([entry()], url=CB + "?token=tok-123"))
    for url in (CB, CB + "?token=wrong", CB + "?token=tok-123&token=tok-123",
                CB + "?token="):
        with pytest.raises(AuthError):
            guarded.verify(push([entry()], url=url))
