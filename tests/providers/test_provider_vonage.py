"""Vonage SMS API adapter: submit format, answers, signed webhooks, delivery receipts."""

from __future__ import annotations

import hashlib
import hmac
import json
from urllib.parse import parse_qsl, urlencode

import httpx
import pytest
from starlette.responses import JSONResponse, Response

from appliance.config import ConfigError, ProviderSettings, Settings
from appliance.provider_kinds import check_providers
from appliance.providers import (
    AuthError,
    CallbackRequest,
    ReportParseError,
    SubmitResult,
)
from appliance.providers.vonage import VonageAdapter
from tests.providers.provider_test_support import (
    NOW_MS,
    FakeProvider,
    Received,
    adapter_of,
    callback,
    changed,
    message,
    send,
)

CB_URL = "https://sms.example.org/callbacks/main"


def settings(**changes: object) -> ProviderSettings:
    base = ProviderSettings(
        name="main",
        kind="vonage",
        base_url="https://rest.nexmo.com",
        sender="ACME",
        api_key="abcd1234",
        api_secret="s3cr3t",
        signature_secret="",
        signature_method="md5hash",
    )
    return changed(base, **changes)


def adapter(now_ms: int = NOW_MS, **changes: object) -> VonageAdapter:
    return adapter_of(VonageAdapter, settings(**changes), now_ms)


def reference_sig(params: dict[str, str], secret: str, method: str) -> str:
    """Vonage's published algorithm, written out again here, independent of the adapter."""
    text = ""
    for key in sorted(params):
        if key == "sig":
            continue
        value = params[key].replace("&", "_").replace("=", "_")
        text += "&" + key + "=" + value
    if method == "md5hash":
        return hashlib.md5((text + secret).encode()).hexdigest()
    digestmod = {"md5": hashlib.md5, "sha1": hashlib.sha1, "sha256": hashlib.sha256}
    digestmod["sha512"] = hashlib.sha512
    return hmac.new(secret.encode(), text.encode(), digestmod[method]).hexdigest()


def dlr(**changes: str) -> dict[str, str]:
    params = {
        "msisdn": "905321234567",
        "to": "ACME",
        "network-code": "28601",
        "messageId": "0B00000127FDBC63",
        "price": "0.03330000",
        "status": "delivered",
        "scts": "2311142213",
        "err-code": "0",
        "api-key": "abcd1234",
        "client-ref": "01HF3Z9K2M8Q4R6T7V",
        "message-timestamp": "2023-11-14 22:13:20",
    }
    params.update(changes)
    return params


def signed(
    params: dict[str, str], secret: str, method: str, ts: int = NOW_MS // 1000
) -> dict[str, str]:
    out = dict(params, timestamp=str(ts), nonce="6e9c1b4a-1c0e-4a3e-9a43-3b8ea2bd3a11")
    out["sig"] = reference_sig(out, secret, method)
    return out


# -- build_request ---------------------------------------------------------------------


def test_build_request_is_the_documented_form_post() -> None:
    req = adapter().build_request(message())
    assert req.method == "POST"
    assert str(req.url) == "https://rest.nexmo.com/sms/json"
    assert req.headers["content-type"] == "application/x-www-form-urlencoded"
    assert dict(parse_qsl(req.content.decode())) == {
        "api_key": "abcd1234",
        "api_secret": "s3cr3t",
        "from": "ACME",
        "to": "905321234567",
        "text": "Your code is 1234",
        "client-ref": "01HF3Z9K2M8Q4R6T7V",
        "callback": CB_URL,
        "status-report-req": "1",
    }


def test_non_gsm_body_is_sent_as_unicode() -> None:
    req = adapter().build_request(message(body="Şifreniz: 1234, iyi günler"))
    fields = dict(parse_qsl(req.content.decode()))
    assert fields["type"] == "unicode"
    assert fields["text"] == "Şifreniz: 1234, iyi günler"


def test_signed_request_carries_sig_instead_of_api_secret() -> None:
    a = adapter(
        signature_secret="sigsecret", signature_method="sha256", options={"sign_requests": True}
    )
    fields = dict(parse_qsl(a.build_request(message()).content.decode()))
    assert "api_secret" not in fields
    assert fields["timestamp"] == str(NOW_MS // 1000)
    assert fields["sig"] == reference_sig(fields, "sigsecret", "sha256")


# -- interpret_response ----------------------------------------------------------------


def answer(
    status: int = 200,
    body: object = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.Response(status, content=content, headers=headers)


def parts(*statuses: str) -> dict[str, object]:
    return {
        "message-count": str(len(statuses)),
        "messages": [
            {"to": "905321234567", "message-id": f"0C00000{i}", "status": s}
            if s == "0"
            else {"status": s, "error-text": "nope"}
            for i, s in enumerate(statuses)
        ],
    }


def test_success_gives_the_message_id() -> None:
    out = adapter().interpret_response(answer(body=parts("0")))
    assert out.result is SubmitResult.ACCEPTED
    assert out.provider_msg_id == "0C000000"
    assert out.error is None


def test_throttled_is_retried_after_a_second() -> None:
    out = adapter().interpret_response(answer(body=parts("1")))
    assert out.result is SubmitResult.RETRY
    assert out.retry_after_s == 1.0
    assert out.error is not None and "vonage status 1 (Throttled)" in out.error


@pytest.mark.parametrize("code", ["5", "9", "10"])
def test_transient_statuses_are_retried(code: str) -> None:
    assert adapter().interpret_response(answer(body=parts(code))).result is SubmitResult.RETRY


@pytest.mark.parametrize("code", ["2", "3", "4", "6", "7", "8", "12", "15", "29", "33", "99"])
def test_permanent_statuses_are_rejected(code: str) -> None:
    out = adapter().interpret_response(answer(body=parts(code)))
    assert out.result is SubmitResult.REJECTED
    assert out.error is not None and f"status {code}" in out.error


def test_integer_status_is_understood() -> None:
    body = {"messages": [{"status": 0, "message-id": "X1"}]}
    assert adapter().interpret_response(answer(body=body)).provider_msg_id == "X1"


def test_multipart_all_accepted_and_partly_accepted() -> None:
    out = adapter().interpret_response(answer(body=parts("0", "0")))
    assert out.result is SubmitResult.ACCEPTED and out.error is None
    partly = adapter().interpret_response(answer(body=parts("0", "1")))
    assert partly.result is SubmitResult.ACCEPTED  # part of it went: never resend
    assert partly.error is not None and "part 2/2" in partly.error


def test_every_messages_entry_is_a_part_with_its_own_id() -> None:
    out = adapter().interpret_response(answer(body=parts("0", "0", "0")))
    assert [(p.part, p.result, p.provider_msg_id) for p in out.parts] == [
        (1, SubmitResult.ACCEPTED, "0C000000"), (2, SubmitResult.ACCEPTED, "0C000001"),
        (3, SubmitResult.ACCEPTED, "0C000002")]
    assert out.provider_msg_id == "0C000000"


def test_a_part_refused_inside_a_200_is_rejected_on_its_own() -> None:
    out = adapter().interpret_response(answer(body=parts("0", "7", "0")))
    assert out.result is SubmitResult.ACCEPTED
    assert [(p.part, p.result) for p in out.parts] == [
        (1, SubmitResult.ACCEPTED), (2, SubmitResult.REJECTED), (3, SubmitResult.ACCEPTED)]
    refused = out.parts[1]
    assert refused.provider_msg_id is None
    assert refused.error is not None and "status 7 (Number Barred)" in refused.error
    # Even a transient status, once other parts went: resending would repeat them.
    throttled = adapter().interpret_response(answer(body=parts("0", "1"))).parts[1]
    assert throttled.result is SubmitResult.REJECTED


def test_parts_the_answer_counts_but_does_not_list_are_uncertain() -> None:
    body = parts("0", "0")
    body["message-count"] = "3"
    out = adapter().interpret_response(answer(body=body))
    assert [(p.part, p.result) for p in out.parts] == [
        (1, SubmitResult.ACCEPTED), (2, SubmitResult.ACCEPTED), (3, SubmitResult.UNCERTAIN)]
    assert out.error is not None and "part 3" in out.error


def test_http_429_honours_retry_after_seconds_and_date() -> None:
    out = adapter().interpret_response(answer(429, raw=b"", headers={"Retry-After": "7"}))
    assert (out.result, out.retry_after_s) == (SubmitResult.RETRY, 7.0)
    date = "Tue, 14 Nov 2023 22:13:50 GMT"  # NOW + 30 s
    out = adapter().interpret_response(answer(429, raw=b"", headers={"Retry-After": date}))
    assert (out.result, out.retry_after_s) == (SubmitResult.RETRY, 30.0)


def test_http_errors() -> None:
    a = adapter()
    assert a.interpret_response(answer(500, raw=b"oops")).result is SubmitResult.RETRY
    assert a.interpret_response(answer(503, raw=b"")).result is SubmitResult.RETRY
    assert a.interpret_response(answer(504, raw=b"")).result is SubmitResult.UNCERTAIN
    assert a.interpret_response(answer(401, raw=b"")).result is SubmitResult.REJECTED


@pytest.mark.parametrize(
    "raw",
    [
        b"<html>gateway</html>",
        b"",
        b"{}",
        b'{"messages": []}',
        b'{"messages": [{}]}',
        b'{"messages": "0"}',
        b"[1,2]",
        b'{"messages": [{"status": null}]}',
        b"\xff\xfe",
    ],
)
def test_unreadable_2xx_is_uncertain(raw: bytes) -> None:
    out = adapter().interpret_response(answer(200, raw=raw))
    assert out.result is SubmitResult.UNCERTAIN


# -- verify: published vectors -------------------------------------------------------


def get(params: dict[str, str]) -> CallbackRequest:
    return callback(f"{CB_URL}?{urlencode(params)}", method="GET")


@pytest.mark.parametrize(
    ("method", "secret", "params", "sig"),
    [
        # nexmo-python / nexmo-ruby / vonage-python test suites: MD5 hash.
        (
            "md5hash",
            "secret",
            {"a": "1", "b": "2", "timestamp": "1461605396"},
            "6af838ef94998832dbfc29020b564830",
        ),
        # vonage-python-sdk http_client tests: HMAC-SHA256 and HMAC-MD5.
        (
            "sha256",
            "signature_secret",
            {"param1": "value1", "param2": "value2", "timestamp": "1234567890"},
            "280c4320703dbc98bfa22db676655ed2acfbfe8792b062ff7622e67f1183c287",
        ),
        (
            "md5",
            "signature_secret",
            {"param1": "value1", "param2": "value2", "timestamp": "1234567890"},
            "724c2bf6ca423c36e20631b11d1c5753",
        ),
        (
            "md5",
            "signature_secret",
            {"param1": "value&1", "param2": "value=2", "timestamp": "1234567890"},
            "2bbf0abafb2c55e5af6231513896a2ac",
        ),
        (
            "md5",
            "signature_secret",
            {"param": "value", "timestamp": "1234567890"},
            "655a4d0b7f064dff438defc52b012cf5",
        ),
    ],
)
def test_published_signature_vectors(
    method: str, secret: str, params: dict[str, str], sig: str
) -> None:
    assert reference_sig(params, secret, method) == sig
    a = adapter(int(params["timestamp"]) * 1000, signature_secret=secret, signature_method=method)
    a.verify(get({**params, "sig": sig}))
    a.verify(get({**params, "sig": sig.upper()}))  # HMAC variants arrive upper-case
    with pytest.raises(AuthError):
        a.verify(get({**params, "sig": sig[:-1] + ("0" if sig[-1] != "0" else "1")}))


# -- verify: the three transports, tampering, replay -----------------------------------


@pytest.mark.parametrize("method", ["md5hash", "md5", "sha1", "sha256", "sha512"])
def test_signed_receipt_verifies_as_get_form_and_json(method: str) -> None:
    a = adapter(signature_secret="Sup3rS3cr3t", signature_method=method)
    params = signed(dlr(), "Sup3rS3cr3t", method)
    a.verify(get(params))
    form = {"content-type": "application/x-www-form-urlencoded"}
    a.verify(callback(CB_URL, body=urlencode(params).encode(), headers=form))
    body = json.dumps(params).encode()
    a.verify(callback(CB_URL, body=body, headers={"content-type": "application/json"}))


def test_json_numbers_are_signed_as_written() -> None:
    a = adapter(signature_secret="k", signature_method="sha256")
    params = signed(dlr(), "k", "sha256")
    body = json.dumps(params).replace('"0.03330000"', "0.03330000").encode()
    assert b'"price": 0.03330000' in body
    a.verify(callback(CB_URL, body=body, headers={"content-type": "application/json"}))


def test_tampered_missing_and_wrong_signatures_are_refused() -> None:
    a = adapter(signature_secret="k", signature_method="sha256")
    params = signed(dlr(), "k", "sha256")
    for bad in (
        {**params, "status": "failed"},  # tampered field
        {k: v for k, v in params.items() if k != "sig"},  # sig missing
        {**params, "sig": ""},
        {**params, "sig": reference_sig(params, "other", "sha256")},  # wrong secret
        {**params, "sig": reference_sig(params, "k", "sha1")},  # wrong method
        {**params, "extra": "field"},  # field added after signing
    ):
        with pytest.raises(AuthError):
            a.verify(get(bad))


def test_a_signed_receipt_of_any_age_is_accepted_by_default() -> None:
    a = adapter(signature_secret="k", signature_method="sha256")
    assert a.option_float("max_skew_s") == 0.0
    two_hours = signed(dlr(), "k", "sha256", ts=NOW_MS // 1000 - 7200)
    a.verify(get(two_hours))
    assert a.signed_age_s(get(two_hours)) == 7200.0
    a.verify(get(signed(dlr(), "k", "sha256", ts=NOW_MS // 1000 - 3 * 86400)))
    a.verify(get(signed(dlr(), "k", "sha256", ts=NOW_MS // 1000 + 600)))
    no_ts = dict(dlr())
    no_ts["sig"] = reference_sig(no_ts, "k", "sha256")
    a.verify(get(no_ts))
    assert a.signed_age_s(get(no_ts)) is None
    assert adapter().signed_age_s(get(dlr())) is None  # unsigned mode signs no time


def test_max_skew_s_tightens_the_window_when_set() -> None:
    a = adapter(signature_secret="k", signature_method="sha256", options={"max_skew_s": 300})
    with pytest.raises(AuthError):
        a.verify(get(signed(dlr(), "k", "sha256", ts=NOW_MS // 1000 - 301)))
    with pytest.raises(AuthError):
        a.verify(get(signed(dlr(), "k", "sha256", ts=NOW_MS // 1000 + 301)))
    a.verify(get(signed(dlr(), "k", "sha256", ts=NOW_MS // 1000 - 299)))
    no_ts = dict(dlr())
    no_ts["sig"] = reference_sig(no_ts, "k", "sha256")
    with pytest.raises(AuthError):
        a.verify(get(no_ts))


def test_unsigned_mode_checks_the_api_key() -> None:
    a = adapter()
    a.verify(get(dlr()))
    with pytest.raises(AuthError):
        a.verify(get(dlr(**{"api-key": "someone-else"})))
    no_key = {k: v for k, v in dlr().items() if k != "api-key"}
    with pytest.raises(AuthError):
        a.verify(get(no_key))


def test_unreadable_or_ambiguous_parameters_are_refused() -> None:
    a = adapter(signature_secret="k", signature_method="sha256")
    params = signed(dlr(), "k", "sha256")
    dup = urlencode(params) + "&status=failed"
    with pytest.raises(AuthError):
        a.verify(callback(f"{CB_URL}?{dup}", method="GET"))
    with pytest.raises(AuthError):
        a.verify(
            callback(
                CB_URL,
                body=b"\xff\xfe=\x00",
                headers={"content-type": "application/x-www-form-urlencoded"},
            )
        )
    with pytest.raises(AuthError):
        a.verify(
            callback(CB_URL, body=b'{"a": {"b": 1}}', headers={"content-type": "application/json"})
        )


# -- parse_reports ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "state", "final"),
    [
        ("delivered", "DELIVERED", True),
        ("expired", "EXPIRED", True),
        ("failed", "FAILED", True),
        ("rejected", "REJECTED", True),
        ("accepted", "ACCEPTED", False),
        ("buffered", "ENROUTE", False),
        ("unknown", "ENROUTE", False),
        ("deleted", "ENROUTE", False),
        ("something-new", "ENROUTE", False),
    ],
)
def test_every_status_word(word: str, state: str, final: bool) -> None:
    [rep] = adapter().parse_reports(get(dlr(status=word)))
    assert (rep.status, rep.state, rep.final) == (word, state, final)
    assert rep.ref == "01HF3Z9K2M8Q4R6T7V"
    assert rep.provider_msg_id == "0B00000127FDBC63"
    assert rep.reported_at_ms == NOW_MS
    assert rep.error_code is None  # err-code "0" is Vonage's "no error"


@pytest.mark.parametrize(("given", "stored"), [("0", None), ("000", None), ("", None),
                                               ("1", "1"), ("3", "3"), ("10", "10"),
                                               ("99", "99")])
def test_err_code_zero_is_no_error(given: str, stored: str | None) -> None:
    [rep] = adapter().parse_reports(get(dlr(status="failed", **{"err-code": given})))
    assert rep.error_code == stored


def test_receipt_in_all_three_transports_reads_the_same() -> None:
    params = dlr(status="failed", **{"err-code": "3"})
    a = adapter()
    from_get = a.parse_reports(get(params))
    form = {"content-type": "application/x-www-form-urlencoded"}
    from_form = a.parse_reports(callback(CB_URL, body=urlencode(params).encode(), headers=form))
    js = {"content-type": "application/json"}
    from_json = a.parse_reports(callback(CB_URL, body=json.dumps(params).encode(), headers=js))
    sniffed = a.parse_reports(callback(CB_URL, body=json.dumps(params).encode()))
    assert from_get == from_form == from_json == sniffed
    assert from_get[0].error_code == "3" and from_get[0].state == "FAILED"


def test_report_time_sources() -> None:
    a = adapter()
    no_stamp = {k: v for k, v in dlr().items() if k != "message-timestamp"}
    [rep] = a.parse_reports(get(no_stamp))
    assert rep.reported_at_ms == 1_699_999_980_000  # scts 2311142213: minute resolution
    odd = dlr(**{"message-timestamp": "14/11/2023 22:13"})
    assert a.parse_reports(get(odd))[0].reported_at_ms == 1_699_999_980_000
    neither = {k: v for k, v in dlr(scts="not-a-time").items() if k != "message-timestamp"}
    assert a.parse_reports(get(neither))[0].reported_at_ms == 0
    seconds_scts = {k: v for k, v in dlr(scts="231114221320").items() if k != "message-timestamp"}
    assert a.parse_reports(get(seconds_scts))[0].reported_at_ms == NOW_MS


def test_extra_fields_are_ignored_and_missing_ref_is_allowed() -> None:
    a = adapter()
    [rep] = a.parse_reports(get(dlr(**{"brand-new-field": "x"})))
    assert rep.state == "DELIVERED"
    no_ref = {k: v for k, v in dlr().items() if k != "client-ref"}
    [rep] = a.parse_reports(get(no_ref))
    assert rep.ref is None and rep.provider_msg_id == "0B00000127FDBC63"


def test_callbacks_without_a_report() -> None:
    a = adapter()
    assert a.parse_reports(get({})) == []
    inbound = {
        "msisdn": "905321234567",
        "to": "ACME",
        "messageId": "X",
        "text": "hi",
        "type": "text",
        "message-timestamp": "2023-11-14 22:13:20",
    }
    assert a.parse_reports(get(inbound)) == []


@pytest.mark.parametrize(
    ("body", "ctype"),
    [
        (b'{"status": "delivered", "messageId": ', "application/json"),  # truncated
        (b'["delivered"]', "application/json"),
        (b'{"status": ["delivered"], "messageId": "X"}', "application/json"),
        (b'{"status": {"x": 1}, "messageId": "X"}', "application/json"),
        (b'{"status": true, "messageId": "X"}', "application/json"),
        (b'{"status": "delivered", "messageId": "X", "price": NaN}', "application/json"),
        (b"status=delivered&messageId=\xff", "application/x-www-form-urlencoded"),
        (b"status=delivered&messageId=%ff", "application/x-www-form-urlencoded"),
        (b"status=delivered&status=failed&messageId=X", "application/x-www-form-urlencoded"),
        (b"status=delivered", "application/x-www-form-urlencoded"),  # nothing to match on
        (b"messageId=X&client-ref=R", "application/x-www-form-urlencoded"),  # no status
        (b"\xc3\x28", ""),
    ],
)
def test_unreadable_receipts_raise_report_parse_error(body: bytes, ctype: str) -> None:
    headers = {"content-type": ctype} if ctype else {}
    with pytest.raises(ReportParseError):
        adapter().parse_reports(callback(CB_URL, body=body, headers=headers))


def test_callback_response() -> None:
    assert adapter().callback_response() == (200, b"", "text/plain")
    assert adapter().reports_by_provider_id_only is False
    assert adapter().dedupes_on_ref is False


# -- against a real local fake of the SMS API -------------------------------------------


def fake_vonage(got: Received) -> Response:
    """Speaks the SMS API: checks credentials, throttles one ref, accepts the rest."""
    fields = dict(parse_qsl(got.body.decode()))
    if got.path != "/sms/json" or got.method != "POST":
        return Response(status_code=404)
    if (fields.get("api_key"), fields.get("api_secret")) != ("abcd1234", "s3cr3t"):
        return JSONResponse(
            {"message-count": "1", "messages": [{"status": "4", "error-text": "Bad Credentials"}]}
        )
    if fields.get("client-ref") == "THROTTLE-ME":
        return JSONResponse(
            {
                "message-count": "1",
                "messages": [{"status": "1", "error-text": "Throughput Rate Exceeded"}],
            }
        )
    return JSONResponse(
        {
            "message-count": "1",
            "messages": [
                {
                    "to": fields["to"],
                    "message-id": "0A0000001234ABCD",
                    "status": "0",
                    "remaining-balance": "3.14159265",
                    "message-price": "0.03330000",
                    "network": "28601",
                }
            ],
        }
    )


def test_against_a_local_fake_sms_api() -> None:
    with FakeProvider(fake_vonage) as fake:
        a = adapter(base_url=fake.base_url)
        out = send(a, message())
        assert (out.result, out.provider_msg_id) == (SubmitResult.ACCEPTED, "0A0000001234ABCD")
        throttled = send(a, message(ref="THROTTLE-ME"))
        assert throttled.result is SubmitResult.RETRY
        bad_key = adapter(base_url=fake.base_url, api_secret="wrong")
        assert send(bad_key, message()).result is SubmitResult.REJECTED
    first = fake.received[0]
    assert first.path == "/sms/json"
    assert first.headers["content-type"] == "application/x-www-form-urlencoded"
    fields = dict(parse_qsl(first.body.decode()))
    assert fields["client-ref"] == "01HF3Z9K2M8Q4R6T7V"
    assert fields["callback"] == CB_URL
    assert fields["to"] == "905321234567"


def test_against_a_local_fake_signed_receipt_round_trip() -> None:
    """The fake signs a receipt for what it accepted; the adapter verifies and reads it."""
    with FakeProvider(fake_vonage) as fake:
        a = adapter(base_url=fake.base_url, signature_secret="whsec", signature_method="sha512")
        assert send(a, message()).result is SubmitResult.ACCEPTED
    fields = dict(parse_qsl(fake.received[0].body.decode()))
    receipt = signed(dlr(**{"client-ref": fields["client-ref"]}), "whsec", "sha512")
    req = callback(
        fields["callback"],
        body=json.dumps(receipt).encode(),
        headers={"content-type": "application/json"},
    )
    a.verify(req)
    [rep] = a.parse_reports(req)
    assert (rep.ref, rep.state, rep.final) == ("01HF3Z9K2M8Q4R6T7V", "DELIVERED", True)


# -- limits checked at config time (MSG-7) -------------------------------------------------


def test_a_callback_url_over_100_characters_is_refused_at_config_time() -> None:
    suffix = "/callbacks/main"
    public = "https://" + "a" * (100 - len(suffix) - len("https://.example.org")) + ".example.org"
    fits = Settings(public_url=public, providers={"main": settings()})
    assert len(fits.callback_url("main")) == 100
    check_providers(fits)
    assert adapter().config_problems(fits.callback_url("main")) == []
    longer = Settings(public_url=public + "/", providers={"main": settings()})
    check_providers(longer)  # a trailing slash is not part of the callback URL
    too_long = Settings(public_url=public.replace("https://", "https://b"),
                        providers={"main": settings()})
    url = too_long.callback_url("main")
    with pytest.raises(ConfigError) as err:
        check_providers(too_long)
    message = str(err.value)
    assert "[providers.main]" in message and url in message
    assert "is 101 characters" in message and "at most 100" in message


def test_the_callback_limit_is_vonage_s_only() -> None:
    long_public = "https://" + "a" * 120 + ".example.org"
    others = {
        "sim": ProviderSettings(name="sim", kind="simulator"),
        "tw": ProviderSettings(name="tw", kind="twilio", base_url="https://api.twilio.com",
                               account_sid="AC1", auth_token="t", sender="+1"),
    }
    check_providers(Settings(public_url=long_public, providers=others))
    with pytest.raises(ConfigError, match=r"\[providers.vg\] callback URL"):
        check_providers(Settings(public_url=long_public,
                                 providers={**others, "vg": settings(name="vg")}))


def test_the_default_callback_base_counts_too() -> None:
    name = "p" * 70
    s = Settings(host="127.0.0.1", port=8080, providers={name: settings(name=name)})
    assert s.callback_url(name) == f"http://127.0.0.1:8080/callbacks/{name}"
    with pytest.raises(ConfigError, match="is 102 characters"):
        check_providers(s)
