"""Netgsm's readers on anything at all: none raises, and nothing but a code of the
reference ever makes a final state (DLR-8)."""

from __future__ import annotations

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.providers import CallbackRequest, SubmitResult
from appliance.providers.netgsm_codes import REPORT_STATES, SEND_CODES, SendVerdict
from appliance.providers.status_query import PullTarget, PullVerdict
from tests.providers.netgsm_support import adapter, batch
from tests.providers.provider_test_support import NOW_MS, message

NETGSM = adapter()
REQUEST = NETGSM.build_request(message())
FINAL_CODES = {c for c, k in SEND_CODES.items()
               if k.verdict in (SendVerdict.REJECTED, SendVerdict.IYS, SendVerdict.DUPLICATE)}
TARGETS = [PullTarget(f"R{i}", f"1311:90532123450{i}", f"+90532123450{i}", NOW_MS)
           for i in range(3)]

answers = st.one_of(
    st.binary(max_size=300),
    st.text(max_size=120).map(str.encode),
    st.builds(lambda code, tail: f"{code}{tail}".encode(),
              st.sampled_from([*SEND_CODES, "0", "000", "99", "1000"]),
              st.sampled_from(["", " ", " 1311", " 1311 9", " x", "\n", "<br>"])),
)


def raw(body: bytes) -> CallbackRequest:
    return CallbackRequest(method="PULL", url="https://api.netgsm.com.tr/sms/report",
                           query="", headers={}, body=body)


@settings(max_examples=400, deadline=None)
@given(status=st.sampled_from([200, 200, 200, 400, 404, 429, 500, 503, 504]), body=answers)
def test_a_send_answer_is_never_a_made_up_refusal(status: int, body: bytes) -> None:
    outcome = NETGSM.interpret_response(httpx.Response(status, content=body, request=REQUEST))
    if outcome.result is SubmitResult.REJECTED:
        assert status == 200 and body.split()[0].decode() in FINAL_CODES, body
    msgs = batch(3)
    outcomes = NETGSM.interpret_batch_response(
        msgs, httpx.Response(status, content=body, request=NETGSM.build_batch_request(msgs)))
    assert len(outcomes) == 3
    if outcomes[0].result is SubmitResult.REJECTED:
        assert status == 200 and body.split()[0].decode() in FINAL_CODES - {"85"}, body


lines = st.lists(st.builds(
    lambda n, state, err: f"90532123450{n} {state} 30 1 05.12.2026 10:00:00 {err}",
    st.integers(0, 4), st.sampled_from([*REPORT_STATES, "5", "99", "100", "x"]),
    st.sampled_from(["0", "102", "999"])), max_size=6)


@settings(max_examples=300, deadline=None)
@given(body=st.one_of(answers, lines.map(lambda ls: "<br>".join(ls).encode())),
       status=st.sampled_from([200, 200, 500]))
def test_a_report_answer_never_raises_and_closes_only_on_a_documented_state(
        body: bytes, status: int) -> None:
    answer = NETGSM.read_status_answer(TARGETS, status, raw(body))
    for one in answer.reports:
        assert one.status in REPORT_STATES and answer.verdict(one.ref or "") in (
            PullVerdict.FINAL,)
    assert set(answer.verdicts) <= {t.ref for t in TARGETS}


@settings(max_examples=300, deadline=None)
@given(body=answers, status=st.sampled_from([200, 200, 500]))
def test_the_balance_and_inbound_readers_never_raise(body: bytes, status: int) -> None:
    credit = NETGSM.read_credit(status, body, "text/plain")
    if credit is not None:
        assert body.split()[0] == b"00"
    inbound = NETGSM.read_inbound_answer(status, raw(body))
    assert inbound.error is not None or all(m.provider_msg_id for m in inbound.messages)
