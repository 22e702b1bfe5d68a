"""Inbound readers: each kind's own inbound webhook, proven as its reports are, read into
messages; anything else that an authentic request holds is an InboundParseError."""

from __future__ import annotations

import base64
import contextlib
import json
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from twilio.request_validator import RequestValidator
from vonage_http_client import Auth

from appliance.config import ProviderSettings
from appliance.provider_kinds import build_provider
from appliance.providers import (
    AuthError,
    CallbackRequest,
    InboundMessage,
    InboundParseError,
    InboundReader,
)
from appliance.providers.http_json import body_signature
from appliance.providers.twilio import TWIML_EMPTY
from tests.providers.provider_test_support import callback

VG_KEY, VG_SECRET = "abcd1234", "Sup3rS3cr3tSigning"
TW_SID, TW_TOKEN = "AC" + "1" * 32, "tw-auth-token"
IB_SECRET = "ib-shared-secret"
GW_SECRET = "gw-secret"
FORM = {"content-type": "application/x-www-form-urlencoded"}
JSON = {"content-type": "application/json"}


def reader(kind: str, **extra: Any) -> InboundReader:
    base: dict[str, Any] = {
        "vonage": {"base_url": "https://rest.nexmo.com", "api_key": VG_KEY, "api_secret": "s",
                   "signature_secret": VG_SECRET, "signature_method": "sha256"},
        "simulator": {},
        "twilio": {"base_url": "https://api.twilio.com", "account_sid": TW_SID,
                   "auth_token": TW_TOKEN, "sender": "+15005550006"},
        "infobip": {"base_url": "https://api.infobip.com", "api_key": "k", "secret": IB_SECRET},
        "http": {"base_url": "http://127.0.0.1:9", "secret": GW_SECRET},
    }[kind]
    provider = build_provider(ProviderSettings(name="p", kind=kind, **{**base, **extra}),
                              submit_timeout_s=5)
    assert provider.inbound is not None
    return provider.inbound


def vonage_inbound(**changes: str) -> dict[str, str]:
    params = {"msisdn": "905321234567", "to": "447700900000", "messageId": "0A0000000123ABCD",
              "text": "STOP", "type": "text", "keyword": "STOP", "api-key": VG_KEY,
              "message-timestamp": "2026-01-01 12:00:05", "timestamp": "1767268805",
              "nonce": "aa8e9f2c-1111-2222-3333-444455556666"}
    params.update(changes)
    return params


def vonage_signed(params: dict[str, str]) -> dict[str, str]:
    sdk = Auth(api_key=VG_KEY, signature_secret=VG_SECRET, signature_method="sha256")
    return {**params, "sig": sdk.sign_params(dict(params))}


URL = "https://sms.example.com/inbound/p"


@pytest.mark.parametrize("shape", ["get", "form", "json"])
def test_vonage_inbound_in_each_shape_signed_by_the_sdk(shape: str) -> None:
    params = vonage_signed(vonage_inbound())
    if shape == "get":
        req = callback(f"{URL}?{urlencode(params)}", method="GET")
    elif shape == "form":
        req = callback(URL, body=urlencode(params).encode(), headers=FORM)
    else:
        req = callback(URL, body=json.dumps(params).encode(), headers=JSON)
    r = reader("vonage")
    r.verify(req)
    [msg] = r.parse_inbound(req)
    assert msg == InboundMessage(msisdn="905321234567", to="447700900000", text="STOP",
                                 provider_msg_id="0A0000000123ABCD",
                                 sent_at_ms=1767268805000)
    assert r.inbound_response()[0] == 200


def test_vonage_inbound_tampered_or_unsigned_is_refused() -> None:
    params = vonage_signed(vonage_inbound())
    r = reader("vonage")
    with pytest.raises(AuthError):
        r.verify(callback(f"{URL}?{urlencode({**params, 'msisdn': '905550000000'})}",
                          method="GET"))
    with pytest.raises(AuthError):
        r.verify(callback(f"{URL}?{urlencode(vonage_inbound())}", method="GET"))
    unsigned = reader("vonage", signature_secret="")
    unsigned.verify(callback(f"{URL}?{urlencode(vonage_inbound())}", method="GET"))
    with pytest.raises(AuthError):
        unsigned.verify(callback(f"{URL}?{urlencode(vonage_inbound(**{'api-key': 'x'}))}",
                                 method="GET"))


def test_vonage_concatenated_and_binary_inbound() -> None:
    r = reader("vonage")
    part = vonage_inbound(text="second half", concat="true", **{
        "concat-ref": "108", "concat-total": "2", "concat-part": "2"})
    [msg] = r.parse_inbound(callback(f"{URL}?{urlencode(part)}", method="GET"))
    assert (msg.concat_ref, msg.part, msg.parts, msg.text) == ("108", 2, 2, "second half")
    binary = vonage_inbound(type="binary", data="0102", udh="050003CC0201")
    del binary["text"]
    [msg] = r.parse_inbound(callback(f"{URL}?{urlencode(binary)}", method="GET"))
    assert msg.text == ""


@pytest.mark.parametrize("params", [
    {"msisdn": "905321234567", "text": "hi"},  # no messageId
    {"messageId": "X", "text": "hi"},  # no msisdn
    {"messageId": "X", "msisdn": "1", "status": "delivered", "client-ref": "R"},  # a receipt
    {"messageId": "X", "msisdn": "1", "text": "a", "concat": "true", "concat-ref": "1",
     "concat-part": "3", "concat-total": "2"},
    {"messageId": "X", "msisdn": "1", "text": "a", "concat": "true", "concat-part": "1",
     "concat-total": "2"},
])
def test_vonage_unreadable_inbound_is_a_parse_error(params: dict[str, str]) -> None:
    with pytest.raises(InboundParseError):
        reader("vonage").parse_inbound(callback(f"{URL}?{urlencode(params)}", method="GET"))


def test_simulator_kind_reads_the_vonage_format() -> None:
    r = reader("simulator")
    req = callback(f"{URL}?{urlencode(vonage_inbound())}", method="GET")
    assert r.parse_inbound(req)[0].text == "STOP"


class MultiDict(dict[str, str]):
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def getall(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]


def twilio_fields(body: str = "STOP") -> list[tuple[str, str]]:
    return [("ToCountry", "US"), ("SmsMessageSid", "SM" + "a" * 32), ("NumMedia", "0"),
            ("SmsSid", "SM" + "a" * 32), ("SmsStatus", "received"), ("Body", body),
            ("To", "+15005550006"), ("NumSegments", "1"), ("MessageSid", "SM" + "a" * 32),
            ("AccountSid", TW_SID), ("From", "+905321234567"), ("ApiVersion", "2010-04-01")]


@pytest.mark.parametrize("signed_url", [
    "https://sms.example.com:8443/inbound/p", "https://sms.example.com/inbound/p"])
def test_twilio_incoming_message_signed_by_request_validator(signed_url: str) -> None:
    seen = "https://sms.example.com:8443/inbound/p"
    pairs = twilio_fields()
    sdk = RequestValidator(TW_TOKEN)
    sig = sdk.compute_signature(signed_url, MultiDict(pairs))
    assert sdk.validate(seen, MultiDict(pairs), sig)
    req = callback(seen, body=urlencode(pairs).encode(),
                   headers={**FORM, "X-Twilio-Signature": sig})
    r = reader("twilio")
    r.verify(req)
    [msg] = r.parse_inbound(req)
    assert (msg.msisdn, msg.to, msg.text, msg.provider_msg_id) == (
        "+905321234567", "+15005550006", "STOP", "SM" + "a" * 32)
    assert r.inbound_response() == (200, TWIML_EMPTY, "text/xml")
    forged = callback(seen, body=urlencode(twilio_fields("hello")).encode(),
                      headers={**FORM, "X-Twilio-Signature": sig})
    with pytest.raises(AuthError):
        r.verify(forged)


def test_twilio_status_callback_at_the_inbound_url_is_a_parse_error() -> None:
    pairs = [("MessageSid", "SM1"), ("MessageStatus", "delivered"), ("From", "+1500")]
    with pytest.raises(InboundParseError):
        reader("twilio").parse_inbound(callback(URL, body=urlencode(pairs).encode(),
                                                headers=FORM))


def infobip_body(text: str = "STOP") -> bytes:
    return json.dumps({"results": [{
        "messageId": "817790313235066447", "from": "905321234567", "to": "447491163443",
        "text": text, "cleanText": text, "keyword": text.split()[0] if text else "",
        "receivedAt": "2026-01-01T12:00:05.000+0000", "smsCount": 1,
        "price": {"pricePerMessage": 0, "currency": "EUR"}, "callbackData": None}],
        "messageCount": 1, "pendingMessageCount": 0}).encode()


def test_infobip_inbound_with_its_shared_secret() -> None:
    r = reader("infobip")
    req = callback(f"{URL}?secret={IB_SECRET}", body=infobip_body(), headers=JSON)
    r.verify(req)
    [msg] = r.parse_inbound(req)
    assert (msg.msisdn, msg.text, msg.provider_msg_id, msg.sent_at_ms) == (
        "905321234567", "STOP", "817790313235066447", 1767268805000)
    basic = base64.b64encode(f"user:{IB_SECRET}".encode()).decode()
    r.verify(callback(URL, body=infobip_body(), headers={**JSON, "Authorization":
                                                        f"Basic {basic}"}))
    with pytest.raises(AuthError):
        r.verify(callback(f"{URL}?secret=nope", body=infobip_body(), headers=JSON))
    with pytest.raises(InboundParseError):
        r.parse_inbound(callback(URL, body=b'{"results": [{"text": "x"}]}', headers=JSON))


def test_http_kind_inbound_signed_like_its_reports() -> None:
    r = reader("http")
    body = json.dumps([{"id": "m-1", "from": "+905321234567", "to": "ACME", "text": "STOP",
                        "received_at": "2026-01-01T12:00:05Z"},
                       {"id": "m-2", "from": "+905321234568", "text": "merhaba"}]).encode()
    req = callback(URL, body=body, headers={**JSON, "X-Signature": body_signature(body,
                                                                                  GW_SECRET)})
    r.verify(req)
    first, second = r.parse_inbound(req)
    assert (first.provider_msg_id, first.sent_at_ms, second.to) == ("m-1", 1767268805000, "")
    with pytest.raises(AuthError):
        r.verify(callback(URL, body=body, headers={**JSON, "X-Signature": "sha256=00"}))
    for bad in (b'{"from": "+1", "text": "x"}', b'{"id": 1, "from": "+1"}', b"[1]", b"{",
                b'{"id": "x", "from": "+1", "text": "x", "received_at": "yesterday"}'):
        with pytest.raises(InboundParseError):
            r.parse_inbound(callback(URL, body=bad, headers=JSON))


KINDS = ["vonage", "twilio", "infobip", "http"]


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(KINDS), method=st.sampled_from(["GET", "POST"]),
       body=st.binary(max_size=300), query=st.text(max_size=80),
       ctype=st.sampled_from(["", "application/json", "application/x-www-form-urlencoded",
                              "text/plain"]))
def test_only_parse_errors_escape_a_reader(kind: str, method: str, body: bytes, query: str,
                                           ctype: str) -> None:
    req = CallbackRequest(method=method, url=URL, query=query,
                          headers={"content-type": ctype} if ctype else {}, body=body)
    r = reader(kind)
    with contextlib.suppress(InboundParseError):
        r.parse_inbound(req)
    with contextlib.suppress(AuthError):
        r.verify(req)
