"""ROUTE-2 for the global kinds: Twilio and Infobip asked about a message.

Twilio's request is the one twilio-python itself makes for ``messages(sid).fetch()``
(its own HTTP client is handed the request and captured), and the answer is read from
the Message resource the SDK reads its ``status`` and ``error_code`` from. Infobip's
is its "Sent messages logs" (``GET /sms/1/logs?messageId=``), answered as its
documentation's example. Every answer that says nothing readable (HTML, truncated, a
status not in the provider's list, another message) is no verdict, never a state.
"""

from __future__ import annotations

import base64
import json
import logging
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from twilio.http import HttpClient
from twilio.http.response import Response as TwilioResponse
from twilio.rest import Client

from appliance.config import ProviderSettings
from appliance.provider_kinds import KINDS
from appliance.providers.infobip import InfobipAdapter
from appliance.providers.status_query import PullTarget, PullVerdict, status_query_of
from appliance.providers.twilio import TwilioAdapter
from tests.providers.provider_test_support import adapter_of, callback

TW_SID = "AC" + "a" * 32
TW_TOKEN = "tw-token"
MSG_SID = "SM" + "1" * 32
REF = "01HF3Z9K2M8Q4R6T7VWXYZ0123"


def twilio() -> TwilioAdapter:
    return adapter_of(TwilioAdapter, ProviderSettings(
        name="tw", kind="twilio", base_url="https://api.twilio.com", sender="+15005550006",
        account_sid=TW_SID, auth_token=TW_TOKEN))


def infobip() -> InfobipAdapter:
    return adapter_of(InfobipAdapter, ProviderSettings(
        name="ib", kind="infobip", base_url="https://xyz123.api.infobip.com",
        sender="InfoSMS", api_key="ib-key", secret="cb-secret"))


def target(pid: str | None = MSG_SID) -> PullTarget:
    return PullTarget(ref=REF, provider_msg_id=pid, msisdn="+905321234567",
                      submitted_at_ms=1_700_000_000_000)


def answered(body: bytes, ctype: str = "application/json") -> Any:
    return callback("https://api.example/status", method="PULL", body=body,
                    headers={"content-type": ctype})


def message_resource(status: str, error_code: int | None = None) -> dict[str, Any]:
    """The Message resource as Twilio's API reference shows it (the fields read)."""
    return {"sid": MSG_SID, "account_sid": TW_SID, "status": status,
            "error_code": error_code, "error_message": None, "to": "+905321234567",
            "from": "+15005550006", "body": "hi", "num_segments": "1",
            "date_updated": "Thu, 04 Dec 2026 10:00:00 +0000",
            "uri": f"/2010-04-01/Accounts/{TW_SID}/Messages/{MSG_SID}.json"}


class Captured(HttpClient):  # type: ignore[misc]  # the SDK is untyped
    """twilio-python's HTTP client seam: records the request the SDK makes and answers
    it with ``body``."""

    def __init__(self, body: dict[str, Any]) -> None:
        super().__init__(logging.getLogger("twilio.test"), is_async=False)
        self.body = body
        self.seen: list[tuple[str, str, tuple[str, str] | None]] = []

    def request(self, method: str, url: str, params: Any = None, data: Any = None,
                headers: Any = None, auth: Any = None, timeout: Any = None,
                allow_redirects: bool = False) -> TwilioResponse:
        self.seen.append((method, url, auth))
        return TwilioResponse(200, json.dumps(self.body))


def test_both_kinds_declare_they_can_be_asked() -> None:
    assert KINDS["twilio"].status_query and KINDS["infobip"].status_query
    assert status_query_of(twilio()) is not None and status_query_of(infobip()) is not None
    assert twilio().status_batch_max == infobip().status_batch_max == 1


def test_twilio_request_is_the_one_twilio_python_makes_for_fetch() -> None:
    sdk = Captured(message_resource("delivered"))
    fetched = Client(TW_SID, TW_TOKEN, http_client=sdk).messages(MSG_SID).fetch()
    assert fetched.status == "delivered"
    method, url, auth = sdk.seen[0]
    ours = twilio().build_status_request([target()])
    assert ours.method == method == "GET"
    assert ours.url.path == urlsplit(url).path
    assert auth == (TW_SID, TW_TOKEN)
    assert ours.headers["authorization"] == "Basic " + base64.b64encode(
        f"{TW_SID}:{TW_TOKEN}".encode()).decode()


@pytest.mark.parametrize(("status", "verdict", "state"), [
    ("delivered", PullVerdict.FINAL, "DELIVERED"),
    ("read", PullVerdict.FINAL, "DELIVERED"),
    ("undelivered", PullVerdict.FINAL, "FAILED"),
    ("failed", PullVerdict.FINAL, "FAILED"),
    ("canceled", PullVerdict.FINAL, "FAILED"),
    ("queued", PullVerdict.PENDING, None),
    ("sending", PullVerdict.PENDING, None),
    ("sent", PullVerdict.PENDING, None),
    ("accepted", PullVerdict.PENDING, None),
    ("scheduled", PullVerdict.PENDING, None),
])
def test_twilio_answer_read_as_the_sdk_reads_it(status: str, verdict: PullVerdict,
                                                 state: str | None) -> None:
    body = message_resource(status, 30003 if state == "FAILED" else None)
    sdk = Captured(body)
    assert Client(TW_SID, TW_TOKEN, http_client=sdk).messages(MSG_SID).fetch().status == status
    got = twilio().read_status_answer([target()], 200, answered(json.dumps(body).encode()))
    assert got.verdict(REF) is verdict
    if state is None:
        assert got.reports == ()  # still pending: an attempt, not a state
    else:
        (one,) = got.reports
        assert (one.ref, one.provider_msg_id, one.state, one.final) == (REF, MSG_SID, state, True)
        assert one.error_code == ("30003" if state == "FAILED" else None)


def test_twilio_404_is_an_id_it_does_not_know() -> None:
    body = b'{"code": 20404, "message": "The requested resource was not found", "status": 404}'
    got = twilio().read_status_answer([target()], 404, answered(body))
    assert got.verdict(REF) is PullVerdict.UNKNOWN_ID and got.reports == ()


@pytest.mark.parametrize("status_code, body, ctype", [
    (200, b"<html><body>502 Bad Gateway</body></html>", "text/html"),
    (200, json.dumps(message_resource("delivered")).encode()[:40], "application/json"),
    (200, json.dumps(message_resource("teleported")).encode(), "application/json"),
    (200, json.dumps({**message_resource("delivered"), "sid": "SM" + "2" * 32}).encode(),
     "application/json"),
    (200, b"[]", "application/json"),
    (500, json.dumps(message_resource("delivered")).encode(), "application/json"),
    (429, b'{"code": 20429, "message": "Too Many Requests"}', "application/json"),
])
def test_twilio_answers_that_say_nothing_are_no_verdict(status_code: int, body: bytes,
                                                       ctype: str) -> None:
    got = twilio().read_status_answer([target()], status_code, answered(body, ctype))
    assert got.verdict(REF) is PullVerdict.ERROR and got.reports == ()


def test_twilio_cannot_ask_about_a_message_without_its_sid() -> None:
    with pytest.raises(ValueError, match="sid"):
        twilio().build_status_request([target(None)])


# -- Infobip -------------------------------------------------------------------------


def log_entry(message_id: str = REF, group: str = "DELIVERED",
              name: str = "DELIVERED_TO_HANDSET") -> dict[str, Any]:
    """One result of "Sent messages logs", as the documentation's example has it."""
    return {"bulkId": "06479ba3-5977-47f6-9346-fee0369bc76b", "messageId": message_id,
            "to": "905321234567", "from": "InfoSMS", "text": "Test SMS.",
            "sentAt": "2015-02-23T17:40:31.773+0100", "doneAt": "2015-02-23T17:40:31.787+0100",
            "smsCount": 1, "mccmnc": "22801",
            "price": {"pricePerMessage": 0.01, "currency": "EUR"},
            "status": {"groupId": 3, "groupName": group, "id": 5, "name": name,
                       "description": "Message delivered to handset"},
            "error": {"groupId": 0, "groupName": "OK", "id": 0, "name": "NO_ERROR",
                      "description": "No Error", "permanent": False}}


def test_infobip_asks_its_logs_by_message_id_with_the_api_key() -> None:
    req = infobip().build_status_request([target(REF)])
    assert (req.method, req.url.host, req.url.path) == ("GET", "xyz123.api.infobip.com",
                                                       "/sms/1/logs")
    assert parse_qs(req.url.query.decode()) == {"messageId": [REF]}
    assert req.headers["authorization"] == "App ib-key"
    assert infobip().answers_within_s == 48 * 3600


@pytest.mark.parametrize(("group", "name", "verdict", "state"), [
    ("DELIVERED", "DELIVERED_TO_HANDSET", PullVerdict.FINAL, "DELIVERED"),
    ("UNDELIVERABLE", "UNDELIVERABLE_NOT_DELIVERED", PullVerdict.FINAL, "FAILED"),
    ("EXPIRED", "EXPIRED_EXPIRED", PullVerdict.FINAL, "EXPIRED"),
    ("REJECTED", "REJECTED_NETWORK", PullVerdict.FINAL, "REJECTED"),
    ("PENDING", "PENDING_ENROUTE", PullVerdict.PENDING, None),
    ("DELIVERED", "DELIVERED_TO_OPERATOR", PullVerdict.PENDING, None),
])
def test_infobip_log_read_like_a_pushed_report(group: str, name: str, verdict: PullVerdict,
                                               state: str | None) -> None:
    body = json.dumps({"results": [log_entry(group=group, name=name)]}).encode()
    got = infobip().read_status_answer([target(REF)], 200, answered(body))
    assert got.verdict(REF) is verdict
    if state is None:
        assert got.reports == ()
    else:
        (one,) = got.reports
        assert (one.ref, one.state, one.status) == (REF, state, name)
        assert one.reported_at_ms == 1_424_709_631_787  # doneAt, its offset applied


def test_infobip_empty_logs_are_an_id_it_does_not_know() -> None:
    got = infobip().read_status_answer([target(REF)], 200, answered(b'{"results": []}'))
    assert got.verdict(REF) is PullVerdict.UNKNOWN_ID
    other = json.dumps({"results": [log_entry(message_id="someone-else")]}).encode()
    assert infobip().read_status_answer([target(REF)], 200,
                                        answered(other)).verdict(REF) is PullVerdict.UNKNOWN_ID


@pytest.mark.parametrize("status_code, body", [
    (200, b"<html>Service Unavailable</html>"),
    (200, b'{"results": [{"messageId": "01HF3Z9K2M8Q4R6T7VWXYZ0123", "status": {"gro'),
    (200, json.dumps({"results": [log_entry(group="TELEPORTED")]}).encode()),
    (200, json.dumps({"results": [{"messageId": REF}]}).encode()),
    (200, b'{"requestError": {"serviceException": {"messageId": "UNAUTHORIZED"}}}'),
    (401, b'{"requestError": {"serviceException": {"messageId": "UNAUTHORIZED"}}}'),
])
def test_infobip_answers_that_say_nothing_are_no_verdict(status_code: int,
                                                         body: bytes) -> None:
    got = infobip().read_status_answer([target(REF)], status_code, answered(body))
    assert got.verdict(REF) is PullVerdict.ERROR and got.reports == ()
