"""Netgsm: the send request and its answer field by field against a fake Netgsm written
from Netgsm's own client library (``netgsm/sms``), one number and many, every send code
the reference lists, and answers that are not answers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from appliance.providers import OutgoingMessage, SubmitResult
from appliance.providers.batch import batch_wire_of
from appliance.providers.netgsm_codes import SEND_CODES, SendVerdict
from appliance.providers.netgsm_wire import cdata, read_send_answer
from tests.providers.netgsm_support import (
    PASSWORD,
    USERCODE,
    Rig,
    adapter,
    batch,
    exchange,
    running_rig,
)
from tests.providers.provider_test_support import message

REF = "01HF3Z9K2M8Q4R6T7V"


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from running_rig()


def send_one(rig: Rig, msg: OutgoingMessage, **changes: object) -> tuple[httpx.Request,
                                                                        httpx.Response]:
    request = rig.adapter(**changes).build_request(msg)
    return request, exchange(request)


# -- the request ---------------------------------------------------------------------------


def test_one_message_is_a_1_n_xml_task_with_every_field_of_the_reference(rig: Rig) -> None:
    request, response = send_one(rig, message(ref=REF, body="Kodunuz 1234"))
    assert request.method == "POST"
    assert str(request.url) == f"{rig.running.base_url}/sms/send/xml"
    assert request.headers["content-type"].startswith("text/xml")
    [sent] = rig.fake.sends
    assert sent == {"path": "/sms/send/xml", "type": "1:n", "company": "Netgsm", "dil": "TR",
                    "usercode": USERCODE, "password": PASSWORD, "msgheader": "BASLIGIM",
                    "filter": "0", "encoding": "", "pairs": [("Kodunuz 1234", "905321234567")]}
    outcome = rig.adapter().interpret_response(response)
    [bulk] = rig.fake.tasks
    assert response.text == f"00 {bulk}"
    assert outcome.result is SubmitResult.ACCEPTED
    assert outcome.provider_msg_id == f"{bulk}:905321234567"
    assert rig.fake.state_of("905321234567") == "1"


def test_turkish_goes_with_encoding_tr_and_other_text_without(rig: Rig) -> None:
    turkish = replace(message(body="Şirketimizden ığüşöç"), encoding="GSM-7 Turkish")
    send_one(rig, turkish)
    send_one(rig, replace(message(body="Привет"), encoding="UCS-2"))
    assert [s["encoding"] for s in rig.fake.sends] == ["TR", ""]
    assert rig.fake.sends[0]["pairs"][0][0] == "Şirketimizden ığüşöç"


def test_a_number_abroad_goes_with_00_and_its_id_is_its_e164_digits(rig: Rig) -> None:
    _, response = send_one(rig, message(msisdn="+4915112345678"))
    assert rig.fake.sends[0]["pairs"] == [("Your code is 1234", "004915112345678")]
    [bulk] = rig.fake.tasks
    assert rig.adapter().interpret_response(response).provider_msg_id == \
        f"{bulk}:4915112345678"


def test_markup_in_the_text_and_the_header_arrives_verbatim(rig: Rig) -> None:
    rig.fake.headers.append("A&B <Ltd>")
    text = "1 < 2 & 3 > 2 ]]> <![CDATA[ x ]]> \"'"
    _, response = send_one(rig, message(body=text), sender="A&B <Ltd>")
    assert response.text.startswith("00 ")
    assert rig.fake.sends[0]["pairs"][0][0] == text
    assert rig.fake.sends[0]["msgheader"] == "A&B <Ltd>"
    assert cdata("a]]>b") == "<![CDATA[a]]]]><![CDATA[>b]]>"


def test_the_iys_filter_of_the_table_goes_with_every_task(rig: Rig) -> None:
    for value in ("0", "11", "12"):
        send_one(rig, message(), iys_filter=value)
    assert [s["filter"] for s in rig.fake.sends] == ["0", "11", "12"]


# -- many numbers, one request -------------------------------------------------------------


def test_many_numbers_for_one_text_are_one_task_and_each_its_own_id(rig: Rig) -> None:
    wire = batch_wire_of(rig.adapter())
    assert wire is not None
    msgs = batch(4)
    request = wire.build_batch_request(msgs)
    response = exchange(request)
    [sent] = rig.fake.sends
    assert sent["type"] == "1:n" and sent["encoding"] == "TR"
    assert sent["pairs"] == [("Kampanya başladı", f"90532123450{i}") for i in range(4)]
    [bulk] = rig.fake.tasks
    outcomes = wire.interpret_batch_response(msgs, response)
    assert [o.result for o in outcomes] == [SubmitResult.ACCEPTED] * 4
    assert [o.provider_msg_id for o in outcomes] == [f"{bulk}:90532123450{i}"
                                                      for i in range(4)]


def test_a_batch_holds_one_text(rig: Rig) -> None:
    wire = batch_wire_of(rig.adapter())
    assert wire is not None
    with pytest.raises(ValueError, match="one text"):
        wire.build_batch_request([*batch(2), replace(batch(1)[0], body="other")])


def test_an_invalid_number_in_a_task_is_taken_and_reported_invalid(rig: Rig) -> None:
    """The reference refuses no task for a bad number: the report says state 3."""
    wire = batch_wire_of(rig.adapter())
    assert wire is not None
    msgs = [*batch(2), replace(batch(1)[0], ref="BAD", msisdn="+90123")]
    outcomes = wire.interpret_batch_response(msgs, exchange(wire.build_batch_request(msgs)))
    assert [o.result for o in outcomes] == [SubmitResult.ACCEPTED] * 3
    assert rig.fake.state_of("90123") == "3"


# -- every code of the reference -----------------------------------------------------------


def code_from_the_fake(rig: Rig, code: str) -> tuple[dict[str, object], str | None]:
    """Drive the fake into answering ``code`` the way the reference says it happens;
    the table changes to send with, and the text (``None``: a short one)."""
    fake = rig.fake
    if code == "20":
        return {}, "x" * 918
    if code == "30":
        return {"password": "wrong"}, None
    if code == "40":
        return {"sender": "NOTMINE"}, None
    if code == "50":
        fake.iys = False
        return {"iys_filter": "11"}, None
    if code == "51":
        fake.iys_brand = False
        return {"iys_filter": "12"}, None
    if code == "80":
        fake.send_limit_per_min = 1
        exchange(rig.adapter().build_request(message(msisdn="+905329999999")))
        return {}, None
    if code == "85":
        fake.duplicate_limit = 1
        exchange(rig.adapter().build_request(message()))
        return {}, None
    fake.answer_next("send", code if code not in ("00", "01", "02") else f"{code} 1311000001")
    return {}, None


EXPECTED = {
    SendVerdict.ACCEPTED: (SubmitResult.ACCEPTED, None),
    SendVerdict.REJECTED: (SubmitResult.REJECTED, None),
    SendVerdict.IYS: (SubmitResult.REJECTED, None),
    SendVerdict.DUPLICATE: (SubmitResult.REJECTED, None),
    SendVerdict.CREDENTIALS: (SubmitResult.RETRY, "credentials"),
    SendVerdict.SENDER_NOT_REGISTERED: (SubmitResult.RETRY, "sender_not_registered"),
    SendVerdict.RATE: (SubmitResult.RETRY, None),
    SendVerdict.SYSTEM: (SubmitResult.RETRY, None),
}


@pytest.mark.parametrize("code", sorted(SEND_CODES))
def test_every_send_code_of_the_reference_is_mapped(rig: Rig, code: str) -> None:
    changes, text = code_from_the_fake(rig, code)
    _, response = send_one(rig, message(body=text or "Merhaba"), **changes)
    assert response.text.split()[0] == code
    outcome = rig.adapter(**changes).interpret_response(response)
    verdict = SEND_CODES[code].verdict
    result, blocked = EXPECTED[verdict]
    assert (outcome.result, outcome.blocked) == (result, blocked), outcome
    if verdict is SendVerdict.ACCEPTED:
        assert outcome.provider_msg_id == "1311000001:905321234567"
        return
    assert outcome.error and outcome.error.startswith(f"İYS: netgsm {code}"
                                                      if verdict is SendVerdict.IYS
                                                      else f"netgsm {code}:")
    assert SEND_CODES[code].meaning in outcome.error
    if blocked:  # the lane holds: no attempt counted, tried again in a minute
        assert outcome.unreached and outcome.retry_after_s == 60.0
    if verdict in (SendVerdict.RATE, SendVerdict.SYSTEM):
        assert outcome.retry_after_s == 60.0 and not outcome.unreached


def test_a_duplicate_in_a_batch_sends_every_message_again_later(rig: Rig) -> None:
    """``85`` names no number: no task was made, so each message may go again."""
    wire = batch_wire_of(rig.adapter())
    assert wire is not None
    rig.fake.answer_next("send", "85")
    msgs = batch(3)
    outcomes = wire.interpret_batch_response(msgs, exchange(wire.build_batch_request(msgs)))
    assert {o.result for o in outcomes} == {SubmitResult.RETRY}
    assert "one number of a batch of 3" in (outcomes[0].error or "")


def test_a_refusal_of_a_batch_holds_or_rejects_every_message(rig: Rig) -> None:
    wire = batch_wire_of(rig.adapter(sender="NOTMINE"))
    assert wire is not None
    msgs = batch(3)
    outcomes = wire.interpret_batch_response(msgs, exchange(wire.build_batch_request(msgs)))
    assert [o.blocked for o in outcomes] == ["sender_not_registered"] * 3
    assert rig.fake.tasks == {}


# -- answers that are not answers ----------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "result"),
    [
        (200, "<html><body><h1>Bakım çalışması</h1></body></html>", SubmitResult.UNCERTAIN),
        (200, "", SubmitResult.UNCERTAIN),
        (200, "0", SubmitResult.UNCERTAIN),  # "00 1311…" cut after a byte: "0" is no code
        (200, "00", SubmitResult.UNCERTAIN),  # taken, but the bulk id was cut off
        (200, "00 13110", SubmitResult.ACCEPTED),
        (200, "00 1311abc", SubmitResult.UNCERTAIN),
        (200, "99", SubmitResult.UNCERTAIN),  # a code the reference does not list
        (200, "00 1311 extra words", SubmitResult.UNCERTAIN),
        (200, "<?xml version='1.0'?><xml><main><code>00</code>", SubmitResult.UNCERTAIN),
        (200, b"\xff\xfe00 1311", SubmitResult.UNCERTAIN),
        (502, "<html>Bad Gateway</html>", SubmitResult.RETRY),
        (404, "<html>Not Found</html>", SubmitResult.RETRY),
        (403, "Forbidden", SubmitResult.RETRY),
        (504, "", SubmitResult.UNCERTAIN),
        (429, "", SubmitResult.RETRY),
    ],
)
def test_an_answer_that_is_not_one_is_never_a_made_up_final_state(
        rig: Rig, status: int, body: str | bytes, result: SubmitResult) -> None:
    rig.fake.answer_next("send", body.decode("latin-1") if isinstance(body, bytes) else body,
                         status=status)
    _, response = send_one(rig, message())
    outcome = rig.adapter().interpret_response(response)
    assert outcome.result is result, (outcome, response.content)
    if result is not SubmitResult.ACCEPTED:
        assert outcome.error and outcome.error.startswith("netgsm")


def test_the_xml_form_of_the_answer_is_read(rig: Rig) -> None:
    form = "<?xml version='1.0'?><xml><main><code>{}</code><jobID>{}</jobID></main></xml>"
    rig.fake.answer_next("send", form.format("0", "1311555"))
    rig.fake.answer_next("send", form.format("40", ""))
    first = rig.adapter().interpret_response(send_one(rig, message())[1])
    assert (first.result, first.provider_msg_id) == (SubmitResult.ACCEPTED,
                                                     "1311555:905321234567")
    second = rig.adapter().interpret_response(send_one(rig, message())[1])
    assert second.blocked == "sender_not_registered"


def test_an_unreadable_batch_answer_makes_every_message_uncertain(rig: Rig) -> None:
    wire = batch_wire_of(rig.adapter())
    assert wire is not None
    rig.fake.answer_next("send", "<html>oops</html>")
    msgs = batch(3)
    outcomes = wire.interpret_batch_response(msgs, exchange(wire.build_batch_request(msgs)))
    assert {o.result for o in outcomes} == {SubmitResult.UNCERTAIN}


def test_an_answer_without_its_request_still_reads() -> None:
    """The id is then the bulk id alone (no number to pair it with)."""
    outcome = adapter().interpret_response(httpx.Response(200, text="00 1311033503"))
    assert (outcome.result, outcome.provider_msg_id) == (SubmitResult.ACCEPTED, "1311033503")


def test_the_send_answer_reader_takes_both_forms_and_nothing_else() -> None:
    assert read_send_answer(b"00 1311033503") == ("00", "1311033503")
    assert read_send_answer(b" 30 \n") == ("30", None)
    assert read_send_answer(b"<?xml version='1.0'?><xml><main><code>1</code>"
                            b"<jobID>7</jobID></main></xml>") == ("01", "7")
    for bad in (b"", b"abc", b"00 1 2", b"<html></html>", b"1" * 70_000):
        with pytest.raises(ValueError):
            read_send_answer(bad)
