"""The messages and campaigns API: validation, idempotency, isolation, authentication."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.harness import Server, create_account, free_port, wait_for
from tests.sending.support import provider_config


@pytest.fixture(scope="module")
def sending_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # The provider points at a closed port: accepted messages wait in RETRY, never sent.
    tmp_path = tmp_path_factory.mktemp("api")
    data = tmp_path / "data"
    data.mkdir()
    cfg = provider_config(tmp_path / "cfg.toml", f"http://127.0.0.1:{free_port()}",
                          sending="max_body_chars = 50")
    srv = Server(data, config=cfg).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def two_clients(sending_server: Server) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    a = create_account(sending_server.data_dir, "alpha")
    b = create_account(sending_server.data_dir, "beta")
    with sending_server.client(a) as ca, sending_server.client(b) as cb:
        yield ca, cb


def test_message_accepted_with_our_ref_and_normalised_number(
        two_clients: tuple[httpx.Client, httpx.Client]) -> None:
    api, _ = two_clients
    r = api.post("/api/messages", json={"to": "0532 123 45 67", "body": "hi"})
    assert r.status_code == 202
    ref = r.json()["ref"]
    assert len(ref) == 26 and r.json()["state"] == "QUEUED"
    shown = api.get(f"/api/messages/{ref}").json()
    assert shown["to"] == "+905321234567"
    assert shown["provider"] == "sim"
    assert shown["history"] == []
    assert shown["created_at"].endswith("Z")
    found = api.get("/api/messages", params={"msisdn": "+90 532 123 4567"}).json()
    assert [m["ref"] for m in found["messages"]] == [ref]


@pytest.mark.parametrize("payload,error", [
    ({"to": "12", "body": "hi"}, "invalid_to"),
    ({"to": "0532 123 45 67 ext 12", "body": "hi"}, "invalid_to"),
    ({"to": "not a number", "body": "hi"}, "invalid_to"),
    ({"to": 905321234567, "body": "hi"}, "invalid_to"),
    ({"to": ["+905321234567"], "body": "hi"}, "invalid_to"),
    ({"to": "+905321234567" * 10, "body": "hi"}, "invalid_to"),
    ({"body": "hi"}, "invalid_to"),
    ({"to": "+905321234567", "body": ""}, "invalid_body"),
    ({"to": "+905321234567", "body": "   "}, "invalid_body"),
    ({"to": "+905321234567", "body": 42}, "invalid_body"),
    ({"to": "+905321234567", "body": None}, "invalid_body"),
    ({"to": "+905321234567"}, "invalid_body"),
    ({"to": "+905321234567", "body": "x" * 51}, "body_too_long"),
    ({"to": "+905321234567", "body": "hi", "provider": "nope"}, "unknown_provider"),
    ({"to": "+905321234567", "body": "hi", "provider": 3}, "unknown_provider"),
])
def test_invalid_messages_are_refused_with_the_reason(
        two_clients: tuple[httpx.Client, httpx.Client], payload: dict[str, object],
        error: str) -> None:
    api, _ = two_clients
    r = api.post("/api/messages", json=payload)
    assert r.status_code == 422, r.text
    assert r.json()["error"] == error
    assert r.json()["message"]


@pytest.mark.parametrize("content,ctype,status", [
    (b"{not json", "application/json", 400),
    (b"[1, 2]", "application/json", 400),
    (b'"just a string"', "application/json", 400),
    (b"\xff\xfe\x00garbage", "application/json", 400),
    (b"[" * 100_000 + b"]" * 100_000, "application/json", 413),
    (b'{"to": "+905321234567", "body": "' + b"x" * 70_000 + b'"}', "application/json", 413),
    (b"to=%2B905321234567&body=hi", "application/x-www-form-urlencoded", 415),
    (b"[" * 5000 + b"]" * 5000, "application/json", 400),
])
def test_garbage_bodies_are_4xx_never_5xx(two_clients: tuple[httpx.Client, httpx.Client],
                                          content: bytes, ctype: str, status: int) -> None:
    api, _ = two_clients
    r = api.post("/api/messages", content=content, headers={"Content-Type": ctype})
    assert r.status_code == status, r.text
    r = api.post("/api/campaigns", content=content, headers={"Content-Type": ctype})
    assert r.status_code == status, r.text


def test_idempotency_key_gives_the_same_message(
        two_clients: tuple[httpx.Client, httpx.Client]) -> None:
    api, other = two_clients
    payload = {"to": "+905321234500", "body": "once"}
    first = api.post("/api/messages", json=payload, headers={"Idempotency-Key": "k1"})
    again = api.post("/api/messages", json={"to": "0532 123 45 00", "body": "once"},
                     headers={"Idempotency-Key": "k1"})
    assert first.status_code == again.status_code == 202
    assert first.json()["ref"] == again.json()["ref"]
    changed = api.post("/api/messages", json={"to": "+905321234500", "body": "twice"},
                       headers={"Idempotency-Key": "k1"})
    assert changed.status_code == 422
    assert changed.json()["error"] == "idempotency_key_reused"
    # Keys belong to an account: the same key elsewhere is a different message.
    theirs = other.post("/api/messages", json=payload, headers={"Idempotency-Key": "k1"})
    assert theirs.status_code == 202 and theirs.json()["ref"] != first.json()["ref"]
    listed = api.get("/api/messages", params={"msisdn": "+905321234500"}).json()["messages"]
    assert len(listed) == 1
    bad = api.post("/api/messages", json=payload, headers={"Idempotency-Key": "x" * 201})
    assert bad.status_code == 400


def test_other_accounts_cannot_see_messages_or_campaigns(
        sending_server: Server, two_clients: tuple[httpx.Client, httpx.Client]) -> None:
    api, other = two_clients
    ref = api.post("/api/messages", json={"to": "+905321234501", "body": "mine"}).json()["ref"]
    assert other.get(f"/api/messages/{ref}").status_code == 404
    assert other.get("/api/messages", params={"msisdn": "+905321234501"}).json()[
        "messages"] == []
    assert api.get(f"/api/messages/{ref.lower()}").status_code == 200
    for bad in ("nope", "0" * 26, "../../etc", "%00", "A" * 500):
        assert api.get(f"/api/messages/{bad}").status_code == 404
    r = api.post("/api/contacts/import", json={"list": "l", "text": "+905321234567\n"})
    assert r.status_code == 202
    wait_for(lambda: api.get(r.json()["poll"]).json()["state"] == "DONE", 30)
    c = api.post("/api/campaigns", json={"list": "l", "body": "b"})
    assert c.status_code == 202
    cid = c.json()["campaignId"]
    assert api.get(f"/api/campaigns/{cid}").status_code == 200
    assert other.get(f"/api/campaigns/{cid}").status_code == 404
    assert cid not in [c["id"] for c in other.get("/api/campaigns").json()["campaigns"]]
    # Another account's list name is not a list of theirs.
    assert other.post("/api/campaigns", json={"list": "l", "body": "b"}).status_code == 422


def test_missing_or_wrong_key_is_401(sending_server: Server) -> None:
    with httpx.Client(base_url=sending_server.url) as anon:
        for method, path in (("POST", "/api/messages"), ("GET", "/api/messages/X"),
                             ("GET", "/api/messages?msisdn=1"), ("POST", "/api/campaigns"),
                             ("GET", "/api/campaigns"), ("GET", "/api/campaigns/1")):
            assert anon.request(method, path).status_code == 401
            wrong = anon.request(method, path, headers={"Authorization": "Bearer apl_wrong"})
            assert wrong.status_code == 401
            basic = anon.request(method, path, headers={"Authorization": "Basic eDp5"})
            assert basic.status_code == 401


def test_campaign_validation_and_idempotency(
        two_clients: tuple[httpx.Client, httpx.Client]) -> None:
    api, _ = two_clients
    r = api.post("/api/contacts/import",
                 json={"list": "friends", "text": "+905321234567\n+905321234568\n"})
    wait_for(lambda: api.get(r.json()["poll"]).json()["state"] == "DONE", 30)
    for payload, error in (({"list": "nobody", "body": "b"}, "unknown_list"),
                           ({"list": 5, "body": "b"}, "invalid_list"),
                           ({"body": "b"}, "invalid_list"),
                           ({"list": "friends", "body": ""}, "invalid_body"),
                           ({"list": "friends", "body": "y" * 51}, "body_too_long"),
                           ({"list": "friends", "body": "b", "provider": "x"},
                            "unknown_provider")):
        bad = api.post("/api/campaigns", json=payload)
        assert bad.status_code == 422 and bad.json()["error"] == error, bad.text
    first = api.post("/api/campaigns", json={"list": "friends", "body": "b"},
                     headers={"Idempotency-Key": "c"})
    again = api.post("/api/campaigns", json={"list": "friends", "body": "b"},
                     headers={"Idempotency-Key": "c"})
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()
    assert first.json()["total"] == 2
    other = api.post("/api/campaigns", json={"list": "friends", "body": "c"},
                     headers={"Idempotency-Key": "c"})
    assert other.status_code == 422
    poll = first.json()["poll"]
    shown = wait_for(lambda: (d := api.get(poll).json())["created"] == 2 and d, 30)
    assert shown["total"] == 2 and shown["state"] == "RUNNING"
    assert sum(shown["counts"].values()) == 2
    listed_ids = [c["id"] for c in api.get("/api/campaigns").json()["campaigns"]]
    assert listed_ids.count(first.json()["campaignId"]) == 1
