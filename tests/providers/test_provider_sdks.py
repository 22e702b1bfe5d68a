"""MSG-5: every report that the provider's own SDK calls genuine is accepted and applied.

Signed here with the SDKs' own code (twilio-python's ``RequestValidator``, the Vonage
SDK's ``vonage_http_client.Auth``), checked with their own validators, then posted to a
real ``appliance serve`` whose callback URL has a non-default port.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode, urlsplit, urlunsplit

import apsw
import httpx
import pytest
from twilio.request_validator import RequestValidator
from vonage_http_client import Auth

from appliance.config import ProviderSettings
from appliance.provider_kinds import build_adapter
from appliance.providers import AuthError
from tests.harness import Server
from tests.providers.provider_test_support import callback, fixed_clock
from tests.reports.support import add_account, add_message, inbox_rows, message

PUBLIC_URL = "https://sms.example.com:8443"
TW_TOKEN = "12345-auth-token"
TW_SID = "AC" + "0" * 32
VG_SECRET = "Sup3rS3cr3tSigning"
VG_KEY = "abcd1234"
FORM = {"content-type": "application/x-www-form-urlencoded"}


class MultiDict(dict[str, str]):
    """What Flask hands twilio-python for a form with repeated names (``getall``)."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def getall(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]


def tw_fields(sid: str = "SM1f0e8ae6ade43cb3c0ce4525424e404f", status: str = "delivered"
              ) -> list[tuple[str, str]]:
    return [("AccountSid", TW_SID), ("ApiVersion", "2010-04-01"), ("From", "+15005550006"),
            ("MessageSid", sid), ("MessageStatus", status), ("SmsSid", sid),
            ("SmsStatus", status), ("To", "+905321234567")]


# -- the adapter accepts exactly what RequestValidator.validate() accepts ----------------

SEEN = [
    "https://sms.example.com/callbacks/tw?ref=R",
    "https://sms.example.com:443/callbacks/tw?ref=R",
    "https://sms.example.com:8443/callbacks/tw?ref=R",
    "http://127.0.0.1/callbacks/tw?ref=R",
    "http://127.0.0.1:80/callbacks/tw?ref=R",
    "http://127.0.0.1:8080/callbacks/tw?ref=R&tenant=7",
]


def signing_forms(url: str) -> list[str]:
    """Ways a URL may have been signed: right (with/without port) and wrong."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    forms = {url, urlunsplit(parts._replace(netloc=host))}
    for port in (80, 443, 8443, 8444):
        forms.add(urlunsplit(parts._replace(netloc=f"{host}:{port}")))
    forms.add(url.replace("/callbacks/tw", "/callbacks/other"))
    forms.add(url.replace("ref=R", "ref=S"))
    return sorted(forms)


PARAM_SETS = {
    "plain": tw_fields(),
    "repeated": [*tw_fields(), ("MessageStatus", "delivered"), ("Tag", "b"), ("Tag", "a"),
                 ("Tag", "b")],
}


@pytest.mark.parametrize("seen", SEEN)
@pytest.mark.parametrize("params", sorted(PARAM_SETS))
def test_twilio_adapter_accepts_what_request_validator_accepts(seen: str, params: str) -> None:
    pairs = PARAM_SETS[params]
    sdk = RequestValidator(TW_TOKEN)
    adapter = build_adapter(ProviderSettings(
        name="tw", kind="twilio", base_url="https://api.twilio.com", sender="+15005550006",
        account_sid=TW_SID, auth_token=TW_TOKEN), now_ms=fixed_clock())
    body = urlencode(pairs).encode()
    accepted_by_sdk = 0
    for signed_url in signing_forms(seen):
        sig = sdk.compute_signature(signed_url, MultiDict(pairs))
        genuine = sdk.validate(seen, MultiDict(pairs), sig)
        accepted_by_sdk += genuine
        req = callback(seen, body=body, headers={**FORM, "X-Twilio-Signature": sig})
        if genuine:
            adapter.verify(req)
            [rep] = adapter.parse_reports(req)
            assert (rep.ref, rep.state) == ("R", "DELIVERED")
        else:
            with pytest.raises(AuthError):
                adapter.verify(req)
    assert accepted_by_sdk == 2  # with and without the port


@pytest.mark.parametrize("method", ["md5", "sha1", "sha256", "sha512"])
def test_vonage_adapter_accepts_what_the_vonage_sdk_signs(method: Any) -> None:
    sdk = Auth(api_key=VG_KEY, signature_secret=VG_SECRET, signature_method=method)
    adapter = build_adapter(ProviderSettings(
        name="vg", kind="vonage", base_url="https://rest.nexmo.com", api_key=VG_KEY,
        api_secret="s", signature_secret=VG_SECRET, signature_method=method),
        now_ms=fixed_clock(int(time.time() * 1000)))
    params = vonage_receipt("R-vg", "delivered", int(time.time()) - 7200)
    params["sig"] = sdk.sign_params(dict(params))
    assert sdk.check_signature(dict(params))
    url = f"https://sms.example.com/callbacks/vg?{urlencode(params)}"
    adapter.verify(callback(url, method="GET"))
    adapter.verify(callback(url[: url.index("?")], body=urlencode(params).encode(),
                            headers=FORM))
    tampered = {**params, "status": "failed"}
    assert not sdk.check_signature(dict(tampered))
    with pytest.raises(AuthError):
        adapter.verify(callback(f"https://sms.example.com/callbacks/vg?{urlencode(tampered)}",
                                method="GET"))


def vonage_receipt(ref: str, status: str, timestamp: int) -> dict[str, str]:
    """A delivery receipt as Vonage sends it (signed fields added by the caller)."""
    return {
        "msisdn": "905321234567", "to": "ACME", "network-code": "28601",
        "messageId": "0A0000001234567B", "price": "0.03330000", "status": status,
        "scts": "2601011200", "err-code": "0", "api-key": VG_KEY,
        "message-timestamp": "2026-01-01 12:00:05", "client-ref": ref,
        "timestamp": str(timestamp), "nonce": "6e9c1b4a-1c0e-4a3e-9a43-3b8ea2bd3a11",
    }


# -- against a real server ---------------------------------------------------------------


@pytest.fixture(scope="module")
def field_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("sdks")
    (root / "data").mkdir()
    config = root / "appliance.toml"
    config.write_text(f"""public_url = "{PUBLIC_URL}"

[providers.tw]
kind = "twilio"
base_url = "http://127.0.0.1:9"
account_sid = "{TW_SID}"
auth_token = "{TW_TOKEN}"
sender = "+15005550006"

[providers.vg]
kind = "vonage"
base_url = "http://127.0.0.1:9"
api_key = "{VG_KEY}"
api_secret = "s3cr3t"
signature_secret = "{VG_SECRET}"
signature_method = "sha256"
""")
    srv = Server(root / "data", config=config).start()
    try:
        conn = db(srv)
        with conn:
            add_account(conn)
        conn.close()
        yield srv
    finally:
        srv.stop()


def db(server: Server) -> apsw.Connection:
    conn = apsw.Connection(str(server.data_dir / "appliance.db"))
    conn.set_busy_timeout(30000)  # beside a live writer on a busy machine
    return conn


def submitted(server: Server, ref: str, provider: str) -> None:
    """A message the sender handed to ``provider`` (committed from another process)."""
    conn = db(server)
    try:
        # IMMEDIATE: a read-then-write transaction beside the live writer would get
        # SQLITE_BUSY (snapshot out of date) at once, whatever the busy timeout.
        conn.execute("BEGIN IMMEDIATE")
        row = conn.execute("SELECT min(id) FROM accounts").fetchone()
        assert row is not None
        add_message(conn, int(row[0]), ref, provider=provider)
        conn.execute("COMMIT")
    finally:
        conn.close()


def state(server: Server, ref: str) -> str:
    conn = db(server)
    try:
        return str(message(conn, ref)["state"])
    finally:
        conn.close()


def post_twilio(server: Server, ref: str, sign_url: str, pairs: list[tuple[str, str]]
                ) -> httpx.Response:
    seen = f"{PUBLIC_URL}/callbacks/tw?ref={ref}"
    sdk = RequestValidator(TW_TOKEN)
    sig = sdk.compute_signature(sign_url, MultiDict(pairs))
    assert sdk.validate(seen, MultiDict(pairs), sig), "the SDK itself calls this genuine"
    with server.client() as client:
        return client.post(f"/callbacks/tw?ref={ref}", content=urlencode(pairs).encode(),
                           headers={**FORM, "X-Twilio-Signature": sig})


@pytest.mark.parametrize("form", ["with_port", "without_port", "repeated_params"])
def test_twilio_reports_the_sdk_calls_genuine_are_applied(field_server: Server, form: str
                                                          ) -> None:
    ref = f"TW-{form}"
    submitted(field_server, ref, "tw")
    host = "sms.example.com" if form == "without_port" else "sms.example.com:8443"
    pairs = tw_fields()
    if form == "repeated_params":
        pairs = [*pairs, ("MessageStatus", "delivered"), ("ChannelPrefix", "sms"),
                 ("ChannelPrefix", "sms")]
    response = post_twilio(field_server, ref, f"https://{host}/callbacks/tw?ref={ref}", pairs)
    assert response.status_code == 204, response.text
    assert state(field_server, ref) == "DELIVERED"


def test_twilio_json_body_signed_with_body_sha256_is_accepted(field_server: Server) -> None:
    body = json.dumps({"MessageSid": "SM1", "MessageStatus": "delivered"})
    query = f"ref=TW-json&bodySHA256={hashlib.sha256(body.encode()).hexdigest()}"
    seen = f"{PUBLIC_URL}/callbacks/tw?{query}"
    sdk = RequestValidator(TW_TOKEN)
    sig = sdk.compute_signature(seen.replace(":8443", ""), {})
    assert sdk.validate(seen, body, sig)
    assert not sdk.validate(seen, body + " ", sig)
    headers = {"content-type": "application/json", "X-Twilio-Signature": sig}
    with field_server.client() as client:
        assert client.post(f"/callbacks/tw?{query}", content=body.encode(),
                           headers=headers).status_code == 204
        assert client.post(f"/callbacks/tw?{query}", content=(body + " ").encode(),
                           headers=headers).status_code == 401


def test_a_tampered_twilio_report_is_401_and_not_applied(field_server: Server) -> None:
    ref = "TW-tampered"
    submitted(field_server, ref, "tw")
    sdk = RequestValidator(TW_TOKEN)
    seen = f"{PUBLIC_URL}/callbacks/tw?ref={ref}"
    sig = sdk.compute_signature(seen, MultiDict(tw_fields()))
    forged = tw_fields(status="undelivered")
    assert not sdk.validate(seen, MultiDict(forged), sig)
    with field_server.client() as client:
        response = client.post(f"/callbacks/tw?ref={ref}", content=urlencode(forged).encode(),
                               headers={**FORM, "X-Twilio-Signature": sig})
    assert response.status_code == 401
    assert state(field_server, ref) == "SUBMITTED"


def age_histogram(server: Server) -> tuple[float, float]:
    with server.client() as client:
        text = client.get("/metrics").text
    count = re.search(r'^appliance_signed_report_age_seconds_count\{provider="vg"\} (\S+)$',
                      text, re.M)
    total = re.search(r'^appliance_signed_report_age_seconds_sum\{provider="vg"\} (\S+)$',
                      text, re.M)
    return (float(count[1]) if count else 0.0, float(total[1]) if total else 0.0)


def test_a_vonage_report_two_hours_old_is_applied_and_its_age_measured(
        field_server: Server) -> None:
    ref = "VG-two-hours"
    submitted(field_server, ref, "vg")
    sdk = Auth(api_key=VG_KEY, signature_secret=VG_SECRET, signature_method="sha256")
    params = vonage_receipt(ref, "delivered", int(time.time()) - 7200)
    params["sig"] = sdk.sign_params(dict(params))
    before = age_histogram(field_server)
    with field_server.client() as client:
        tampered = {**params, "client-ref": "VG-other"}
        assert client.get("/callbacks/vg", params=tampered).status_code == 401
        assert client.get("/callbacks/vg", params=params).status_code == 200
    assert state(field_server, ref) == "DELIVERED"
    conn = db(field_server)
    try:
        [row] = inbox_rows(conn, ref)
    finally:
        conn.close()
    assert row["error_code"] is None  # its err-code "0" is no error
    count, total = age_histogram(field_server)
    assert count == before[0] + 1
    assert 7200 <= total - before[1] < 7200 + 120

