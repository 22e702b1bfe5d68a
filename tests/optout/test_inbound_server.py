"""Inbound messages through a real server, in each provider kind's own format, signed
with the real algorithms (the Twilio and Vonage SDKs' own signing code): a STOP adds the
sender to the suppression list; a bad signature is 401 with nothing stored; an
unreadable body is kept raw and answered 2xx; a provider's retry is stored once."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import apsw
import httpx
import pytest
from twilio.request_validator import RequestValidator
from vonage_http_client import Auth

from appliance.providers.http_json import body_signature
from tests.harness import Server, create_account, free_port, wait_for
from tests.sending.support import SimulatorProcess

PUBLIC_URL = "https://sms.example.com:8443"
VG_KEY, VG_SECRET = "abcd1234", "Sup3rS3cr3tSigning"
TW_SID, TW_TOKEN = "AC" + "2" * 32, "tw-auth-token-for-tests"
IB_SECRET, GW_SECRET = "ib-secret", "gw-secret"
FORM = {"Content-Type": "application/x-www-form-urlencoded"}
JSON = {"Content-Type": "application/json"}


@dataclass
class Rig:
    server: Server
    sim: SimulatorProcess
    alpha: httpx.Client
    beta: httpx.Client
    anon: httpx.Client


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    tmp = tmp_path_factory.mktemp("inbound")
    sim = SimulatorProcess(tmp).start()
    closed = f"http://127.0.0.1:{free_port()}"
    config = tmp / "appliance.toml"
    config.write_text(f"""public_url = "{PUBLIC_URL}"

[providers.vg]
kind = "vonage"
base_url = "{closed}"
api_key = "{VG_KEY}"
api_secret = "s3cr3t"
signature_secret = "{VG_SECRET}"
signature_method = "sha256"

[providers.tw]
kind = "twilio"
base_url = "{closed}"
account_sid = "{TW_SID}"
auth_token = "{TW_TOKEN}"
sender = "+15005550006"

[providers.ib]
kind = "infobip"
base_url = "{closed}"
api_key = "k"
secret = "{IB_SECRET}"

[providers.gw]
kind = "http"
base_url = "{closed}"
secret = "{GW_SECRET}"

[providers.sim]
kind = "simulator"
base_url = "{sim.url}"
""")
    data = tmp / "data"
    data.mkdir()
    server = Server(data, config=config).start()
    a, b = create_account(data, "alpha"), create_account(data, "beta")
    try:
        with server.client(a) as alpha, server.client(b) as beta, server.client() as anon:
            yield Rig(server, sim, alpha, beta, anon)
    finally:
        server.stop()
        sim.stop()


def sent(api: httpx.Client, *numbers: str) -> None:
    """The account messages each number (queued: the providers are closed), so an
    inbound message from it is the account's."""
    for number in numbers:
        queued = api.post("/api/messages", json={"to": number, "body": "hi", "provider": "vg"})
        assert queued.status_code == 202, queued.text


def rows(rig: Rig, sql: str, *args: object) -> list[Any]:
    conn = apsw.Connection(str(rig.server.data_dir / "appliance.db"),
                           flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(5000)
    try:
        return list(conn.execute(sql, args))
    finally:
        conn.close()


# -- each kind, in its own format -------------------------------------------------------

def vonage_params(sender: str, text: str, msg_id: str, **extra: str) -> dict[str, str]:
    params = {"msisdn": sender.removeprefix("+"), "to": "447700900000", "messageId": msg_id,
              "text": text, "type": "unicode", "keyword": text.split()[0].upper(),
              "api-key": VG_KEY, "message-timestamp": "2026-01-01 12:00:05",
              "timestamp": "1767268805", "nonce": f"nonce-{msg_id}", **extra}
    sdk = Auth(api_key=VG_KEY, signature_secret=VG_SECRET, signature_method="sha256")
    params["sig"] = sdk.sign_params(dict(params))
    assert sdk.check_signature(dict(params))
    return params


class MultiDict(dict[str, str]):
    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def getall(self, name: str) -> list[str]:
        return [v for k, v in self.pairs if k == name]


def twilio_pairs(sender: str, text: str, sid: str) -> list[tuple[str, str]]:
    return [("ToCountry", "US"), ("SmsMessageSid", sid), ("NumMedia", "0"), ("SmsSid", sid),
            ("SmsStatus", "received"), ("Body", text), ("To", "+15005550006"),
            ("NumSegments", "1"), ("MessageSid", sid), ("AccountSid", TW_SID),
            ("From", sender), ("ApiVersion", "2010-04-01")]


def post_twilio(rig: Rig, pairs: list[tuple[str, str]], signed_url: str | None = None,
                token: str = TW_TOKEN) -> httpx.Response:
    seen = f"{PUBLIC_URL}/inbound/tw"
    sig = RequestValidator(token).compute_signature(signed_url or seen, MultiDict(pairs))
    return rig.anon.post("/inbound/tw", content=urlencode(pairs).encode(),
                         headers={**FORM, "X-Twilio-Signature": sig})


def infobip_body(sender: str, text: str, msg_id: str) -> bytes:
    return json.dumps({"results": [{
        "messageId": msg_id, "from": sender.removeprefix("+"), "to": "447491163443",
        "text": text, "cleanText": text, "keyword": text.split()[0].upper(),
        "receivedAt": "2026-01-01T12:00:05.000+0000", "smsCount": 1,
        "price": {"pricePerMessage": 0, "currency": "EUR"}, "callbackData": None}],
        "messageCount": 1, "pendingMessageCount": 0}).encode()


def post_gw(rig: Rig, payload: Any, secret: str = GW_SECRET) -> httpx.Response:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return rig.anon.post("/inbound/gw", content=body,
                         headers={**JSON, "X-Signature": body_signature(body, secret)})


def deliver(rig: Rig, kind: str, sender: str, text: str, msg_id: str) -> httpx.Response:
    """One inbound message as provider ``kind`` delivers it to the appliance."""
    if kind == "vonage-get":
        return rig.anon.get("/inbound/vg", params=vonage_params(sender, text, msg_id))
    if kind == "vonage-form":
        return rig.anon.post("/inbound/vg", headers=FORM,
                             content=urlencode(vonage_params(sender, text, msg_id)).encode())
    if kind == "vonage-json":
        return rig.anon.post("/inbound/vg", headers=JSON,
                             content=json.dumps(vonage_params(sender, text, msg_id)).encode())
    if kind == "twilio":
        return post_twilio(rig, twilio_pairs(sender, text, msg_id))
    if kind == "infobip":
        return rig.anon.post(f"/inbound/ib?secret={IB_SECRET}", headers=JSON,
                             content=infobip_body(sender, text, msg_id))
    if kind == "infobip-basic":
        basic = base64.b64encode(f"infobip:{IB_SECRET}".encode()).decode()
        return rig.anon.post("/inbound/ib", content=infobip_body(sender, text, msg_id),
                             headers={**JSON, "Authorization": f"Basic {basic}"})
    if kind == "http":
        return post_gw(rig, {"id": msg_id, "from": sender, "to": "ACME", "text": text,
                             "received_at": "2026-01-01T12:00:05Z"})
    assert kind == "simulator"
    answer = httpx.post(rig.sim.url + "/_sim/inbound", timeout=30, json={
        "from": sender, "text": text, "message_id": msg_id,
        "url": f"{rig.server.url}/inbound/sim"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["statuses"] == [200]
    return answer


KINDS = ["vonage-get", "vonage-form", "vonage-json", "twilio", "infobip", "infobip-basic",
         "http", "simulator"]
STOPS = ["STOP", "İptal.", "dur", "RET ACME", "ıptal", "Stop!", "IPTAL", "ret"]


@pytest.mark.parametrize(("kind", "text"), list(zip(KINDS, STOPS, strict=True)))
def test_a_stop_through_each_kind_adds_the_number(rig: Rig, kind: str, text: str) -> None:
    sender = f"+9053280{KINDS.index(kind):05d}"
    answer = deliver(rig, kind, sender, text, f"MO-{kind}-1")
    if kind == "twilio":
        assert answer.status_code == 200
        assert answer.headers["content-type"].startswith("text/xml")
        assert "<Response></Response>" in answer.text
    else:
        assert answer.status_code == 200, answer.text
    [(inbound_id, got_text, keyword)] = rows(
        rig, "SELECT id, text, keyword FROM inbound_messages WHERE msisdn = ?", sender)
    assert got_text == text and keyword in ("STOP", "IPTAL", "DUR", "RET")
    for api in (rig.alpha, rig.beta):  # nobody sent to it: every account stops
        [entry] = api.get("/api/suppressions", params={"msisdn": sender}).json()["suppressions"]
        assert entry["source"] == "inbound" and entry["inbound_id"] == inbound_id
        assert f"inbound message {entry['inbound_id']}" in entry["reason"]
        assert entry["reason"].startswith(keyword)
        # ... and none lists it: it is no account's to read.
        assert api.get("/api/inbound", params={"msisdn": sender}).json()["inbound"] == []
        refused = api.post("/api/messages", json={"to": sender, "body": "hello again"})
        assert refused.status_code == 409


@pytest.mark.parametrize("kind", KINDS)
def test_an_ordinary_message_is_stored_and_suppresses_nothing(rig: Rig, kind: str) -> None:
    sender = f"+9053281{KINDS.index(kind):05d}"
    sent(rig.alpha, sender)
    assert deliver(rig, kind, sender, "Merhaba, yarın arar mısınız?",
                   f"MO-{kind}-2").status_code == 200
    [got] = rig.alpha.get("/api/inbound", params={"msisdn": sender}).json()["inbound"]
    assert (got["text"], got["stop"], got["keyword"]) == ("Merhaba, yarın arar mısınız?",
                                                         False, None)
    assert rig.alpha.get("/api/suppressions", params={"msisdn": sender}).json()["total"] == 0
    assert rig.beta.get("/api/inbound", params={"msisdn": sender}).json()["inbound"] == []


def counts(rig: Rig) -> tuple[int, int, int]:
    [(raw, inbound, supp)] = rows(rig, "SELECT (SELECT count(*) FROM raw_inbound),"
                                  " (SELECT count(*) FROM inbound_messages),"
                                  " (SELECT count(*) FROM suppressions)")
    return int(raw), int(inbound), int(supp)


def test_a_bad_signature_is_401_and_nothing_is_stored(rig: Rig) -> None:
    before = counts(rig)
    sender = "+905328200001"
    forged = {**vonage_params(sender, "STOP", "MO-forged"), "msisdn": "905328299999"}
    assert rig.anon.get("/inbound/vg", params=forged).status_code == 401
    unsigned = vonage_params(sender, "STOP", "MO-unsigned")
    del unsigned["sig"]
    assert rig.anon.get("/inbound/vg", params=unsigned).status_code == 401
    assert post_twilio(rig, twilio_pairs(sender, "STOP", "SMforged"), token="wrong"
                       ).status_code == 401
    assert post_twilio(rig, twilio_pairs(sender, "STOP", "SMother"),
                       signed_url=f"{PUBLIC_URL}/inbound/other").status_code == 401
    assert rig.anon.post("/inbound/ib?secret=nope", headers=JSON,
                         content=infobip_body(sender, "STOP", "IB-f")).status_code == 401
    assert rig.anon.post("/inbound/ib", headers=JSON,
                         content=infobip_body(sender, "STOP", "IB-f")).status_code == 401
    assert post_gw(rig, {"id": "g", "from": sender, "text": "STOP"}, secret="nope"
                   ).status_code == 401
    assert rig.anon.post("/inbound/gw", headers=JSON, content=b'{"id": "g"}').status_code == 401
    assert counts(rig) == before
    assert rig.anon.post("/inbound/nobody", content=b"x").status_code == 404


def test_every_refusal_is_json_like_the_rest_of_the_api(rig: Rig) -> None:
    def refused(answer: httpx.Response, status: int, error: str) -> None:
        assert answer.status_code == status, answer.text
        assert answer.headers["content-type"].startswith("application/json")
        assert answer.json()["error"] == error and answer.json()["message"]

    refused(rig.anon.post("/inbound/gw", headers=JSON, content=b'{"id": "g"}'),
            401, "unauthorized")
    refused(rig.anon.post("/inbound/nobody", content=b"x"), 404, "not_found")
    refused(rig.anon.post("/inbound/gw", headers=JSON, content=b"x" * (300 * 1024)),
            413, "payload_too_large")


def test_an_unreadable_inbound_is_kept_raw_and_answered_2xx(rig: Rig) -> None:
    raw_before, inbound_before, supp_before = counts(rig)
    bodies = [b'{"id": 7, "from": "+905328200002"}', b"[1, 2]", b"not json at all",
              b'{"id": "x", "from": "+905328200002", "text": "STOP", "received_at": "soon"}']
    for body in bodies:
        assert post_gw(rig, body).status_code == 200
    receipt = {k: v for k, v in vonage_params("+905328200002", "STOP", "x").items()
               if k not in ("text", "type", "keyword", "sig")}
    receipt.update({"status": "delivered", "client-ref": "R1"})
    sdk = Auth(api_key=VG_KEY, signature_secret=VG_SECRET, signature_method="sha256")
    receipt["sig"] = sdk.sign_params(dict(receipt))
    assert rig.anon.get("/inbound/vg", params=receipt).status_code == 200
    status_cb = [("MessageSid", "SM9"), ("MessageStatus", "delivered"), ("From", "+1500")]
    assert post_twilio(rig, status_cb).status_code == 200
    raw, inbound, supp = counts(rig)
    assert (raw - raw_before, inbound, supp) == (len(bodies) + 2, inbound_before, supp_before)
    kept = rows(rig, "SELECT provider, parsed, error, body FROM raw_inbound ORDER BY id DESC"
                     " LIMIT ?", len(bodies) + 2)
    assert all(parsed == 0 and error for _, parsed, error, _ in kept)
    assert {bytes(b) for p, _, _, b in kept if p == "gw"} == set(bodies)
    text = rig.anon.get("/metrics").text
    assert 'appliance_raw_inbound{result="quarantined"}' in text


def test_a_providers_retry_is_stored_once(rig: Rig) -> None:
    sender = "+905328200003"
    for kind, msg_id in (("vonage-form", "MO-dup-vg"), ("twilio", "SMdup"),
                         ("infobip", "IB-dup"), ("http", "gw-dup")):
        for _ in range(3):
            assert deliver(rig, kind, sender, "STOP", msg_id).status_code == 200
    found = rows(rig, "SELECT provider, repeats FROM inbound_messages WHERE msisdn = ?"
                      " ORDER BY provider", sender)
    assert found == [("gw", 2), ("ib", 2), ("tw", 2), ("vg", 2)]
    entries = rig.alpha.get("/api/suppressions", params={"msisdn": sender}).json()
    assert entries["total"] == 1  # the first STOP added it; the others found it there


def test_a_stop_binds_the_accounts_that_sent_to_the_number(rig: Rig) -> None:
    sender, stranger = "+905328300001", "+905328300002"
    queued = rig.alpha.post("/api/messages", json={"to": sender, "body": "hi",
                                                   "provider": "vg"})
    assert queued.status_code == 202
    assert deliver(rig, "vonage-get", sender, "STOP", "MO-owned").status_code == 200
    assert rig.alpha.get("/api/suppressions", params={"msisdn": sender}).json()["total"] == 1
    assert rig.beta.get("/api/suppressions", params={"msisdn": sender}).json()["total"] == 0
    assert len(rig.alpha.get("/api/inbound", params={"msisdn": sender}).json()["inbound"]) == 1
    assert rig.beta.get("/api/inbound", params={"msisdn": sender}).json()["inbound"] == []
    # The message queued before the STOP is cancelled at its next claim, never sent.
    ref = queued.json()["ref"]
    cancelled = wait_for(lambda: (m := rig.alpha.get(f"/api/messages/{ref}").json())[
        "state"] == "CANCELLED" and m, 30, message="the queued message to be cancelled")
    assert cancelled["error"] == "suppressed"
    # Through another provider it is still alpha's alone (failover changes the provider).
    assert deliver(rig, "http", sender, "STOP", "gw-owned").status_code == 200
    assert len(rig.alpha.get("/api/inbound", params={"msisdn": sender}).json()["inbound"]) == 2
    assert rig.beta.get("/api/inbound", params={"msisdn": sender}).json()["inbound"] == []
    assert rig.beta.get("/api/suppressions", params={"msisdn": sender}).json()["total"] == 0
    assert deliver(rig, "vonage-get", stranger, "DUR", "MO-stranger").status_code == 200
    for api in (rig.alpha, rig.beta):
        assert api.get("/api/suppressions", params={"msisdn": stranger}).json()["total"] == 1


def test_a_message_in_parts_is_one_message(rig: Rig) -> None:
    sender = "+905328400001"
    sent(rig.alpha, sender, "+905328400002")
    parts = ["Merhaba, bu mesaj ", "üç parça halinde ", "geliyor."]
    for n in (3, 1, 2, 1):  # out of order, and a part repeated
        params = vonage_params(sender, parts[n - 1], f"MO-part-{n}", concat="true", **{
            "concat-ref": "A7", "concat-total": "3", "concat-part": str(n)})
        assert rig.anon.get("/inbound/vg", params=params).status_code == 200
        if n == 3:
            [waiting] = rig.alpha.get("/api/inbound", params={"msisdn": sender}
                                      ).json()["inbound"]
            assert (waiting["parts_received"], waiting["parts"]) == (1, 3)
            assert waiting["text"] == "[…][…]geliyor."
    [got] = rig.alpha.get("/api/inbound", params={"msisdn": sender}).json()["inbound"]
    assert (got["text"], got["parts"], got["parts_received"], got["repeats"]) == (
        "".join(parts), 3, 3, 1)
    split = httpx.post(rig.sim.url + "/_sim/inbound", timeout=30, json={
        "from": "+905328400002", "text": "İP TAL değil, uzun bir mesaj", "parts": 2,
        "url": f"{rig.server.url}/inbound/sim"}).json()
    assert split["statuses"] == [200, 200]
    [whole] = rig.alpha.get("/api/inbound", params={"msisdn": "+905328400002"}
                            ).json()["inbound"]
    assert whole["text"] == "İP TAL değil, uzun bir mesaj" and whole["stop"] is False


def test_inbound_is_listed_newest_first_in_pages_and_counted(rig: Rig) -> None:
    sender, stopper = "+905328500001", "+905328500002"
    sent(rig.alpha, sender, stopper)
    assert post_gw(rig, {"id": "page-stop", "from": stopper, "text": "STOP"}).status_code == 200
    for i in range(5):
        assert post_gw(rig, {"id": f"page-{i}", "from": sender, "text": f"m{i}"}
                       ).status_code == 200
    texts: list[str] = []
    url: str | None = f"/api/inbound?msisdn={sender}&limit=2"
    while url:
        page = rig.alpha.get(url).json()
        assert page["total"] == 5
        texts += [m["text"] for m in page["inbound"]]
        url = page["next"]
    assert texts == ["m4", "m3", "m2", "m1", "m0"]
    stops = rig.alpha.get("/api/inbound", params={"stops": "1"}).json()
    assert stops["inbound"] and all(m["stop"] for m in stops["inbound"])
    metrics = rig.anon.get("/metrics").text
    [(total, stopped)] = rows(rig, "SELECT count(*), count(keyword) FROM inbound_messages")
    assert f"appliance_inbound_messages {float(total)}" in metrics
    assert f"appliance_inbound_stops {float(stopped)}" in metrics


def test_inbound_is_listed_and_stops_only_in_the_accounts_that_sent_to_the_number(
        rig: Rig) -> None:
    mine, theirs, nobodys = "+905328600001", "+905328600002", "+905328600003"
    sent(rig.alpha, mine)
    sent(rig.beta, theirs)
    for sender, msg_id in ((mine, "iso-1"), (theirs, "iso-2"), (nobodys, "iso-3")):
        # Through another provider than the one sent through: the number is what counts.
        assert post_gw(rig, {"id": msg_id, "from": sender, "text": "STOP"}).status_code == 200

    def listed(api: httpx.Client) -> list[str]:
        return sorted(m["from"] for m in api.get("/api/inbound", params={"limit": 1000}).json()[
            "inbound"] if m["from"] in (mine, theirs, nobodys))

    def stopped(api: httpx.Client) -> list[str]:
        return sorted(n for n in (mine, theirs, nobodys) if api.get(
            "/api/suppressions", params={"msisdn": n}).json()["total"])

    assert listed(rig.alpha) == [mine] and listed(rig.beta) == [theirs]
    assert stopped(rig.alpha) == [mine, nobodys] and stopped(rig.beta) == [theirs, nobodys]
    assert rig.alpha.get("/api/inbound", params={"msisdn": theirs}).json()["total"] == 0
    assert rows(rig, "SELECT count(*) FROM inbound_accounts a JOIN inbound_messages m"
                     " ON m.id = a.inbound_id WHERE m.msisdn = ?", nobodys) == [(0,)]
