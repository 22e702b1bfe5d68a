"""Twilio Messages adapter: submit format, answers, X-Twilio-Signature, status callbacks."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from urllib.parse import parse_qsl, urlencode

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
from appliance.providers.twilio import TwilioAdapter
from tests.providers.provider_test_support import (
    FakeProvider,
    Received,
    adapter_of,
    callback,
    changed,
    message,
    send,
)

SID = "ACXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXXX"
TOKEN = "your_auth_token"
CB = "https://sms.example.org/callbacks/tw"
FORM = {"content-type": "application/x-www-form-urlencoded"}


def settings(**changes: object) -> ProviderSettings:
    base = ProviderSettings(
        name="tw",
        kind="twilio",
        base_url="https://api.twilio.com",
        sender="+15005550006",
        account_sid=SID,
        auth_token=TOKEN,
    )
    return changed(base, **changes)


def adapter(**changes: object) -> TwilioAdapter:
    return adapter_of(TwilioAdapter, settings(**changes))


def reference_signature(url: str, params: dict[str, str], token: str) -> str:
    """Twilio's published scheme, written out again here, independent of the adapter."""
    data = url
    for key in sorted(params):
        data += key + params[key]
    digest = hmac.new(token.encode(), data.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def status_callback(
    params: dict[str, str], url: str = f"{CB}?ref=01HF3Z9K2M8Q4R6T7V", token: str = TOKEN
) -> CallbackRequest:
    sig = reference_signature(url, params, token)
    return callback(
        url, body=urlencode(params).encode(), headers={**FORM, "X-Twilio-Signature": sig}
    )


def fields(**changes: str) -> dict[str, str]:
    out = {
        "SmsSid": "SM1f0e8ae6ade43cb3c0ce4525424e404f",
        "SmsStatus": "delivered",
        "MessageStatus": "delivered",
        "To": "+905321234567",
        "MessageSid": "SM1f0e8ae6ade43cb3c0ce4525424e404f",
        "AccountSid": SID,
        "From": "+15005550006",
        "ApiVersion": "2010-04-01",
    }
    out.update(changes)
    return out


# -- build_request ---------------------------------------------------------------------


def test_build_request_is_the_documented_messages_create() -> None:
    req = adapter().build_request(message(callback_url=CB))
    assert req.method == "POST"
    assert str(req.url) == f"https://api.twilio.com/2010-04-01/Accounts/{SID}/Messages.json"
    expected_auth = base64.b64encode(f"{SID}:{TOKEN}".encode()).decode()
    assert req.headers["authorization"] == f"Basic {expected_auth}"
    assert req.headers["content-type"] == "application/x-www-form-urlencoded"
    assert dict(parse_qsl(req.content.decode())) == {
        "To": "+905321234567",
        "From": "+15005550006",
        "Body": "Your code is 1234",
        "StatusCallback": f"{CB}?ref=01HF3Z9K2M8Q4R6T7V",
    }


def test_status_callback_keeps_an_existing_query_and_messaging_service() -> None:
    a = adapter(options={"messaging_service_sid": "MG9752274e9e519418a7406176694466fa"})
    req = a.build_request(message(callback_url=f"{CB}?tenant=7"))
    got = dict(parse_qsl(req.content.decode()))
    assert got["StatusCallback"] == f"{CB}?tenant=7&ref=01HF3Z9K2M8Q4R6T7V"
    assert got["MessagingServiceSid"] == "MG9752274e9e519418a7406176694466fa"
    assert "From" not in got


# -- interpret_response ----------------------------------------------------------------


def answer(
    status: int,
    body: object = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.Response(status, content=content, headers=headers)


def test_created_message_is_accepted_with_its_sid() -> None:
    body = {
        "sid": "SM1f0e8ae6ade43cb3c0ce4525424e404f",
        "status": "queued",
        "to": "+905321234567",
        "error_code": None,
    }
    out = adapter().interpret_response(answer(201, body))
    assert (out.result, out.provider_msg_id) == (
        SubmitResult.ACCEPTED,
        "SM1f0e8ae6ade43cb3c0ce4525424e404f",
    )


def test_rate_limits_are_retried() -> None:
    too_many = {"code": 20429, "message": "Too Many Requests", "status": 429}
    out = adapter().interpret_response(answer(429, too_many, headers={"Retry-After": "3"}))
    assert (out.result, out.retry_after_s) == (SubmitResult.RETRY, 3.0)
    date = "Tue, 14 Nov 2023 22:14:20 GMT"
    out = adapter().interpret_response(answer(503, raw=b"", headers={"Retry-After": date}))
    assert (out.result, out.retry_after_s) == (SubmitResult.RETRY, 60.0)
    as_400 = {"code": 14107, "message": "SMS send rate limit exceeded", "status": 400}
    assert adapter().interpret_response(answer(400, as_400)).result is SubmitResult.RETRY


@pytest.mark.parametrize("code", [21211, 21610, 21614, 21408, 21612])
def test_permanent_errors_are_rejected_with_the_code(code: int) -> None:
    body = {
        "code": code,
        "message": "The 'To' number is not valid.",
        "status": 400,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
    }
    out = adapter().interpret_response(answer(400, body))
    assert out.result is SubmitResult.REJECTED
    assert out.error is not None and f"code {code}" in out.error


def test_other_http_statuses() -> None:
    a = adapter()
    assert a.interpret_response(answer(401, {"code": 20003})).result is SubmitResult.REJECTED
    assert a.interpret_response(answer(500, raw=b"<html/>")).result is SubmitResult.RETRY
    assert a.interpret_response(answer(504, raw=b"")).result is SubmitResult.UNCERTAIN


@pytest.mark.parametrize(
    "raw", [b"", b"<Response/>", b"{}", b'{"sid": ""}', b'{"sid": 7}', b"[]", b'{"sid": "SM1"']
)
def test_unreadable_2xx_is_uncertain(raw: bytes) -> None:
    assert adapter().interpret_response(answer(201, raw=raw)).result is SubmitResult.UNCERTAIN


# -- verify ----------------------------------------------------------------------------

DOC_URL = "https://mycompany.com/myapp.php?foo=1&bar=2"


@pytest.mark.parametrize(
    ("caller", "signature"),
    [
        # twilio-php's validation guide (and the earlier Twilio security page).
        ("+14158675309", "RSOYDt4T1cUTdK1PDd93/VVr8B8="),
        # The current Twilio webhook security page.
        ("+12349013030", "0/KCTR6DLpKmkAf8muzZqo1nDgQ="),
    ],
)
def test_published_signature_vectors(caller: str, signature: str) -> None:
    params = {
        "CallSid": "CA1234567890ABCDE",
        "Caller": caller,
        "Digits": "1234",
        "From": caller,
        "To": "+18005551212",
    }
    assert reference_signature(DOC_URL, params, "12345") == signature
    a = adapter(auth_token="12345")
    ok = callback(
        DOC_URL, body=urlencode(params).encode(), headers={**FORM, "X-Twilio-Signature": signature}
    )
    a.verify(ok)
    tampered = callback(
        DOC_URL,
        body=urlencode({**params, "Digits": "1235"}).encode(),
        headers={**FORM, "X-Twilio-Signature": signature},
    )
    with pytest.raises(AuthError):
        a.verify(tampered)


def test_status_callback_signature_covers_the_ref() -> None:
    a = adapter()
    a.verify(status_callback(fields()))
    good = status_callback(fields())
    forged = callback(f"{CB}?ref=SOMEONE-ELSE", body=good.body, headers=dict(good.headers))
    with pytest.raises(AuthError):
        a.verify(forged)


def test_missing_wrong_and_tampered_signatures() -> None:
    a = adapter()
    url = f"{CB}?ref=R"
    body = urlencode(fields()).encode()
    with pytest.raises(AuthError):
        a.verify(callback(url, body=body, headers=FORM))
    with pytest.raises(AuthError):
        a.verify(callback(url, body=body, headers={**FORM, "X-Twilio-Signature": ""}))
    wrong_token = reference_signature(url, fields(), "not-the-token")
    with pytest.raises(AuthError):
        a.verify(callback(url, body=body, headers={**FORM, "X-Twilio-Signature": wrong_token}))
    sig = reference_signature(url, fields(), TOKEN)
    extra = urlencode({**fields(), "Injected": "1"}).encode()
    with pytest.raises(AuthError):
        a.verify(callback(url, body=extra, headers={**FORM, "X-Twilio-Signature": sig}))
    with pytest.raises(AuthError):
        a.verify(callback(url, body=b"\xff=\xfe", headers={**FORM, "X-Twilio-Signature": sig}))


def test_the_port_is_tolerated_as_twilio_python_tolerates_it() -> None:
    a = adapter()
    signed_without = "https://sms.example.org/callbacks/tw?ref=R"
    sig = reference_signature(signed_without, fields(), TOKEN)
    seen_with = callback(
        "https://sms.example.org:443/callbacks/tw?ref=R",
        body=urlencode(fields()).encode(),
        headers={**FORM, "X-Twilio-Signature": sig},
    )
    a.verify(seen_with)
    signed_with = "https://sms.example.org:443/callbacks/tw?ref=R"
    sig2 = reference_signature(signed_with, fields(), TOKEN)
    a.verify(
        callback(
            signed_without,
            body=urlencode(fields()).encode(),
            headers={**FORM, "X-Twilio-Signature": sig2},
        )
    )
    # A non-default port may be left out of the signed URL (twilio-python#402) ...
    seen_with_other_port = callback(
        "https://sms.example.org:8443/callbacks/tw?ref=R",
        body=urlencode(fields()).encode(),
        headers={**FORM, "X-Twilio-Signature": sig},
    )
    a.verify(seen_with_other_port)
    # ... but never replaced by another one.
    signed_8444 = "https://sms.example.org:8444/callbacks/tw?ref=R"
    sig_8444 = reference_signature(signed_8444, fields(), TOKEN)
    with pytest.raises(AuthError):
        a.verify(
            callback(
                "https://sms.example.org:8443/callbacks/tw?ref=R",
                body=urlencode(fields()).encode(),
                headers={**FORM, "X-Twilio-Signature": sig_8444},
            )
        )


def test_json_body_is_covered_by_body_sha256() -> None:
    a = adapter()
    body = b'{"MessageSid": "SM1", "MessageStatus": "delivered"}'
    url = f"{CB}?ref=R&bodySHA256={hashlib.sha256(body).hexdigest()}"
    sig = reference_signature(url, {}, TOKEN)
    headers = {"content-type": "application/json", "X-Twilio-Signature": sig}
    a.verify(callback(url, body=body, headers=headers))
    with pytest.raises(AuthError):
        a.verify(callback(url, body=body + b" ", headers=headers))


# -- parse_reports ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "state", "final"),
    [
        ("queued", "ACCEPTED", False),
        ("accepted", "ACCEPTED", False),
        ("scheduled", "ACCEPTED", False),
        ("sending", "ENROUTE", False),
        ("sent", "ENROUTE", False),
        ("delivered", "DELIVERED", True),
        ("read", "DELIVERED", True),
        ("undelivered", "FAILED", True),
        ("failed", "FAILED", True),
        ("canceled", "FAILED", True),
        ("partially_delivered", "ENROUTE", False),
    ],
)
def test_every_status_word(word: str, state: str, final: bool) -> None:
    [rep] = adapter().parse_reports(status_callback(fields(MessageStatus=word, SmsStatus=word)))
    assert (rep.status, rep.state, rep.final) == (word, state, final)
    assert rep.ref == "01HF3Z9K2M8Q4R6T7V"
    assert rep.provider_msg_id == "SM1f0e8ae6ade43cb3c0ce4525424e404f"
    assert rep.reported_at_ms == 0  # Twilio sends no report time


def test_error_code_and_raw_dlr_done_date() -> None:
    req = status_callback(
        fields(MessageStatus="undelivered", ErrorCode="30003", RawDlrDoneDate="2311142213")
    )
    [rep] = adapter().parse_reports(req)
    assert (rep.state, rep.error_code, rep.reported_at_ms) == ("FAILED", "30003", 0)


def test_old_style_and_get_callbacks() -> None:
    old = {
        k: v
        for k, v in fields(SmsStatus="sent").items()
        if k not in ("MessageStatus", "MessageSid")
    }
    [rep] = adapter().parse_reports(status_callback(old))
    assert (rep.status, rep.provider_msg_id) == ("sent", "SM1f0e8ae6ade43cb3c0ce4525424e404f")
    url = f"{CB}?ref=R1&{urlencode(fields())}"
    [rep] = adapter().parse_reports(callback(url, method="GET"))
    assert (rep.ref, rep.state) == ("R1", "DELIVERED")


def test_callbacks_without_a_report() -> None:
    a = adapter()
    assert a.parse_reports(callback(CB)) == []
    inbound = {
        "MessageSid": "SM9",
        "SmsStatus": "received",
        "Body": "STOP",
        "From": "+905321234567",
    }
    assert a.parse_reports(status_callback(inbound)) == []


@pytest.mark.parametrize(
    "body",
    [
        b"MessageSid=SM1&To=%2B1",  # no status
        b"MessageStatus=delivered",  # nothing to match on (and no ref in the URL)
        b"MessageStatus=delivered&MessageSid=SM1&MessageSid=SM2",  # two different values
        b"MessageStatus=deliv\xffered&MessageSid=SM1",
        b"MessageStatus=%ff&MessageSid=SM1",
    ],
)
def test_unreadable_callbacks(body: bytes) -> None:
    with pytest.raises(ReportParseError):
        adapter().parse_reports(callback(CB, body=body, headers=FORM))


def test_callback_response_and_flags() -> None:
    a = adapter()
    assert a.callback_response()[0] in (200, 204)
    assert a.reports_by_provider_id_only is False


# -- against a real local fake of the Messages API ----------------------------------------


def fake_twilio(got: Received) -> Response:
    expected = "Basic " + base64.b64encode(f"{SID}:{TOKEN}".encode()).decode()
    if got.headers.get("authorization") != expected:
        return JSONResponse({"code": 20003, "message": "Authenticate", "status": 401}, 401)
    form = dict(parse_qsl(got.body.decode()))
    if form.get("To") == "+10000000000":
        return JSONResponse(
            {"code": 21211, "message": "Invalid 'To' Phone Number", "status": 400}, 400
        )
    if form.get("To") == "+19999999999":
        return JSONResponse(
            {"code": 20429, "message": "Too Many Requests", "status": 429},
            429,
            headers={"Retry-After": "2"},
        )
    return JSONResponse(
        {
            "sid": "SMaaaabbbbccccddddeeeeffff00001111",
            "status": "queued",
            "to": form["To"],
            "from": form["From"],
            "body": form["Body"],
        },
        201,
    )


def test_against_a_local_fake_messages_api() -> None:
    with FakeProvider(fake_twilio) as fake:
        a = adapter(base_url=fake.base_url)
        out = send(a, message(callback_url=CB))
        assert out.result is SubmitResult.ACCEPTED
        assert out.provider_msg_id == "SMaaaabbbbccccddddeeeeffff00001111"
        assert send(a, message(msisdn="+10000000000")).result is SubmitResult.REJECTED
        limited = send(a, message(msisdn="+19999999999"))
        assert (limited.result, limited.retry_after_s) == (SubmitResult.RETRY, 2.0)
        wrong = adapter(base_url=fake.base_url, auth_token="nope")
        assert send(wrong, message()).result is SubmitResult.REJECTED
    got = fake.received[0]
    assert got.path == f"/2010-04-01/Accounts/{SID}/Messages.json"
    status_cb = dict(parse_qsl(got.body.decode()))["StatusCallback"]
    # The fake now calls back as Twilio does: signed over that exact URL.
    req = status_callback(
        fields(MessageSid="SMaaaabbbbccccddddeeeeffff00001111", MessageStatus="delivered"),
        url=status_cb,
    )
    a.verify(req)
    [rep] = a.parse_reports(req)
    assert (rep.ref, rep.provider_msg_id, rep.final) == (
        "01HF3Z9K2M8Q4R6T7V",
        "SMaaaabbbbccccddddeeeeffff00001111",
        True,
    )
