"""The ``iletimerkezi`` kind's reports, asked for (``get-report``) and pushed (the panel's
webhook), and its credit (``get-balance``): against the fake written from İletimerkezi's
documentation, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from starlette.responses import Response

from appliance.providers import AuthError, ReportParseError
from appliance.providers.status_query import PullVerdict, status_query_of
from appliance.simulator.iletimerkezi_fake import Account, FakeServer, IletimerkeziFake
from tests.providers.iletimerkezi_support import (
    HASH,
    KEY,
    adapter,
    ask,
    carry,
    fake_state,
    last_body,
    msg,
    script,
    send_many,
    set_status,
    target,
)
from tests.providers.provider_test_support import FakeProvider, Received, callback


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    with FakeServer() as server:
        yield server


def sent_order(fake: FakeServer, count: int = 3) -> tuple[str, list[str]]:
    """An order of ``count`` numbers taken by the fake: its id and the provider ids."""
    outcomes = send_many(adapter(fake.base_url), [msg(n) for n in range(1, count + 1)])
    ids = [o.provider_msg_id or "" for o in outcomes]
    return ids[0].split(":")[0], ids


# -- asked for ------------------------------------------------------------------------------

def test_the_report_request_field_by_field(fake: FakeServer) -> None:
    order_id, ids = sent_order(fake)
    wire = adapter(fake.base_url)
    assert status_query_of(wire) is wire and wire.status_batch_max == 1000
    ask(wire, [target(msg(n), ids[n - 1]) for n in (1, 2, 3)])
    assert fake_state(fake)["received"][-1]["endpoint"] == "get-report"
    assert last_body(fake) == {"request": {
        "authentication": {"key": KEY, "hash": HASH},
        "order": {"id": order_id, "page": 1, "rowCount": 1000}}}


def test_each_number_of_the_order_gets_its_own_answer(fake: FakeServer) -> None:
    order_id, ids = sent_order(fake, 4)
    set_status(fake, order_id, "5321234501", 111)
    set_status(fake, order_id, "5321234502", 112)
    wire = adapter(fake.base_url)
    answer = ask(wire, [target(msg(n), ids[n - 1]) for n in (1, 2, 3, 4)])
    assert answer.error is None
    assert [answer.verdict(f"REF{n:04d}") for n in (1, 2, 3, 4)] == [
        PullVerdict.FINAL, PullVerdict.FINAL, PullVerdict.PENDING, PullVerdict.PENDING]
    delivered, failed = answer.reports
    assert (delivered.ref, delivered.provider_msg_id, delivered.status, delivered.state,
            delivered.final) == (None, ids[0], "delivered", "DELIVERED", True)
    assert (failed.provider_msg_id, failed.status, failed.state) == (
        ids[1], "undelivered", "FAILED")
    assert delivered.reported_at_ms == 0  # İletimerkezi gives no time


def test_an_order_the_provider_does_not_know_is_an_unknown_id(fake: FakeServer) -> None:
    answer = ask(adapter(fake.base_url), [target(msg(1), "999:905321234501"),
                                          target(msg(2), "999:905321234502")])
    assert answer.error is None and answer.reports == ()
    assert {answer.verdict("REF0001"), answer.verdict("REF0002")} == {PullVerdict.UNKNOWN_ID}


def test_a_number_the_order_does_not_hold_is_an_unknown_id(fake: FakeServer) -> None:
    order_id, _ = sent_order(fake, 2)
    answer = ask(adapter(fake.base_url), [target(msg(9), f"{order_id}:905321234509")])
    assert answer.verdict("REF0009") is PullVerdict.UNKNOWN_ID


def test_an_order_not_yet_due_is_pending(fake: FakeServer) -> None:
    script(fake, "get-report", {"code": 456})
    answer = ask(adapter(fake.base_url), [target(msg(1), "5:905321234501")])
    assert answer.verdict("REF0001") is PullVerdict.PENDING and answer.reports == ()


@pytest.mark.parametrize("answer", [
    {"code": 401}, {"code": 400}, {"code": 404}, {"code": 503}, {"code": 499},
    {"http": 502, "body": "<html>bad gateway</html>"},
    {"http": 200, "body": "<html>hello</html>"},
    {"http": 200, "body": '{"response": {"status": {"code": 200}, "order": {"id": 5}}}',
     "content_type": "application/json"},
    {"http": 200, "content_type": "application/json",
     "body": '{"response": {"status": {"code": 200}, "order": {"id": 5, "mes'},
])
def test_an_answer_that_says_nothing_readable_is_an_error_never_a_state(
        fake: FakeServer, answer: dict[str, object]) -> None:
    _, ids = sent_order(fake, 2)
    script(fake, "get-report", answer)
    got = ask(adapter(fake.base_url), [target(msg(1), ids[0]), target(msg(2), ids[1])])
    assert got.error is not None and got.reports == ()
    assert {got.verdict("REF0001"), got.verdict("REF0002")} == {PullVerdict.ERROR}


def test_a_status_the_documentation_does_not_list_is_an_error_for_that_message(
        fake: FakeServer) -> None:
    body = {"response": {"status": {"code": 200, "message": "ok"}, "order": {
        "id": 5, "status": 113, "message": [{"number": 5321234501, "status": 119},
                                            {"number": "5321234502", "status": "111"}]}}}
    script(fake, "get-report", {"http": 200, "body": json.dumps(body),
                                "content_type": "application/json"})
    got = ask(adapter(fake.base_url), [target(msg(1), "5:905321234501"),
                                       target(msg(2), "5:905321234502")])
    assert got.verdict("REF0001") is PullVerdict.ERROR
    assert got.verdict("REF0002") is PullVerdict.FINAL
    assert [r.provider_msg_id for r in got.reports] == ["5:905321234502"]


def test_one_request_asks_about_one_order_the_others_are_asked_again(
        fake: FakeServer) -> None:
    first, ids = sent_order(fake, 2)
    wire = adapter(fake.base_url)
    other = send_many(wire, [msg(n, body="another text") for n in (1, 2)])
    second = (other[0].provider_msg_id or "").split(":")[0]
    set_status(fake, first, "5321234501", 111)
    set_status(fake, second, "5321234501", 112)
    mixed = [target(msg(1), ids[0]), target(msg(2), other[0].provider_msg_id)]
    assert [wire.status_batch_key(t) for t in mixed] == [first, second]
    answer = ask(wire, mixed)
    assert last_body(fake)["request"]["order"]["id"] == first
    assert answer.verdict("REF0001") is PullVerdict.FINAL
    assert answer.verdict("REF0002") is PullVerdict.ERROR  # not asked: asked again
    assert [r.provider_msg_id for r in answer.reports] == [ids[0]]
    with pytest.raises(ValueError, match="without an İletimerkezi order id"):
        wire.build_status_request([target(msg(1), None)])


# -- pushed ---------------------------------------------------------------------------------

def push(body: object) -> bytes:
    return json.dumps(body).encode()


SAMPLE = {"report": {"id": 1599558518, "packet_id": 104525848, "status": "delivered",
                     "to": "+905057021234", "body": "Webhook test message"}}


@pytest.mark.parametrize(("word", "state", "final"), [
    ("accepted", "ACCEPTED", False), ("delivered", "DELIVERED", True),
    ("undelivered", "FAILED", True), ("queued", "ENROUTE", False)])
def test_a_pushed_report_is_read_by_its_order_and_number(word: str, state: str,
                                                         final: bool) -> None:
    wire = adapter(callback_token="t0ken")
    body = {"report": {**SAMPLE["report"], "status": word}}
    req = callback("https://sms.example.org/callbacks/im?token=t0ken", body=push(body),
                   headers={"content-type": "application/json"})
    wire.verify(req)
    [rep] = wire.parse_reports(req)
    assert (rep.ref, rep.provider_msg_id, rep.status, rep.state, rep.final) == (
        None, "104525848:905057021234", word, state, final)


def test_a_push_without_the_token_is_refused() -> None:
    wire = adapter(callback_token="t0ken")
    for url in ("https://sms.example.org/callbacks/im",
                "https://sms.example.org/callbacks/im?token=other",
                "https://sms.example.org/callbacks/im?token=t0ken&token=t0ken"):
        with pytest.raises(AuthError):
            wire.verify(callback(url, body=push(SAMPLE)))
    adapter().verify(callback("https://sms.example.org/callbacks/im", body=push(SAMPLE)))


@pytest.mark.parametrize("body", [
    b"<html></html>", b'{"report": ', b"[]", b'{"report": []}',
    b'{"report": {"packet_id": 1, "status": "delivered"}}',
    b'{"report": {"packet_id": 1, "to": "+905321234501"}}',
    b'{"report": {"to": "+905321234501", "status": "delivered"}}'])
def test_an_unreadable_push_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(ReportParseError):
        adapter().parse_reports(callback("https://sms.example.org/callbacks/im", body=body))


def test_a_pushed_and_a_pulled_report_of_one_message_are_one_fact(fake: FakeServer) -> None:
    order_id, ids = sent_order(fake, 1)
    set_status(fake, order_id, "5321234501", 111)
    [pulled] = ask(adapter(fake.base_url), [target(msg(1), ids[0])]).reports
    body = {"report": {"id": 1, "packet_id": int(order_id), "status": "delivered",
                       "to": "+905321234501", "body": "Kodunuz 1234"}}
    [pushed] = adapter().parse_reports(callback("https://x/callbacks/im", body=push(body)))
    assert pushed == pulled


def test_the_fake_pushes_its_webhook_as_documented() -> None:
    def ok(got: Received) -> Response:
        return Response(status_code=200)

    with FakeProvider(ok) as receiver, FakeServer(IletimerkeziFake(Account(
            webhook_url=f"{receiver.base_url}/callbacks/im?token=t0ken"))) as fake:
        order_id, ids = sent_order(fake, 1)
        assert set_status(fake, order_id, "5321234501", 112)["pushed"] == 200
    [got] = receiver.received
    wire = adapter(callback_token="t0ken")
    req = callback(f"https://x{got.path}?{got.query}", body=got.body, headers=got.headers)
    wire.verify(req)
    [rep] = wire.parse_reports(req)
    assert (rep.provider_msg_id, rep.state) == (ids[0], "FAILED")


# -- credit ---------------------------------------------------------------------------------

def test_the_balance_request_and_its_two_figures() -> None:
    with FakeServer(IletimerkeziFake(Account(sms=18343, amount="12.50"))) as fake:
        wire = adapter(fake.base_url)
        response = carry(wire.build_credit_request())
        assert last_body(fake) == {"request": {"authentication": {"key": KEY,
                                                                  "hash": HASH}}}
        assert fake_state(fake)["received"][-1]["endpoint"] == "get-balance"
        assert wire.read_credit(response.status_code, response.content, "") == 18343.0
        amount = adapter(fake.base_url, credit="amount")
        assert amount.read_credit(response.status_code, response.content, "") == 12.5
        for answer in ({"code": 401}, {"http": 200, "body": "<html></html>"},
                       {"http": 502, "body": "bad gateway"}):
            script(fake, "get-balance", answer)
            response = carry(wire.build_credit_request())
            assert wire.read_credit(response.status_code, response.content, "") is None
