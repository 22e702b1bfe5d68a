"""Verimor asked about its messages and its credit, at the wire: the kind's requests go
over HTTP to the fake Verimor (written from the guide's "HTTP GET ile Gönderim Raporu
Alımı" and "SMS KALAN KREDİ SORGULAMA", not from our client) and its answers are read
back. An answer that says nothing readable is no verdict, never a state (DLR-8)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from appliance.providers import OutgoingMessage, SubmitResult
from appliance.providers.credit import credit_query_of
from appliance.providers.status_query import PullAnswer, PullTarget, PullVerdict, status_query_of
from appliance.providers.verimor import VerimorAdapter
from appliance.simulator.verimor_fake import RunningFake, VerimorFake
from tests.harness import wait_for
from tests.providers.provider_test_support import callback, message
from tests.providers.test_verimor_wire import adapter


@pytest.fixture()
def fake() -> Iterator[tuple[VerimorFake, VerimorAdapter]]:
    verimor = VerimorFake(fates={"905321234501": ("WAITING", "0"),
                                 "905321234502": ("NOT_DELIVERED", "27")})
    with RunningFake(verimor) as running:
        yield verimor, adapter(base_url=running.base_url)


def exchange(request: httpx.Request) -> httpx.Response:
    with httpx.Client(timeout=10) as client:
        return client.send(request)


def sent(wire: VerimorAdapter, msgs: Sequence[OutgoingMessage]) -> list[PullTarget]:
    """``msgs`` sent in one request; the targets the puller would ask about."""
    if len(msgs) == 1:
        outcomes = [wire.interpret_response(exchange(wire.build_request(msgs[0])))]
    else:
        request = wire.build_batch_request(msgs)
        outcomes = wire.interpret_batch_response(msgs, exchange(request))
    assert {o.result for o in outcomes} == {SubmitResult.ACCEPTED}
    return [PullTarget(m.ref, o.provider_msg_id, m.msisdn, 1_700_000_000_000)
            for m, o in zip(msgs, outcomes, strict=True)]


def ask(wire: VerimorAdapter, targets: Sequence[PullTarget]) -> tuple[PullAnswer,
                                                                      dict[str, list[str]]]:
    """The status request about ``targets`` over HTTP, and its answer as the puller
    stores it raw (``method = "PULL"``) and reads it."""
    request = wire.build_status_request(targets)
    response = exchange(request)
    stored = callback(str(request.url), method="PULL", body=response.content,
                      headers={"content-type": response.headers.get("content-type", "")})
    query = parse_qs(urlsplit(str(request.url)).query)
    return wire.read_status_answer(targets, response.status_code, stored), query


def batch(n: int = 3, body: str = "Kampanya") -> list[OutgoingMessage]:
    return [message(ref=f"REF{i:03d}", msisdn=f"+90532123450{i}", body=body)
            for i in range(n)]


def test_the_kind_can_be_asked_in_batches_of_one_campaign() -> None:
    wire = adapter()
    assert status_query_of(wire) is wire and credit_query_of(wire) is wire
    assert wire.status_batch_max == 100  # the guide: a query answers 100 messages
    one = PullTarget("A", "20121:905321234500", "+905321234500", 0)
    other = PullTarget("B", "20122:905321234500", "+905321234500", 0)
    lost = PullTarget("C", None, "+905321234500", 0)
    assert wire.status_batch_key(one) != wire.status_batch_key(other)
    assert wire.status_batch_key(lost) not in (wire.status_batch_key(one), "")


def test_a_campaign_is_asked_about_in_one_request_with_its_numbers(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    targets = sent(wire, batch(3))
    answer, query = ask(wire, targets)
    campaign = targets[0].provider_msg_id.split(":")[0] if targets[0].provider_msg_id else ""
    assert query == {"username": ["908501234567"], "password": ["api-pass-1"],
                     "id": [campaign],
                     "dest": ["905321234500,905321234501,905321234502"]}
    assert verimor.requests["status"] == 1
    assert answer.error is None
    assert [answer.verdict(t.ref) for t in targets] == [
        PullVerdict.FINAL, PullVerdict.PENDING, PullVerdict.FINAL]
    by_ref = {r.ref: r for r in answer.reports}
    assert (by_ref["REF000"].state, by_ref["REF000"].final) == ("DELIVERED", True)
    assert (by_ref["REF001"].status, by_ref["REF001"].final) == ("WAITING", False)
    assert by_ref["REF002"].state == "FAILED"
    assert by_ref["REF002"].error_code == "27 EC_ABSENT_SUBSCRIBER"
    assert {r.provider_msg_id for r in answer.reports} == {t.provider_msg_id for t in targets}


def test_a_message_whose_answer_was_lost_is_asked_about_by_its_ref(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    _, wire = fake
    [target] = sent(wire, [message(ref="LOST-1", msisdn="+905321234509")])
    lost = replace(target, provider_msg_id=None)  # the send's answer never came back
    answer, query = ask(wire, [lost])
    assert query["custom_id"] == ["LOST-1"] and "id" not in query
    assert answer.verdict("LOST-1") is PullVerdict.FINAL
    [got] = answer.reports
    assert (got.ref, got.state) == ("LOST-1", "DELIVERED")
    assert got.provider_msg_id == target.provider_msg_id


def test_unknown_messages_and_campaigns_are_unknown_ids(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    [target] = sent(wire, batch(1))
    stranger = PullTarget("NOT-SENT", f"{target.provider_msg_id}".split(":")[0]
                          + ":905329999999", "+905329999999", 0)
    answer, _ = ask(wire, [target, stranger])
    assert answer.verdict(target.ref) is PullVerdict.FINAL
    assert answer.verdict("NOT-SENT") is PullVerdict.UNKNOWN_ID
    gone = PullTarget("GONE", "999999:905321234500", "+905321234500", 0)
    answer, _ = ask(wire, [gone])  # 404 "Bu idye sahip kampanya bulunamadı"
    assert answer.verdicts == {"GONE": PullVerdict.UNKNOWN_ID} and not answer.reports
    never = PullTarget("NEVER", None, "+905321234500", 0)
    assert ask(wire, [never])[0].verdict("NEVER") is PullVerdict.UNKNOWN_ID
    assert verimor.requests["status"] == 3


def test_targets_of_two_campaigns_ask_about_the_first_only(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    _, wire = fake
    first = sent(wire, batch(2, "Bir"))
    second = sent(wire, [replace(m, ref=m.ref + "b") for m in batch(2, "Iki")])
    answer, query = ask(wire, [*first, *second])
    assert query["id"] == [first[0].provider_msg_id.split(":")[0]
                           if first[0].provider_msg_id else ""]
    assert [answer.verdict(t.ref) for t in first] == [PullVerdict.FINAL, PullVerdict.PENDING]
    assert {answer.verdict(t.ref) for t in second} == {PullVerdict.ERROR}  # asked again


def test_a_status_not_in_the_guide_is_no_verdict_and_no_state(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    verimor.fates["905321234500"] = ("SOMETHING_NEW", "0")
    targets = sent(wire, batch(2))
    answer, _ = ask(wire, targets)
    assert answer.verdict("REF000") is PullVerdict.ERROR
    assert answer.verdict("REF001") is PullVerdict.PENDING  # WAITING: a report, not final
    assert [r.ref for r in answer.reports] == ["REF001"]


@pytest.mark.parametrize(("status", "body"), [
    (200, b"<html><body>Bad gateway</body></html>"),
    (200, b'[{"campaign_id": 20121, "status": "DELI'),
    (200, b'{"status": "DELIVERED"}'),
    (200, b"[1]"),
    (200, b""),
    (401, "Bu kampanya size ait değil".encode()),
    (429, b"Too Many Requests"),
    (500, b"oops"),
])
def test_an_unreadable_status_answer_is_no_verdict(status: int, body: bytes) -> None:
    wire = adapter()
    targets = [PullTarget("A", "20121:905321234500", "+905321234500", 0),
               PullTarget("B", "20121:905321234501", "+905321234501", 0)]
    stored = callback("https://sms.verimor.com.tr/v2/status", method="PULL", body=body,
                      headers={"content-type": "application/json"})
    answer = wire.read_status_answer(targets, status, stored)
    assert not answer.reports
    assert {answer.verdict(t.ref) for t in targets} == {PullVerdict.ERROR}


def test_wrong_credentials_are_no_verdict(fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    targets = sent(wire, batch(1))
    verimor.password = "changed"
    answer, _ = ask(wire, targets)
    assert answer.error and answer.verdict(targets[0].ref) is PullVerdict.ERROR


# -- the credit ---------------------------------------------------------------------------


def test_the_credit_is_read_from_the_balance_answer(
        fake: tuple[VerimorFake, VerimorAdapter]) -> None:
    verimor, wire = fake
    sent(wire, batch(3))  # three one-part messages: three credits
    request = wire.build_credit_request()
    assert request.method == "GET" and request.url.path == "/v2/balance"
    assert parse_qs(urlsplit(str(request.url)).query) == {
        "username": ["908501234567"], "password": ["api-pass-1"]}
    response = exchange(request)
    assert wire.read_credit(response.status_code, response.content,
                            response.headers["content-type"]) == 99_997.0 == verimor.credit
    verimor.ip_allowed = False
    refused = exchange(wire.build_credit_request())
    assert refused.status_code == 401
    assert wire.read_credit(refused.status_code, refused.content, "text/plain") is None


@pytest.mark.parametrize("body", [b"", b"<html>x</html>", b"12a", b"nan", b"inf", b"\xff"])
def test_an_unreadable_balance_is_no_figure(body: bytes) -> None:
    assert adapter().read_credit(200, body, "text/plain") is None


def test_a_balance_with_a_fraction_or_spaces_is_read() -> None:
    assert adapter().read_credit(200, b" 123\n", "text/plain") == 123.0
    assert adapter().read_credit(200, b"12.5", "text/plain") == 12.5


def test_a_message_waits_for_the_operator_then_is_final_and_pushed() -> None:
    verimor = VerimorFake(settle_s=0.5, push="none")
    with RunningFake(verimor) as running:
        wire = adapter(base_url=running.base_url)
        targets = sent(wire, batch(2))
        first, _ = ask(wire, targets)
        assert {first.verdict(t.ref) for t in targets} == {PullVerdict.PENDING}
        assert {r.status for r in first.reports} == {"WAITING"}

        def settled() -> PullAnswer | None:
            answer, _ = ask(wire, targets)
            return answer if answer.verdict(targets[0].ref) is PullVerdict.FINAL else None

        later = wait_for(settled, 10, message="the messages to settle")
        assert {later.verdict(t.ref) for t in targets} == {PullVerdict.FINAL}
        assert {r.state for r in later.reports} == {"DELIVERED"}
        assert not verimor.pushes  # push = "none": only asking finds it


def test_status_queries_past_the_guide_s_limit_are_429_and_no_verdict() -> None:
    verimor = VerimorFake(status_limit_per_min=2)
    with RunningFake(verimor) as running:
        wire = adapter(base_url=running.base_url)
        targets = sent(wire, batch(1))
        verdicts = [ask(wire, targets)[0].verdict(targets[0].ref) for _ in range(3)]
    assert verdicts == [PullVerdict.FINAL, PullVerdict.FINAL, PullVerdict.ERROR]
