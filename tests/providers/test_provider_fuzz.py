"""Whatever arrives, the adapters answer only in their own terms.

``parse_reports`` raises ``ReportParseError`` (or returns well-formed reports), ``verify``
raises ``AuthError``, ``interpret_response`` returns an ``Outcome``: never another
exception, whatever the bytes.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.config import ProviderSettings
from appliance.provider_kinds import build_adapter
from appliance.providers import (
    AuthError,
    CallbackRequest,
    Outcome,
    ProviderAdapter,
    ReportParseError,
)
from appliance.states import REPORTED_FINAL_STATES, REPORTED_INTERMEDIATE_STATES
from tests.providers.provider_test_support import fixed_clock

ADAPTERS: list[ProviderAdapter] = [
    build_adapter(s, now_ms=fixed_clock())
    for s in (
        ProviderSettings(
            name="v", kind="vonage", base_url="https://r.example", api_key="k", api_secret="s"
        ),
        ProviderSettings(
            name="vs",
            kind="vonage",
            base_url="https://r.example",
            api_key="k",
            api_secret="s",
            signature_secret="x",
            signature_method="sha512",
        ),
        ProviderSettings(name="sim", kind="simulator"),
        ProviderSettings(
            name="tw",
            kind="twilio",
            base_url="https://t.example",
            account_sid="AC1",
            auth_token="t",
        ),
        ProviderSettings(
            name="ib", kind="infobip", base_url="https://i.example", api_key="k", secret="s"
        ),
        ProviderSettings(name="gw", kind="http", base_url="https://g.example", secret="s"),
    )
]
STATES = REPORTED_FINAL_STATES | REPORTED_INTERMEDIATE_STATES
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

content_types = st.sampled_from(
    [
        "",
        "application/json",
        "application/x-www-form-urlencoded",
        "text/plain",
        "application/json; charset=utf-8",
        "multipart/form-data; boundary=x",
        "application/vnd+json",
    ]
)
methods = st.sampled_from(["GET", "POST", "PUT", "get", "post"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)
field_names = st.sampled_from(
    [
        "status",
        "messageId",
        "client-ref",
        "message-timestamp",
        "scts",
        "err-code",
        "api-key",
        "sig",
        "timestamp",
        "nonce",
        "text",
        "MessageStatus",
        "MessageSid",
        "SmsStatus",
        "ErrorCode",
        "results",
        "callbackData",
        "doneAt",
        "ref",
        "id",
        "reported_at",
        "groupName",
        "name",
        "error",
    ]
) | st.text(max_size=8)


# The adapters turn any failure into their own two exceptions; a bug (rather than bad
# input) would show as one of these underneath.
BUGS = (TypeError, AttributeError, KeyError, IndexError, AssertionError, NameError)


def check(adapter: ProviderAdapter, req: CallbackRequest) -> None:
    try:
        adapter.verify(req)
    except AuthError as exc:
        assert not isinstance(exc.__context__, BUGS), repr(exc.__context__)
    try:
        reports = adapter.parse_reports(req)
    except ReportParseError as exc:
        assert not isinstance(exc.__context__, BUGS), repr(exc.__context__)
        return
    for rep in reports:
        assert rep.state in STATES
        assert rep.final == (rep.state in REPORTED_FINAL_STATES)
        assert isinstance(rep.status, str) and rep.status
        assert rep.ref is not None or rep.provider_msg_id is not None
        assert isinstance(rep.reported_at_ms, int)


def request(method: str, ctype: str, query: str, body: bytes) -> CallbackRequest:
    headers = {"content-type": ctype} if ctype else {}
    url = "https://sms.example.org/callbacks/p" + (f"?{query}" if query else "")
    return CallbackRequest(method=method, url=url, query=query, headers=headers, body=body)


@FUZZ
@given(
    method=methods, ctype=content_types, query=st.text(max_size=60), body=st.binary(max_size=300)
)
def test_random_bytes(method: str, ctype: str, query: str, body: bytes) -> None:
    for adapter in ADAPTERS:
        check(adapter, request(method, ctype, query, body))


@FUZZ
@given(value=json_values, ctype=content_types)
def test_random_json(value: Any, ctype: str) -> None:
    body = json.dumps(value).encode()
    for adapter in ADAPTERS:
        check(adapter, request("POST", ctype, "", body))
        check(adapter, request("POST", ctype, "", json.dumps({"results": [value]}).encode()))


@FUZZ
@given(
    fields=st.dictionaries(field_names, st.text(max_size=20) | json_values, max_size=8),
    ctype=content_types,
    as_query=st.booleans(),
)
def test_random_fields(fields: dict[str, Any], ctype: str, as_query: bool) -> None:
    text_fields = {k: v if isinstance(v, str) else json.dumps(v) for k, v in fields.items()}
    form = urlencode(text_fields)
    for adapter in ADAPTERS:
        if as_query:
            check(adapter, request("GET", "", form, b""))
        else:
            check(adapter, request("POST", ctype, "", form.encode()))
        check(adapter, request("POST", "application/json", "", json.dumps(fields).encode()))


@FUZZ
@given(
    code=st.integers(min_value=100, max_value=599),
    body=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()),
    retry_after=st.none() | st.text(max_size=40),
)
def test_interpret_response_always_gives_an_outcome(
    code: int, body: bytes, retry_after: str | None
) -> None:
    headers = {}
    if retry_after is not None and retry_after.isprintable() and retry_after.isascii():
        headers["Retry-After"] = retry_after
    for adapter in ADAPTERS:
        out = adapter.interpret_response(httpx.Response(code, content=body, headers=headers))
        assert isinstance(out, Outcome)
        if out.retry_after_s is not None:
            assert out.retry_after_s >= 0
