"""Infobip SMS v2 adapter: advanced send, answers, shared-secret callbacks, batched reports."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from starlette.responses import JSONResponse, Response

from appliance.config import ProviderSettings
from appliance.providers import (
    AuthError,
    CallbackRequest,
    ReportParseError,
    SubmitResult,
)
from appliance.providers.infobip import InfobipAdapter
from tests.providers.provider_test_support import (
    FakeProvider,
    Received,
    adapter_of,
    callback,
    changed,
    message,
    send,
)

CB = "https://sms.example.org/callbacks/ib"
JSON = {"content-type": "application/json"}
DONE_AT_MS = 1_573_315_200_000  # 2019-11-09T16:00:00Z


def settings(**changes: object) -> ProviderSettings:
    base = ProviderSettings(
        name="ib",
        kind="infobip",
        base_url="https://xyz123.api.infobip.com",
        sender="InfoSMS",
        api_key="003026bbc133714df1834b8638bb496e-8f4b3d9a",
        secret="cb-secret-42",
    )
    return changed(base, **changes)


def adapter(**changes: object) -> InfobipAdapter:
    return adapter_of(InfobipAdapter, settings(**changes))


def result(**changes: Any) -> dict[str, Any]:
    """One entry of a delivery report, as in Infobip's documentation example."""
    out: dict[str, Any] = {
        "bulkId": "BULK-ID-123-xyz",
        "price": {"pricePerMessage": 0.01, "currency": "EUR"},
        "status": {
            "id": 5,
            "groupId": 3,
            "groupName": "DELIVERED",
            "name": "DELIVERED_TO_HANDSET",
            "description": "Message delivered to handset",
        },
        "error": {
            "id": 0,
            "name": "NO_ERROR",
            "description": "No Error",
            "groupId": 0,
            "groupName": "OK",
            "permanent": False,
        },
        "messageId": "01HF3Z9K2M8Q4R6T7V",
        "doneAt": "2019-11-09T16:00:00.000+0000",
        "smsCount": 1,
        "sentAt": "2019-11-09T15:59:58.000+0000",
        "to": "905321234567",
        "callbackData": "01HF3Z9K2M8Q4R6T7V",
    }
    out.update(changes)
    return out


def status(group: str, name: str, gid: int = 1, sid: int = 1) -> dict[str, Any]:
    return {"groupId": gid, "groupName": group, "id": sid, "name": name, "description": "x"}


def reports_request(*results: dict[str, Any], secret: str = "cb-secret-42") -> CallbackRequest:
    body = json.dumps({"results": list(results)}).encode()
    return callback(f"{CB}?secret={secret}", body=body, headers=JSON)


# -- build_request ---------------------------------------------------------------------


def test_build_request_is_the_documented_advanced_send() -> None:
    req = adapter().build_request(message(callback_url=CB))
    assert req.method == "POST"
    assert str(req.url) == "https://xyz123.api.infobip.com/sms/2/text/advanced"
    assert req.headers["authorization"] == "App 003026bbc133714df1834b8638bb496e-8f4b3d9a"
    assert req.headers["content-type"] == "application/json"
    assert json.loads(req.content) == {
        "messages": [
            {
                "destinations": [{"to": "905321234567", "messageId": "01HF3Z9K2M8Q4R6T7V"}],
                "from": "InfoSMS",
                "text": "Your code is 1234",
                "notifyUrl": f"{CB}?secret=cb-secret-42",
                "notifyContentType": "application/json",
                "callbackData": "01HF3Z9K2M8Q4R6T7V",
            }
        ]
    }


def test_options_change_the_request() -> None:
    a = adapter(
        options={"secret_in_notify_url": False, "intermediate_reports": True}, secret="a b&c"
    )
    msg = json.loads(a.build_request(message(callback_url=CB)).content)["messages"][0]
    assert msg["notifyUrl"] == CB
    assert msg["intermediateReport"] is True
    b = adapter(secret="a b&c")
    msg = json.loads(b.build_request(message(callback_url=f"{CB}?x=1")).content)["messages"][0]
    assert msg["notifyUrl"] == f"{CB}?x=1&secret=a%20b%26c"


# -- interpret_response ----------------------------------------------------------------


def answer(
    code: int,
    body: object = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.Response(code, content=content, headers=headers)


def sent(group: str, name: str) -> dict[str, Any]:
    return {
        "bulkId": "2034072219640523072",
        "messages": [
            {"to": "905321234567", "status": status(group, name), "messageId": "01HF3Z9K2M8Q4R6T7V"}
        ],
    }


@pytest.mark.parametrize(
    ("group", "name"),
    [("PENDING", "PENDING_ACCEPTED"), ("PENDING", "PENDING_ENROUTE"), ("ACCEPTED", "ACCEPTED")],
)
def test_taken_messages_are_accepted(group: str, name: str) -> None:
    out = adapter().interpret_response(answer(200, sent(group, name)))
    assert (out.result, out.provider_msg_id) == (SubmitResult.ACCEPTED, "01HF3Z9K2M8Q4R6T7V")


def test_rejections() -> None:
    out = adapter().interpret_response(answer(200, sent("REJECTED", "REJECTED_DESTINATION")))
    assert out.result is SubmitResult.REJECTED
    assert out.error == "infobip REJECTED REJECTED_DESTINATION"
    credits = adapter().interpret_response(
        answer(200, sent("REJECTED", "REJECTED_NOT_ENOUGH_CREDITS"))
    )
    assert credits.result is SubmitResult.RETRY
    bad = {
        "requestError": {"serviceException": {"messageId": "BAD_REQUEST", "text": "Bad request"}}
    }
    out = adapter().interpret_response(answer(400, bad))
    assert out.result is SubmitResult.REJECTED
    assert out.error is not None and "BAD_REQUEST Bad request" in out.error
    unauthorized = {
        "requestError": {
            "serviceException": {"messageId": "UNAUTHORIZED", "text": "Invalid login details"}
        }
    }
    assert adapter().interpret_response(answer(401, unauthorized)).result is (SubmitResult.REJECTED)


def test_throttling_and_server_errors() -> None:
    too_many = {
        "requestError": {
            "serviceException": {"messageId": "TOO_MANY_REQUESTS", "text": "Too many requests"}
        }
    }
    out = adapter().interpret_response(answer(429, too_many, headers={"Retry-After": "10"}))
    assert (out.result, out.retry_after_s) == (SubmitResult.RETRY, 10.0)
    out = adapter().interpret_response(
        answer(429, too_many, headers={"Retry-After": "Tue, 14 Nov 2023 22:13:25 GMT"})
    )
    assert (out.result, out.retry_after_s) == (SubmitResult.RETRY, 5.0)
    assert adapter().interpret_response(answer(500, raw=b"")).result is SubmitResult.RETRY


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"OK",
        b"{}",
        b'{"messages": []}',
        b'{"messages": [{"status": "PENDING"}]}',
        b'{"messages": [{"status": {"groupName": 1}}]}',
        b'{"messages": [{"status": {"groupName": "WHAT"}}]}',
    ],
)
def test_unreadable_2xx_is_uncertain(raw: bytes) -> None:
    assert adapter().interpret_response(answer(200, raw=raw)).result is SubmitResult.UNCERTAIN


# -- verify ----------------------------------------------------------------------------


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}", **JSON}


def test_secret_in_the_query() -> None:
    a = adapter()
    a.verify(reports_request(result()))
    for bad in ("cb-secret-41", "", "CB-SECRET-42"):
        with pytest.raises(AuthError):
            a.verify(reports_request(result(), secret=bad))
    with pytest.raises(AuthError):
        a.verify(callback(CB, body=b"{}", headers=JSON))
    with pytest.raises(AuthError):
        a.verify(callback(f"{CB}?secret=cb-secret-42&secret=x", body=b"{}", headers=JSON))


def test_http_basic_password() -> None:
    a = adapter()
    a.verify(callback(CB, body=b"{}", headers=basic("infobip", "cb-secret-42")))
    with pytest.raises(AuthError):
        a.verify(callback(CB, body=b"{}", headers=basic("infobip", "wrong")))
    with pytest.raises(AuthError):
        a.verify(callback(CB, body=b"{}", headers={"Authorization": "Basic !!!notbase64"}))
    pinned = adapter(options={"basic_user": "infobip"})
    pinned.verify(callback(CB, body=b"{}", headers=basic("infobip", "cb-secret-42")))
    with pytest.raises(AuthError):
        pinned.verify(callback(CB, body=b"{}", headers=basic("mallory", "cb-secret-42")))


# -- parse_reports ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "name", "state", "final"),
    [
        ("DELIVERED", "DELIVERED_TO_HANDSET", "DELIVERED", True),
        ("DELIVERED", "DELIVERED_TO_OPERATOR", "ACCEPTED", False),
        ("PENDING", "PENDING_WAITING_DELIVERY", "ENROUTE", False),
        ("PENDING", "PENDING_ENROUTE", "ENROUTE", False),
        ("PENDING", "PENDING_ACCEPTED", "ACCEPTED", False),
        ("UNDELIVERABLE", "UNDELIVERABLE_NOT_DELIVERED", "FAILED", True),
        ("UNDELIVERABLE", "UNDELIVERABLE_REJECTED_OPERATOR", "FAILED", True),
        ("EXPIRED", "EXPIRED_EXPIRED", "EXPIRED", True),
        ("REJECTED", "REJECTED_NETWORK", "REJECTED", True),
        ("REJECTED", "REJECTED_DESTINATION", "REJECTED", True),
        ("SOMETHING_NEW", "SOMETHING_NEW_HAPPENED", "ENROUTE", False),
    ],
)
def test_every_status_group(group: str, name: str, state: str, final: bool) -> None:
    [rep] = adapter().parse_reports(reports_request(result(status=status(group, name))))
    assert (rep.status, rep.state, rep.final) == (name, state, final)
    assert rep.ref == "01HF3Z9K2M8Q4R6T7V"
    assert rep.provider_msg_id == "01HF3Z9K2M8Q4R6T7V"
    assert rep.reported_at_ms == DONE_AT_MS
    assert rep.error_code is None


def test_operator_delivery_can_be_made_final() -> None:
    a = adapter(options={"operator_delivery_final": True})
    req = reports_request(result(status=status("DELIVERED", "DELIVERED_TO_OPERATOR")))
    [rep] = a.parse_reports(req)
    assert (rep.state, rep.final) == ("DELIVERED", True)


def test_batched_results_keep_their_order() -> None:
    batch = [
        result(
            messageId=f"REF{i}", callbackData=f"REF{i}", doneAt=f"2019-11-09T16:00:0{i}.000+0000"
        )
        for i in range(5)
    ]
    batch[3] = {
        **batch[3],
        "status": status("UNDELIVERABLE", "UNDELIVERABLE_NOT_DELIVERED"),
        "error": {
            "id": 1,
            "name": "EC_UNKNOWN_SUBSCRIBER",
            "groupId": 1,
            "groupName": "HANDSET_ERRORS",
            "permanent": True,
        },
    }
    reps = adapter().parse_reports(reports_request(*batch))
    assert [r.ref for r in reps] == [f"REF{i}" for i in range(5)]
    assert [r.reported_at_ms for r in reps] == [DONE_AT_MS + i * 1000 for i in range(5)]
    assert reps[3].state == "FAILED" and reps[3].error_code == "EC_UNKNOWN_SUBSCRIBER"
    assert adapter().parse_reports(reports_request()) == []


def test_report_times() -> None:
    a = adapter()
    cases = {
        "2019-11-09T16:00:00.000+0000": DONE_AT_MS,
        "2019-11-09T19:00:00.000+0300": DONE_AT_MS,
        "2019-11-09T16:00:00Z": DONE_AT_MS,
        "2019-11-09T16:00:00.123+00:00": DONE_AT_MS + 123,
    }
    for text, ms in cases.items():
        assert a.parse_reports(reports_request(result(doneAt=text)))[0].reported_at_ms == ms
    fallback = result(doneAt="yesterday")
    assert a.parse_reports(reports_request(fallback))[0].reported_at_ms == DONE_AT_MS - 2000
    neither = {k: v for k, v in result().items() if k not in ("doneAt", "sentAt")}
    assert a.parse_reports(reports_request(neither))[0].reported_at_ms == 0


def test_ref_falls_back_to_message_id_and_extra_fields_are_fine() -> None:
    item = {k: v for k, v in result(newField={"a": [1]}).items() if k != "callbackData"}
    [rep] = adapter().parse_reports(reports_request(item))
    assert rep.ref == "01HF3Z9K2M8Q4R6T7V"


@pytest.mark.parametrize(
    "body",
    [
        b'{"results": [{"messageId": "A", "status": {"groupName": "DELIVERED"}',  # truncated
        b'{"results": {"messageId": "A"}}',
        b'[{"messageId": "A"}]',
        b'{"results": ["A"]}',
        b'{"results": [{"messageId": "A", "status": "DELIVERED"}]}',
        b'{"results": [{"messageId": "A", "status": {"name": "DELIVERED_TO_HANDSET"}}]}',
        b'{"results": [{"messageId": 5, "status": {"groupName": "DELIVERED"}}]}',
        b'{"results": [{"status": {"groupName": "DELIVERED"}}]}',
        b'{"results": [{"messageId": "A", "status": {"groupName": ["DELIVERED"]}}]}',
        b'{"results": [{"messageId": "A", "callbackData": {}, "status": {"groupName": "X"}}]}',
        b"\x80\x81\x82",
        b"",
    ],
)
def test_unreadable_reports(body: bytes) -> None:
    with pytest.raises(ReportParseError):
        adapter().parse_reports(callback(f"{CB}?secret=cb-secret-42", body=body, headers=JSON))


def test_one_bad_result_spoils_the_batch_rather_than_vanishing() -> None:
    req = reports_request(result(), {"messageId": 7})
    with pytest.raises(ReportParseError):
        adapter().parse_reports(req)


def test_callback_response_and_flags() -> None:
    assert adapter().callback_response() == (200, b"", "text/plain")
    assert adapter().reports_by_provider_id_only is False


# -- against a real local fake of the SMS API ---------------------------------------------


def fake_infobip(got: Received) -> Response:
    if got.headers.get("authorization") != "App 003026bbc133714df1834b8638bb496e-8f4b3d9a":
        return JSONResponse(
            {
                "requestError": {
                    "serviceException": {
                        "messageId": "UNAUTHORIZED",
                        "text": "Invalid login details",
                    }
                }
            },
            401,
        )
    if got.path != "/sms/2/text/advanced":
        return Response(status_code=404)
    msg = json.loads(got.body)["messages"][0]
    dest = msg["destinations"][0]
    if dest["to"] == "900000000000":
        return JSONResponse(
            {
                "bulkId": "B1",
                "messages": [
                    {
                        "to": dest["to"],
                        "messageId": dest["messageId"],
                        "status": status("REJECTED", "REJECTED_DESTINATION", 5, 51),
                    }
                ],
            }
        )
    return JSONResponse(
        {
            "bulkId": "B1",
            "messages": [
                {
                    "to": dest["to"],
                    "messageId": dest["messageId"],
                    "status": status("PENDING", "PENDING_ACCEPTED", 1, 26),
                }
            ],
        }
    )


def test_against_a_local_fake_sms_api() -> None:
    with FakeProvider(fake_infobip) as fake:
        a = adapter(base_url=fake.base_url)
        out = send(a, message(callback_url=CB))
        assert (out.result, out.provider_msg_id) == (SubmitResult.ACCEPTED, "01HF3Z9K2M8Q4R6T7V")
        assert send(a, message(msisdn="+900000000000")).result is SubmitResult.REJECTED
        wrong = adapter(base_url=fake.base_url, api_key="nope")
        assert send(wrong, message()).result is SubmitResult.REJECTED
    sent_msg = json.loads(fake.received[0].body)["messages"][0]
    # The fake reports back the way Infobip does: POST to notifyUrl, results[] batch.
    req = callback(
        sent_msg["notifyUrl"],
        body=json.dumps({"results": [result(callbackData=sent_msg["callbackData"])]}).encode(),
        headers=JSON,
    )
    a.verify(req)
    [rep] = a.parse_reports(req)
    assert (rep.ref, rep.state, rep.final) == ("01HF3Z9K2M8Q4R6T7V", "DELIVERED", True)
