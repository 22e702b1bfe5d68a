"""EDGE-3: whatever a client sends to whichever route, no answer is a 5xx.

A property-based test (hypothesis) against one real server: every route the app
serves (taken from the app itself, so a new route is fuzzed too), any method, odd
path parameters, query strings, headers, content types and bodies (random bytes,
and JSON with lone surrogates, huge numbers, deep nesting), with and without an API
key, a console session and its CSRF token, a valid callback signature. Every answer
must be under 500, and a refusal on ``/api/*`` (and any JSON refusal) must be
``{"error", "message"}``. Afterwards the server's log must hold no traceback. The
budget is bounded (a few hundred requests, a few seconds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from starlette.routing import Mount, Route

from appliance.providers.http_json import body_signature
from appliance.web.app import all_routes
from tests.edge.support import edge_config
from tests.harness import Server, create_account
from tests.reports.support import PROVIDER, SECRET
from tests.web.console_support import create_user, page_token, sign_in

EXAMPLES = 200  # over every route
WRITE_EXAMPLES = 150  # over the routes that read a body, with valid credentials
_PARAM = re.compile(r"{([^}:]+)(?::[^}]+)?}")


def route_table() -> list[tuple[str, list[str]]]:
    table: list[tuple[str, list[str]]] = []
    for route in all_routes():
        if isinstance(route, Route):
            table.append((route.path, sorted(route.methods or {"GET"})))
        elif isinstance(route, Mount):
            table.append((route.path + "/{path}", ["GET"]))
    return table


ROUTES = route_table()
LIKELY = {"provider": PROVIDER, "job_id": "1", "campaign_id": "1", "name": "main",
          "ref": "A" * 16, "path": "console.css", "list_id": "1", "msisdn": "%2B905321234567"}
# Every route that reads a body, with values that reach its real work (taken from the
# app, so a new form or API route is fuzzed with valid credentials too).
WRITE_ROUTES = sorted({(m, _PARAM.sub(lambda p: LIKELY.get(p.group(1), "1"), path))
                       for path, methods in ROUTES for m in methods
                       if m in ("POST", "PUT", "DELETE", "PATCH") and path != "/logout"})


@dataclass
class Target:
    srv: Server
    key: str
    console: httpx.Client
    csrf: str


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    root = tmp_path_factory.mktemp("fuzz")
    data_dir = root / "data"
    data_dir.mkdir()
    srv = Server(data_dir, config=edge_config(root / "edge.toml")).start()
    try:
        key = create_account(data_dir, "default")
        create_user(data_dir)
        with srv.client(key) as api:
            api.post("/api/contacts/import?list=main", content=b"+905321234567\n",
                     headers={"Content-Type": "text/plain"})
        with sign_in(srv) as console:
            yield Target(srv, key, console, page_token(console))
    finally:
        srv.stop()


no_surrogates = st.characters(blacklist_categories=["Cs"])
odd_ids = st.sampled_from(["1", "0", "²", "١", "１", "9" * 30, "-1", "1.5", "..", "%2e%2e",
                           " ", "main", "ＡＢＣ", "\u202e1", "1;DROP TABLE x", "00000000001",
                           PROVIDER, "nosuch", "A" * 16, "console.css"])
param_values = st.one_of(odd_ids, st.text(no_surrogates, min_size=1, max_size=30))
FIELDS = ["list", "text", "region", "to", "body", "provider", "username", "password", "next",
          "new_list", "send_key", "expected", "ref", "status", "reported_at", "id", "q",
          "msisdn", "reason", "contact", "action"]
# What the routes read from a query string: paging, filters, counts.
QUERY_NAMES = [*FIELDS, "limit", "before", "after", "count", "campaign", "state", "from",
               "stops", "order", "sent", "deleted", "dry_run"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.text(no_surrogates, max_size=40),
    st.sampled_from(["+905321234567", "\ufeff+90 532", "=1+1", "TR", "gw", "x" * 1100]))
json_values = st.recursive(
    scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                     st.dictionaries(st.sampled_from(FIELDS), inner,
                                                     max_size=5)), max_leaves=12)
NASTY_JSON = [b'{"text": "\\ud800", "list": "x"}', b'{"list": "\\udfff"}',
              b'{"to": "+905321234567", "body": "\\ud83d"}', b'{"n": ' + b"7" * 5000 + b"}",
              b'{"n": 1e400}', b"[" * 3000 + b"]" * 3000, b'{"a":' * 900 + b"1" + b"}" * 900,
              b"NaN", b'{"text": -Infinity}', b"\xed\xa0\x80", b'"\xff\xfe"', b"",
              b'{"ref": "A\\ud800B", "status": "delivered"}']


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["json", "json", "nasty", "nasty", "bytes", "form", "none"]))
    if kind == "json":
        return json.dumps(draw(json_values), ensure_ascii=draw(st.booleans())).encode()
    if kind == "nasty":
        return draw(st.sampled_from(NASTY_JSON))
    if kind == "bytes":
        return draw(st.binary(max_size=600))
    if kind == "form":
        pairs = draw(st.lists(st.tuples(st.sampled_from(FIELDS), st.binary(max_size=40)),
                              max_size=6))
        return b"&".join(quote(k).encode() + b"=" + v.replace(b"&", b"%26") for k, v in pairs)
    return b""


CONTENT_TYPES = ["application/json", "application/json", "text/plain", "text/csv",
                 "application/xml", "", "application/x-www-form-urlencoded",
                 "multipart/form-data; boundary=zz", "multipart/form-data",
                 "application/json; charset=latin-1", "text/plain; x"]


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    query: dict[str, str]
    body: bytes
    content_type: str
    auth: str
    session: bool
    csrf: bool
    signed: bool
    idempotency: str | None
    accept: str


@st.composite
def cases(draw: st.DrawFn) -> Case:
    template, methods = draw(st.sampled_from(ROUTES))

    def value(m: re.Match[str]) -> str:
        likely = LIKELY.get(m.group(1))
        if likely is not None and draw(st.booleans()):
            return likely  # half the time a value that reaches the handler's real work
        return quote(draw(param_values), safe="")

    path = _PARAM.sub(value, template)
    method = draw(st.sampled_from(methods)) if draw(st.integers(0, 9)) else draw(
        st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]))
    query = draw(st.dictionaries(st.sampled_from(QUERY_NAMES), param_values, max_size=3))
    return Case(
        method=method, path=path, query=query, body=draw(bodies()),
        content_type=draw(st.sampled_from(CONTENT_TYPES)),
        auth=draw(st.sampled_from(["key", "key", "key", "none", "garbage", "basic"])),
        session=draw(st.booleans()) and path != "/logout",
        csrf=draw(st.booleans()), signed=draw(st.booleans()),
        # Any value a client can put on the wire: latin-1 without DEL, and no space at
        # either end (HTTP strips those; the client refuses to send them).
        idempotency=draw(st.one_of(st.none(), st.text(st.characters(
            min_codepoint=32, max_codepoint=255, exclude_characters="\x7f"),
            max_size=30).map(lambda key: key.strip(" ")))),
        accept=draw(st.sampled_from(["application/json", "text/html", "*/*"])),
    )


@st.composite
def write_cases(draw: st.DrawFn) -> Case:
    method, path = draw(st.sampled_from(WRITE_ROUTES))
    query = draw(st.dictionaries(st.sampled_from(["list", "region"]),
                                 st.text(no_surrogates, max_size=20), max_size=2))
    return Case(method=method, path=path, query=query, body=draw(bodies()),
                content_type=draw(st.sampled_from(CONTENT_TYPES)), auth="key",
                session=True, csrf=True, signed=True,
                idempotency=draw(st.one_of(st.none(), st.sampled_from(["k1", "k2"]))),
                accept=draw(st.sampled_from(["application/json", "text/html"])))


def send(t: Target, case: Case) -> httpx.Response:
    headers: dict[bytes, bytes] = {b"Accept": case.accept.encode()}
    if case.content_type:
        headers[b"Content-Type"] = case.content_type.encode()
    if case.auth == "key":
        headers[b"Authorization"] = f"Bearer {t.key}".encode()
    elif case.auth == "garbage":
        headers[b"Authorization"] = b"Bearer " + b"x" * 300
    elif case.auth == "basic":
        headers[b"Authorization"] = b"Basic Zm9vOmJhcg=="
    if case.idempotency is not None:
        headers[b"Idempotency-Key"] = case.idempotency.encode("latin-1")
    if case.signed:
        headers[b"X-Signature"] = body_signature(case.body, SECRET).encode()
    body = case.body
    if case.csrf:
        headers[b"X-CSRF-Token"] = t.csrf.encode()
    cookies = dict(t.console.cookies) if case.session else {}
    with httpx.Client(base_url=t.srv.url, cookies=cookies, timeout=20) as client:
        return client.request(case.method, case.path, params=case.query, content=body,
                              headers=headers)


def check(answer: httpx.Response, case: Case) -> None:
    assert answer.status_code < 500, (case, answer.status_code, answer.text[:300])
    is_json = answer.headers.get("content-type", "").startswith("application/json")
    if answer.status_code >= 400 and (case.path.startswith("/api/") or is_json):
        assert is_json, (case, answer.status_code, answer.text[:300])
        if case.method == "HEAD":
            return
        body: Any = answer.json()
        assert isinstance(body.get("error"), str) and isinstance(body.get("message"), str), \
            (case, body)


@settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(case=cases())
def test_no_input_on_any_route_gets_a_5xx(target: Target, case: Case) -> None:
    check(send(target, case), case)


@settings(max_examples=WRITE_EXAMPLES, deadline=None, database=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(case=write_cases())
def test_no_body_sent_to_a_write_route_gets_a_5xx(target: Target, case: Case) -> None:
    check(send(target, case), case)


def test_after_the_fuzzing_the_log_holds_no_traceback(target: Target) -> None:
    log = target.srv.log()
    for sign in ("Traceback", "Exception in ASGI application", "unexpected error"):
        assert sign not in log, log[log.find(sign) - 2000:log.find(sign) + 500]
    assert target.console.get("/healthz").status_code == 200
