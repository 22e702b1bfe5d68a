"""Generic JSON gateway adapter (kind "http"): our own documented format."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
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
from appliance.providers.http_json import HttpJsonAdapter
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

CB = "https://sms.example.org/callbacks/gw"


def settings(**changes: object) -> ProviderSettings:
    base = ProviderSettings(
        name="gw",
        kind="http",
        base_url="https://gw.example.net/api/",
        api_key="gw-token",
        secret="gw-callback-key",
    )
    return changed(base, **changes)


def adapter(**changes: object) -> HttpJsonAdapter:
    return adapter_of(HttpJsonAdapter, settings(**changes))


def signed(payload: Any, key: str = "gw-callback-key") -> CallbackRequest:
    body = json.dumps(payload).encode()
    digest = hmac.new(key.encode(), body, hashlib.sha256).hexdigest()
    return callback(
        CB,
        body=body,
        headers={"content-type": "application/json", "X-Signature": f"sha256={digest}"},
    )


def rep(**changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ref": "01HF3Z9K2M8Q4R6T7V",
        "status": "delivered",
        "reported_at": "2023-11-14T22:13:20.000Z",
        "id": "gw-77",
    }
    out.update(changes)
    return out


def test_build_request() -> None:
    req = adapter().build_request(message(callback_url=CB))
    assert req.method == "POST"
    assert str(req.url) == "https://gw.example.net/api/messages"
    assert req.headers["authorization"] == "Bearer gw-token"
    assert req.headers["content-type"] == "application/json"
    assert json.loads(req.content) == {
        "ref": "01HF3Z9K2M8Q4R6T7V",
        "to": "+905321234567",
        "body": "Your code is 1234",
        "callback_url": CB,
    }
    assert "authorization" not in adapter(api_key="").build_request(message()).headers


def test_interpret_response() -> None:
    a = adapter()
    ok = a.interpret_response(httpx.Response(202, json={"id": "gw-77"}))
    assert (ok.result, ok.provider_msg_id) == (SubmitResult.ACCEPTED, "gw-77")
    assert a.interpret_response(httpx.Response(200, json={"id": 77})).provider_msg_id == "77"
    limited = a.interpret_response(httpx.Response(429, headers={"Retry-After": "4"}))
    assert (limited.result, limited.retry_after_s) == (SubmitResult.RETRY, 4.0)
    dated = a.interpret_response(
        httpx.Response(429, headers={"Retry-After": "Tue, 14 Nov 2023 22:13:21 GMT"})
    )
    assert dated.retry_after_s == 1.0
    assert a.interpret_response(httpx.Response(502)).result is SubmitResult.RETRY
    assert a.interpret_response(httpx.Response(504)).result is SubmitResult.UNCERTAIN
    assert a.interpret_response(httpx.Response(422, text="bad number")).result is (
        SubmitResult.REJECTED
    )
    for junk in (b"", b"ok", b"{}", b'{"id": ""}', b'{"id": null}', b'{"id": true}', b"[]"):
        assert a.interpret_response(httpx.Response(200, content=junk)).result is (
            SubmitResult.UNCERTAIN
        ), junk


def test_verify() -> None:
    a = adapter()
    a.verify(signed(rep()))
    good = signed(rep())
    upper = dict(
        good.headers,
        **{"x-signature": good.headers["x-signature"].upper().replace("SHA256=", "sha256=")},
    )
    a.verify(replace(good, headers=upper))
    with pytest.raises(AuthError):
        a.verify(signed(rep(), key="other"))
    with pytest.raises(AuthError):
        a.verify(replace(good, body=good.body.replace(b"delivered", b"failed")))
    with pytest.raises(AuthError):
        a.verify(replace(good, headers={"content-type": "application/json"}))
    sha1_header = {"x-signature": "sha1=" + good.headers["x-signature"].split("=", 1)[1]}
    with pytest.raises(AuthError):
        a.verify(replace(good, headers=sha1_header))
    with pytest.raises(AuthError):
        adapter(secret="").verify(good)
    adapter(secret="", signature_secret="gw-callback-key").verify(good)


@pytest.mark.parametrize(
    ("word", "state", "final"),
    [
        ("delivered", "DELIVERED", True),
        ("DELIVRD", "DELIVERED", True),
        ("failed", "FAILED", True),
        ("UNDELIV", "FAILED", True),
        ("deleted", "FAILED", True),
        ("expired", "EXPIRED", True),
        ("EXPIRED", "EXPIRED", True),
        ("rejected", "REJECTED", True),
        ("REJECTD", "REJECTED", True),
        ("accepted", "ACCEPTED", False),
        ("ACCEPTD", "ACCEPTED", False),
        ("enroute", "ENROUTE", False),
        ("sent", "ENROUTE", False),
        ("buffered", "ENROUTE", False),
        ("UNKNOWN", "ENROUTE", False),
    ],
)
def test_every_status_word(word: str, state: str, final: bool) -> None:
    [got] = adapter().parse_reports(signed(rep(status=word)))
    assert (got.status, got.state, got.final) == (word, state, final)
    assert (got.ref, got.provider_msg_id, got.reported_at_ms) == (
        "01HF3Z9K2M8Q4R6T7V",
        "gw-77",
        NOW_MS,
    )


def test_smpp_accepted_can_be_final() -> None:
    a = adapter(options={"smpp_accepted_final": True})
    [got] = a.parse_reports(signed(rep(status="ACCEPTD")))
    assert (got.state, got.final) == ("DELIVERED", True)
    [lower] = a.parse_reports(signed(rep(status="accepted")))
    assert lower.final is False  # the plain word stays intermediate


def test_lists_times_and_optional_fields() -> None:
    batch = [
        rep(ref="A", reported_at="2023-11-14T22:13:20"),
        rep(ref="B", reported_at="2023-11-15T01:13:20+03:00", id=None),
        {"ref": "C", "status": "failed", "error_code": "EC_ABSENT", "extra": [1, 2]},
    ]
    got = adapter().parse_reports(signed(batch))
    assert [r.ref for r in got] == ["A", "B", "C"]
    assert [r.reported_at_ms for r in got] == [NOW_MS, NOW_MS, 0]
    assert got[1].provider_msg_id is None
    assert got[2].error_code == "EC_ABSENT"
    assert adapter().parse_reports(signed([])) == []


@pytest.mark.parametrize(
    "payload",
    [
        rep(status="smiling"),
        rep(status=3),
        rep(status=None),
        rep(ref=5),
        rep(reported_at="last tuesday"),
        rep(reported_at=1700000000),
        rep(reported_at="1850-01-01T00:00:00Z"),
        {"status": "delivered"},
        [rep(), "x"],
        "delivered",
        42,
        rep(id=True),
        rep(error_code=30),
    ],
)
def test_unreadable_reports(payload: Any) -> None:
    with pytest.raises(ReportParseError):
        adapter().parse_reports(signed(payload))


@pytest.mark.parametrize(
    "body",
    [
        b'{"ref": "A", "status": "deliv',
        b"\xff\xff",
        b"",
        b'{"ref": "A", "status": "delivered", "n": Infinity}',
    ],
)
def test_unreadable_bodies(body: bytes) -> None:
    with pytest.raises(ReportParseError):
        adapter().parse_reports(callback(CB, body=body))


def test_against_a_local_fake_gateway() -> None:
    def fake(got: Received) -> Response:
        if got.headers.get("authorization") != "Bearer gw-token":
            return JSONResponse({"error": "unauthorized"}, 401)
        sent = json.loads(got.body)
        if sent["to"] == "+10000000000":
            return JSONResponse({"error": "invalid number"}, 422)
        return JSONResponse({"id": f"gw-{sent['ref']}"}, 202)

    with FakeProvider(fake) as server:
        a = adapter(base_url=server.base_url + "/")
        out = send(a, message(callback_url=CB))
        assert (out.result, out.provider_msg_id) == (SubmitResult.ACCEPTED, "gw-01HF3Z9K2M8Q4R6T7V")
        assert send(a, message(msisdn="+10000000000")).result is SubmitResult.REJECTED
        assert send(adapter(base_url=server.base_url, api_key="x"), message()).result is (
            SubmitResult.REJECTED
        )
    got = server.received[0]
    assert (got.method, got.path) == ("POST", "/messages")
    assert json.loads(got.body)["callback_url"] == CB
