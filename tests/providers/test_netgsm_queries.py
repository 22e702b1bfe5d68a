"""Netgsm: the report query, the balance and the inbound query field by field against a
fake Netgsm written from Netgsm's own client library (``netgsm/sms``), every report
state and query code the reference lists, broken answers, and the pushes it never
makes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from appliance.providers import AuthError, ReportParseError
from appliance.providers.batch import batch_wire_of
from appliance.providers.credit import credit_query_of
from appliance.providers.inbound_query import inbound_query_of
from appliance.providers.netgsm import NetgsmAdapter, parse_amount, turkey_time_ms
from appliance.providers.netgsm_codes import REPORT_QUERY_ERRORS, REPORT_STATES
from appliance.providers.status_query import PullAnswer, PullTarget, PullVerdict
from tests.providers.netgsm_support import (
    PASSWORD,
    USERCODE,
    Rig,
    batch,
    exchange,
    running_rig,
    stored,
)
from tests.providers.provider_test_support import NOW_MS, callback

TRT = timedelta(hours=3)


@pytest.fixture
def rig() -> Iterator[Rig]:
    yield from running_rig()


def sent_batch(rig: Rig, n: int, first: int = 0) -> list[PullTarget]:
    """``n`` messages sent in one task; the targets the puller would ask about."""
    wire = batch_wire_of(rig.adapter())
    assert wire is not None
    msgs = batch(n, first=first)
    outcomes = wire.interpret_batch_response(msgs, exchange(wire.build_batch_request(msgs)))
    return [PullTarget(m.ref, o.provider_msg_id, m.msisdn, NOW_MS)
            for m, o in zip(msgs, outcomes, strict=True)]


def ask(rig: Rig, targets: list[PullTarget]) -> tuple[httpx.Request, PullAnswer]:
    query = rig.adapter()
    request = query.build_status_request(targets)
    response = exchange(request)
    return request, query.read_status_answer(targets, response.status_code,
                                             stored(request, response))


# -- the report query ----------------------------------------------------------------------


def test_the_report_query_names_the_bulk_id_and_every_field_of_the_reference(
        rig: Rig) -> None:
    targets = sent_batch(rig, 1)
    [bulk] = rig.fake.tasks
    request, answer = ask(rig, targets)
    assert request.method == "GET"
    assert request.url.path == "/sms/report"
    assert dict(request.url.params) == {"usercode": USERCODE, "password": PASSWORD,
                                        "bulkid": str(bulk), "type": "0", "status": "100",
                                        "version": "2"}
    [one] = answer.reports
    assert answer.verdicts == {"REF000": PullVerdict.FINAL}
    assert (one.ref, one.provider_msg_id, one.status, one.state, one.final, one.error_code) \
        == ("REF000", f"{bulk}:905321234500", "1", "DELIVERED", True, None)
    made = rig.fake.tasks[bulk].made_at.replace(microsecond=0)
    assert one.reported_at_ms == int((made - TRT).replace(tzinfo=UTC).timestamp() * 1000)


def test_one_query_answers_for_every_message_of_a_task(rig: Rig) -> None:
    rig.fake.fates = {"905321234501": ("11", "106"), "905321234503": ("2", "111")}
    rig.fake.pending = {"905321234502"}
    targets = sent_batch(rig, 4)
    _, answer = ask(rig, targets)
    assert rig.fake.requests["report"] == 1
    assert answer.verdicts == {"REF000": PullVerdict.FINAL, "REF001": PullVerdict.FINAL,
                               "REF002": PullVerdict.PENDING, "REF003": PullVerdict.FINAL}
    by_ref = {r.ref: r for r in answer.reports}
    assert set(by_ref) == {"REF000", "REF001", "REF003"}  # pending: no report, no state
    assert (by_ref["REF001"].state, by_ref["REF001"].error_code) == (
        "REJECTED", "106 SMS refused, blacklist")
    assert (by_ref["REF003"].state, by_ref["REF003"].error_code) == ("EXPIRED", "111 timeout")


def test_a_query_asks_about_one_task_only(rig: Rig) -> None:
    first, second = sent_batch(rig, 2), sent_batch(rig, 2, first=2)
    query = rig.adapter()
    keys = {query.status_batch_key(t) for t in first} | {query.status_batch_key(t)
                                                          for t in second}
    assert keys == {str(b) for b in rig.fake.tasks}
    _, answer = ask(rig, [*first, *second])
    assert set(answer.verdicts) == {"REF000", "REF001"}  # the others: no verdict, asked again
    assert answer.verdict("REF002") is PullVerdict.ERROR


@pytest.mark.parametrize("state", sorted(REPORT_STATES))
def test_every_report_state_of_the_reference_is_mapped(rig: Rig, state: str) -> None:
    rig.fake.fates = {"905321234500": (state, "0")}
    _, answer = ask(rig, sent_batch(rig, 1))
    ours, meaning = REPORT_STATES[state]
    if ours == "ENROUTE":
        assert answer.verdicts == {"REF000": PullVerdict.PENDING} and not answer.reports
        return
    [one] = answer.reports
    assert (one.status, one.state, answer.verdicts["REF000"]) == (state, ours,
                                                                 PullVerdict.FINAL)
    if ours != "DELIVERED":
        assert one.error_code and meaning in one.error_code
    if state in ("16", "17"):
        assert (one.error_code or "").startswith("İYS")


def test_a_state_the_reference_does_not_list_is_no_state(rig: Rig) -> None:
    rig.fake.fates = {"905321234500": ("99", "0"), "905321234501": ("100", "0")}
    _, answer = ask(rig, sent_batch(rig, 3))
    assert answer.verdicts == {"REF000": PullVerdict.ERROR, "REF001": PullVerdict.ERROR,
                               "REF002": PullVerdict.FINAL}
    assert [r.ref for r in answer.reports] == ["REF002"]


def test_an_unknown_task_is_an_unknown_id_for_every_message_asked(rig: Rig) -> None:
    targets = [PullTarget("R1", "999:905321234500", "+905321234500", NOW_MS),
               PullTarget("R2", "999:905321234501", "+905321234501", NOW_MS)]
    _, answer = ask(rig, targets)
    assert answer.verdicts == {"R1": PullVerdict.UNKNOWN_ID, "R2": PullVerdict.UNKNOWN_ID}


def test_a_message_without_a_bulk_id_is_asked_alone_and_never_matched(rig: Rig) -> None:
    sent_batch(rig, 1)
    lost = PullTarget("LOST", None, "+905321234500", NOW_MS)
    request, answer = ask(rig, [lost])
    assert request.url.params["bulkid"] == "0"
    assert answer.verdicts == {"LOST": PullVerdict.UNKNOWN_ID} and not answer.reports


@pytest.mark.parametrize("code", sorted(REPORT_QUERY_ERRORS))
def test_every_report_query_code_of_the_reference(rig: Rig, code: str) -> None:
    targets = sent_batch(rig, 1)
    if code == "30":
        rig.fake.password = "changed"
    elif code == "80":
        for _ in range(10):
            ask(rig, targets)
    else:
        rig.fake.answer_next("report", code)
    _, answer = ask(rig, targets)
    if code == "60":
        assert answer.verdicts == {"REF000": PullVerdict.UNKNOWN_ID}
        return
    assert answer.error and f"netgsm report {code}" in answer.error
    assert answer.verdict("REF000") is PullVerdict.ERROR and not answer.reports


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (200, "100"),
        (200, "110"),
        (200, "<html><body>Hata</body></html>"),
        (200, "905321234500 1 30 1 05.12.2026"),  # cut in the middle of a line
        (200, "905321234500 1 30 1 05.12.2026 10:00:00 0<br>905321234501 1 30 1 05.12"),
        (200, "905321234500 x 30 1 05.12.2026 10:00:00 0"),
        (200, "\xff"),
        (500, "905321234500 1 30 1 05.12.2026 10:00:00 0"),
        (404, "<html>Not Found</html>"),
    ],
)
def test_a_broken_report_answer_is_an_error_for_every_message(
        rig: Rig, status: int, body: str) -> None:
    targets = sent_batch(rig, 2)
    rig.fake.answer_next("report", body, status=status)
    _, answer = ask(rig, targets)
    assert answer.error is not None and not answer.reports
    assert {answer.verdict(t.ref) for t in targets} == {PullVerdict.ERROR}


def test_the_lines_with_the_bulk_id_first_are_read_too(rig: Rig) -> None:
    """``tarfin-labs/netgsm`` reads a report line with the bulk id first."""
    targets = sent_batch(rig, 2)
    [bulk] = rig.fake.tasks
    rig.fake.answer_next("report", f"{bulk} 905321234500 1 30 1 05.12.2026 10:00:00 0<br>"
                                   f"77 905321234501 1 30 1 05.12.2026 10:00:00 0<br>"
                                   f"{bulk} 905321234501 3 30 1 05.12.2026 10:00:05 105<br>")
    _, answer = ask(rig, targets)
    assert [(r.ref, r.state) for r in answer.reports] == [("REF000", "DELIVERED"),
                                                          ("REF001", "REJECTED")]
    assert answer.reports[1].error_code == "105 wrong number"
    assert answer.reports[0].reported_at_ms == turkey_time_ms("05.12.2026", "10:00:00")


# -- the balance ---------------------------------------------------------------------------


def test_the_balance_query_and_its_answer(rig: Rig) -> None:
    query = credit_query_of(rig.adapter())
    assert query is not None
    request = query.build_credit_request()
    assert (request.method, request.url.path) == ("POST", "/balance/list/xml")
    body = request.read().decode()
    assert f"<usercode>{USERCODE}</usercode><password>{PASSWORD}</password>" in body
    assert "<stip>2</stip>" in body
    response = exchange(request)
    assert response.text == "00 1000,00"
    assert query.read_credit(response.status_code, response.content, "text/plain") == 1000.0
    sent_batch(rig, 2)
    response = exchange(query.build_credit_request())
    assert query.read_credit(200, response.content, "text/plain") == pytest.approx(999.9)


@pytest.mark.parametrize(("status", "body"), [(200, "30"), (200, "70"), (200, "<html>"),
                                              (200, "00"), (200, "00 abc"), (200, "00 nan"),
                                              (500, "00 12,5"), (200, "")])
def test_a_balance_that_cannot_be_read_is_none(rig: Rig, status: int, body: str) -> None:
    query = rig.adapter()
    rig.fake.answer_next("balance", body, status=status)
    response = exchange(query.build_credit_request())
    assert query.read_credit(response.status_code, response.content, "text/plain") is None


def test_amounts_as_netgsm_writes_them() -> None:
    assert parse_amount("2,7") == 2.7
    assert parse_amount("1.234,56") == 1234.56
    assert parse_amount("12.5") == 12.5
    for bad in ("inf", "", "1,2,3"):
        with pytest.raises(ValueError):
            parse_amount(bad)


def test_the_balance_refuses_the_wrong_credentials(rig: Rig) -> None:
    query = rig.adapter(password="wrong")
    response = exchange(query.build_credit_request())
    assert response.text == "30"
    assert query.read_credit(200, response.content, "text/plain") is None


# -- inbound by asking ---------------------------------------------------------------------


def test_inbound_messages_are_asked_for_over_a_window(rig: Rig) -> None:
    query = inbound_query_of(rig.adapter())
    assert query is not None
    at = datetime(2026, 12, 5, 9, 43, 51)  # Türkiye's clock
    rig.fake.receive("5321234567", "RET ACME", at)
    rig.fake.receive("905329876543", "Merhaba | yarın?", at + timedelta(minutes=1))
    since = int((at - TRT - timedelta(minutes=5)).replace(tzinfo=UTC).timestamp() * 1000)
    until = since + 3_600_000
    request = query.build_inbound_request(since, until)
    body = request.read().decode()
    assert (request.method, request.url.path) == ("POST", "/sms/receive")
    assert "<startdate>05122026093800</startdate>" not in body  # minutes, not seconds
    assert "<startdate>051220260938</startdate><stopdate>051220261038</stopdate>" in body
    assert f"<usercode>{USERCODE}</usercode>" in body and "<type>0</type>" in body
    response = exchange(request)
    answer = query.read_inbound_answer(response.status_code, stored(request, response))
    assert answer.error is None
    assert [(m.msisdn, m.text) for m in answer.messages] == [
        ("+905321234567", "RET ACME"), ("+905329876543", "Merhaba | yarın?")]
    assert answer.messages[0].sent_at_ms == turkey_time_ms("05.12.2026", "09:43:51")
    again = exchange(query.build_inbound_request(since, until))
    second = query.read_inbound_answer(200, stored(request, again))
    assert [m.provider_msg_id for m in second.messages] == [
        m.provider_msg_id for m in answer.messages]
    assert len({m.provider_msg_id for m in answer.messages}) == 2


@pytest.mark.parametrize(("body", "error"), [("40", None), ("30", "30"), ("50", "50"),
                                             ("60", "60"), ("70", "70"), ("99", "99"),
                                             ("<html>x</html>", "unreadable"),
                                             ("5321234567|cut off", "unreadable")])
def test_every_inbound_query_code_of_the_reference(rig: Rig, body: str,
                                                   error: str | None) -> None:
    query = rig.adapter()
    rig.fake.answer_next("receive", body)
    request = query.build_inbound_request(NOW_MS, NOW_MS + 60_000)
    answer = query.read_inbound_answer(200, stored(request, exchange(request)))
    assert answer.messages == ()
    if error is None:
        assert answer.error is None
    else:
        assert answer.error and error in answer.error


def test_the_fake_answers_40_when_there_is_nothing(rig: Rig) -> None:
    query = rig.adapter()
    request = query.build_inbound_request(NOW_MS, NOW_MS + 60_000)
    response = exchange(request)
    assert response.text == "40"
    assert query.read_inbound_answer(200, stored(request, response)).error is None
    assert query.read_inbound_answer(503, stored(request, response)).error


# -- pushes: Netgsm makes none, and signs nothing ------------------------------------------


def test_a_push_is_proven_by_the_token_and_yields_no_report() -> None:
    from tests.providers.netgsm_support import adapter

    guarded: NetgsmAdapter = adapter(callback_token="tok-1")
    url = "https://sms.example.org/callbacks/ng"
    for query in ("", "?token=wrong", "?token=tok-1&token=tok-1"):
        with pytest.raises(AuthError):
            guarded.verify(callback(url + query))
    guarded.verify(callback(url + "?token=tok-1"))
    adapter().verify(callback(url))  # no token configured: taken as it comes
    with pytest.raises(ReportParseError, match="pushes no delivery reports"):
        guarded.parse_reports(callback(url + "?token=tok-1", body=b"anything"))


def test_a_number_listed_twice_in_one_task_is_never_guessed(rig: Rig) -> None:
    """Two lines for one number (or two messages to it in one task) cannot say which line
    is which message: an ``error``, and no report, rather than a guess."""
    targets = sent_batch(rig, 2)
    [bulk] = rig.fake.tasks
    rig.fake.answer_next("report", "905321234500 1 30 1 05.12.2026 10:00:00 0<br>"
                                   "905321234500 0 30 1 05.12.2026 10:00:00 0<br>"
                                   "905321234501 1 30 1 05.12.2026 10:00:00 0")
    _, answer = ask(rig, targets)
    assert answer.verdicts == {"REF000": PullVerdict.ERROR, "REF001": PullVerdict.FINAL}
    assert [r.ref for r in answer.reports] == ["REF001"]
    twice = [*targets, PullTarget("REF009", f"{bulk}:905321234501", "+905321234501", NOW_MS)]
    _, answer = ask(rig, twice)
    assert answer.verdict("REF001") is answer.verdict("REF009") is PullVerdict.ERROR


def test_reports_can_be_asked_for_up_to_three_months() -> None:
    from tests.providers.netgsm_support import adapter

    assert adapter().answers_within_s == 90 * 86400.0
