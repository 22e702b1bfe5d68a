"""The ``iletimerkezi`` kind sends as İletimerkezi's documentation says, and reads every
code its answer may carry: checked against a fake written from that documentation
(``appliance.simulator.iletimerkezi_fake``), over real HTTP on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from appliance.config import ConfigError, Settings
from appliance.provider_kinds import check_providers
from appliance.providers import SubmitResult
from appliance.providers.iletimerkezi import number_of
from appliance.providers.iletimerkezi_codes import CODE_TEXT
from appliance.simulator.iletimerkezi_fake import Account, FakeServer, IletimerkeziFake
from tests.providers.iletimerkezi_support import (
    HASH,
    KEY,
    SENDER,
    adapter,
    fake_state,
    last_body,
    msg,
    script,
    send_many,
    send_one,
    settings,
)


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def test_one_message_is_an_order_of_one_number_field_by_field(fake: FakeServer) -> None:
    wire = adapter(fake.base_url)
    outcome = send_one(wire, msg(1))
    [received] = fake_state(fake)["received"]
    assert received["endpoint"] == "send-sms"
    assert received["content_type"] == "application/json"
    assert last_body(fake) == {"request": {
        "authentication": {"key": KEY, "hash": HASH},
        "order": {"sender": SENDER, "sendDateTime": "", "iys": "1", "iysList": "BIREYSEL",
                  "message": {"text": "Kodunuz 1234",
                              "receipents": {"number": ["905321234501"]}}}}}
    [(order_id, order)] = fake_state(fake)["orders"].items()
    assert order["numbers"] == ["5321234501"] and order["sender"] == SENDER
    assert outcome.result is SubmitResult.ACCEPTED
    assert outcome.provider_msg_id == f"{order_id}:905321234501"
    assert outcome.blocked is None and outcome.error is None


def test_many_numbers_go_in_one_order_each_with_its_own_id(fake: FakeServer) -> None:
    wire = adapter(fake.base_url)
    msgs = [msg(n) for n in range(1, 6)]
    outcomes = send_many(wire, msgs)
    state = fake_state(fake)
    assert len(state["received"]) == 1
    [(order_id, order)] = state["orders"].items()
    assert order["numbers"] == [f"53212345{n:02d}" for n in range(1, 6)]
    numbers = last_body(fake)["request"]["order"]["message"]["receipents"]["number"]
    assert numbers == [f"9053212345{n:02d}" for n in range(1, 6)]
    assert [o.result for o in outcomes] == [SubmitResult.ACCEPTED] * 5
    assert [o.provider_msg_id for o in outcomes] == [
        f"{order_id}:9053212345{n:02d}" for n in range(1, 6)]
    assert state["sms"] == 100_000 - 5


def test_an_order_holds_one_text() -> None:
    wire = adapter()
    with pytest.raises(ValueError, match="one text"):
        wire.build_batch_request([msg(1), msg(2, body="another")])


def test_the_same_number_twice_in_one_order_is_uncertain_the_second_time(
        fake: FakeServer) -> None:
    outcomes = send_many(adapter(fake.base_url), [msg(1), msg(2, msisdn="+905321234501")])
    assert [o.result for o in outcomes] == [SubmitResult.ACCEPTED, SubmitResult.UNCERTAIN]


def test_iys_options_are_sent_as_the_api_names_them(fake: FakeServer) -> None:
    send_one(adapter(fake.base_url, iys=False, iys_list="TACIR"), msg(1))
    order = last_body(fake)["request"]["order"]
    assert (order["iys"], order["iysList"]) == ("0", "TACIR")


def test_numbers_are_e164_digits_whatever_form_they_come_in() -> None:
    for given in ("+905321234567", "905321234567", "5321234567", "05321234567",
                  "+90 532 123 45 67", 5321234567):
        assert number_of(str(given)) == "905321234567"
    assert number_of("+4915112345678") == "4915112345678"


# -- every code ----------------------------------------------------------------------------

BLOCKING = {401: "credentials", 402: "no_credit", 450: "sender_not_registered",
            459: "sender_not_registered", 460: "sender_not_registered"}
REJECTED = (400, 422, 451, 453, 454, 457, 468, 469, 470)
RETRIED = (404, 503)
NOT_A_SEND_ANSWER = (110, 111, 112, 113, 114, 115, 455, 456, 458, 461, 462, 463, 464, 465,
                     467, 471, 472, 473)


def test_every_documented_code_has_a_mapping() -> None:
    mapped = {200, *BLOCKING, *REJECTED, *RETRIED, *NOT_A_SEND_ANSWER, 452, 466}
    assert mapped == set(CODE_TEXT)


@pytest.mark.parametrize("code", sorted(BLOCKING))
def test_codes_that_hold_the_lane(fake: FakeServer, code: int) -> None:
    script(fake, "send-sms", {"code": code})
    outcome = send_one(adapter(fake.base_url), msg(1))
    assert outcome.result is SubmitResult.RETRY and outcome.unreached
    assert outcome.blocked == BLOCKING[code]
    assert outcome.error is not None and str(code) in outcome.error


@pytest.mark.parametrize("code", REJECTED)
def test_codes_that_refuse_for_good(fake: FakeServer, code: int) -> None:
    script(fake, "send-sms", {"code": code}, {"code": code})
    outcome = send_one(adapter(fake.base_url), msg(1))
    assert outcome.result is SubmitResult.REJECTED and outcome.blocked is None
    assert outcome.error is not None and f"iletimerkezi {code} " in outcome.error
    assert outcome.error.startswith("iys: ") == (code in (468, 469, 470))
    many = send_many(adapter(fake.base_url), [msg(1), msg(2)])
    assert [o.result for o in many] == [SubmitResult.REJECTED] * 2


@pytest.mark.parametrize("code", (452, 466))
def test_a_refused_recipient_is_rejected_alone_and_retried_in_an_order_of_many(
        fake: FakeServer, code: int) -> None:
    script(fake, "send-sms", {"code": code}, {"code": code})
    one = send_one(adapter(fake.base_url), msg(1))
    assert one.result is SubmitResult.REJECTED
    assert one.error is not None and CODE_TEXT[code] in one.error
    many = send_many(adapter(fake.base_url), [msg(1), msg(2)])
    assert [o.result for o in many] == [SubmitResult.RETRY] * 2
    assert not many[0].unreached and many[0].blocked is None


@pytest.mark.parametrize("code", (*RETRIED, 500, 502))
def test_codes_that_are_tried_again(fake: FakeServer, code: int) -> None:
    script(fake, "send-sms", {"code": code})
    outcome = send_one(adapter(fake.base_url), msg(1))
    assert outcome.result is SubmitResult.RETRY and outcome.retry_after_s == 60.0


@pytest.mark.parametrize("code", (*NOT_A_SEND_ANSWER, 299, 499, 504, 600))
def test_codes_a_send_is_not_documented_to_answer_are_uncertain(fake: FakeServer,
                                                                 code: int) -> None:
    script(fake, "send-sms", {"code": code})
    outcome = send_one(adapter(fake.base_url), msg(1))
    assert outcome.result is SubmitResult.UNCERTAIN
    assert outcome.error is not None and str(code) in outcome.error


# -- the codes the fake gives of its own accord ---------------------------------------------

def test_wrong_credentials_hold_the_lane(fake: FakeServer) -> None:
    outcome = send_one(adapter(fake.base_url, hash="not-it"), msg(1))
    assert outcome.blocked == "credentials"
    assert fake_state(fake)["orders"] == {}


def test_a_başlık_not_approved_holds_the_lane(fake: FakeServer) -> None:
    outcome = send_one(adapter(fake.base_url, sender="OTHER"), msg(1))
    assert outcome.blocked == "sender_not_registered"


def test_no_credit_holds_the_lane() -> None:
    with FakeServer(IletimerkeziFake(Account(sms=1))) as fake:
        outcomes = send_many(adapter(fake.base_url), [msg(1), msg(2)])
    assert [o.blocked for o in outcomes] == ["no_credit"] * 2


def test_a_duplicate_order_is_rejected(fake: FakeServer) -> None:
    wire = adapter(fake.base_url)
    assert send_one(wire, msg(1)).result is SubmitResult.ACCEPTED
    again = send_one(wire, msg(1))
    assert again.result is SubmitResult.REJECTED
    assert again.error is not None and "451 duplicate order" in again.error
    assert len(fake_state(fake)["orders"]) == 1


def test_an_invalid_number_is_rejected_with_the_reason(fake: FakeServer) -> None:
    outcome = send_one(adapter(fake.base_url), msg(1, msisdn="+123"))
    assert outcome.result is SubmitResult.REJECTED
    assert outcome.error is not None and "452 invalid message recipients" in outcome.error


def test_an_empty_or_too_long_text_is_rejected(fake: FakeServer) -> None:
    wire = adapter(fake.base_url)
    assert "454" in (send_one(wire, msg(1, body=" ")).error or "")
    assert "453" in (send_one(wire, msg(1, body="x" * 1200)).error or "")


# -- answers that are not İletimerkezi's ---------------------------------------------------

@pytest.mark.parametrize(("answer", "result"), [
    ({"http": 502, "body": "<html><h1>502 Bad Gateway</h1></html>"}, SubmitResult.RETRY),
    ({"http": 503, "body": "<html>down</html>"}, SubmitResult.RETRY),
    ({"http": 504, "body": "<html>gateway timeout</html>"}, SubmitResult.UNCERTAIN),
    ({"http": 200, "body": "<html>welcome</html>"}, SubmitResult.UNCERTAIN),
    ({"http": 403, "body": "<html>forbidden</html>"}, SubmitResult.UNCERTAIN),
    ({"http": 200, "body": "", "content_type": "application/json"}, SubmitResult.UNCERTAIN),
    ({"http": 200, "body": '{"response": {"status": {"code": "abc"}}}',
      "content_type": "application/json"}, SubmitResult.UNCERTAIN),
    ({"http": 200, "body": '{"response": {"status": {"code": "200"}}}',
      "content_type": "application/json"}, SubmitResult.UNCERTAIN),
    ({"http": 200, "body": '{"response": {"status": {"code": 200}, "order": {"id": "x1"}}}',
      "content_type": "application/json"}, SubmitResult.UNCERTAIN),
    ({"http": 200, "body": '[1, 2]', "content_type": "application/json"},
     SubmitResult.UNCERTAIN),
])
def test_malformed_and_html_answers_are_never_a_final_state(
        fake: FakeServer, answer: dict[str, object], result: SubmitResult) -> None:
    script(fake, "send-sms", answer, answer)
    assert send_one(adapter(fake.base_url), msg(1)).result is result
    many = send_many(adapter(fake.base_url), [msg(1), msg(2)])
    assert [o.result for o in many] == [result] * 2


def test_a_429_without_the_envelope_waits_as_told(fake: FakeServer) -> None:
    script(fake, "send-sms", {"http": 429, "body": "slow down"})
    outcome = send_one(adapter(fake.base_url), msg(1))
    assert outcome.result is SubmitResult.RETRY


def test_a_truncated_answer_is_uncertain_though_the_order_was_taken(fake: FakeServer) -> None:
    script(fake, "send-sms", {"truncate": True})
    outcomes = send_many(adapter(fake.base_url), [msg(1), msg(2)])
    assert [o.result for o in outcomes] == [SubmitResult.UNCERTAIN] * 2
    assert len(fake_state(fake)["orders"]) == 1  # it was taken: never sent again blindly


def test_a_numeric_code_and_order_id_are_read_as_the_textual_ones(fake: FakeServer) -> None:
    body = '{"response": {"status": {"code": 200, "message": "ok"}, "order": {"id": 77}}}'
    script(fake, "send-sms", {"http": 200, "body": body, "content_type": "application/json"})
    outcome = send_one(adapter(fake.base_url), msg(3))
    assert (outcome.result, outcome.provider_msg_id) == (SubmitResult.ACCEPTED,
                                                          "77:905321234503")


# -- configuration --------------------------------------------------------------------------

def test_credentials_and_başlık_are_required_and_checked() -> None:
    for missing in ("key", "hash"):
        table = settings().with_keys(**{missing: ""})
        with pytest.raises(ConfigError, match=f"{missing}: required"):
            check_providers(Settings(providers={"im": table}))
    for sender in ("TOOLONGSENDER", "ŞİRKET"):
        with pytest.raises(ConfigError, match="at most 11 characters"):
            check_providers(Settings(providers={"im": settings(sender=sender)}))
    check_providers(Settings(providers={"im": settings()}))
