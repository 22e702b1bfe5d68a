"""The console's suppression and inbound pages over plain HTTP against a real server:
sign-in and CSRF, adding, uploading and removing (only after confirming), escaping,
account isolation, and the send pages' answers for a suppressed number."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from appliance.providers.http_json import body_signature
from tests.harness import Server, create_account, wait_for
from tests.web.console_support import create_user, csrf_of, page_token, sign_in

SECRET = "gw-console-secret"
KEYS: dict[str, str] = {}  # account name -> API key


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    data_dir = tmp_path_factory.mktemp("optout-console") / "data"
    data_dir.mkdir()
    KEYS["default"] = create_account(data_dir, "default")
    create_user(data_dir, "alice", "default")
    create_user(data_dir, "bob", "other")
    config = data_dir.parent / "appliance.toml"
    config.write_text(f'[providers.gw]\nkind = "http"\nbase_url = "http://127.0.0.1:9"\n'
                      f'secret = "{SECRET}"\n')
    srv = Server(data_dir, config=config).start()
    try:
        yield srv
    finally:
        srv.stop()


def db_rows(server: Server, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{server.data_dir / 'appliance.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def inbound(server: Server, msg_id: str, sender: str, text: str) -> None:
    body = json.dumps({"id": msg_id, "from": sender, "text": text}).encode()
    with server.client() as client:
        r = client.post("/inbound/gw", content=body, headers={
            "Content-Type": "application/json", "X-Signature": body_signature(body, SECRET)})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("path", ["/suppressions", "/inbound", "/suppressions/remove?msisdn=1"])
def test_the_pages_need_a_session(server: Server, path: str) -> None:
    with server.client() as anon:
        r = anon.get(path)
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")


def test_a_post_without_the_csrf_token_changes_nothing(server: Server) -> None:
    with sign_in(server) as client:
        for path, data in (("/suppressions/add", {"msisdn": "+905329100001"}),
                           ("/suppressions/import", {"text": "+905329100001"}),
                           ("/suppressions/remove", {"msisdn": "+905329100001"})):
            assert client.post(path, data=data).status_code == 403
    assert db_rows(server, "SELECT count(*) FROM suppressions WHERE msisdn = ?",
                   ("+905329100001",)) == [(0,)]


def test_add_upload_and_remove_only_after_confirming(server: Server) -> None:
    with sign_in(server) as client:
        token = page_token(client, "/suppressions")
        added = client.post("/suppressions/add", data={
            "csrf_token": token, "msisdn": "0532 910 00 02", "reason": "<b>called</b>"})
        assert added.status_code == 303
        shown = client.get(added.headers["location"])
        assert "+905329100002 is on the suppression list" in shown.text
        assert "&lt;b&gt;called&lt;/b&gt;" in shown.text and "<b>called" not in shown.text
        again = client.post("/suppressions/add", data={"csrf_token": token,
                                                      "msisdn": "+905329100002"})
        assert again.status_code == 200 and "already on the suppression list" in again.text
        bad = client.post("/suppressions/add", data={"csrf_token": token, "msisdn": "12"})
        assert bad.status_code == 422 and "not a phone number" in bad.text

        upload = client.post("/suppressions/import", data={
            "csrf_token": token, "region": "TR",
            "text": "+905329100003\nnope\n05329100004;moved away\n+905329100002\n"},
            files={"file": ("", b"")})
        assert upload.status_code == 200
        assert re.search(r"data-added>2<", upload.text)
        assert re.search(r"data-already>1<", upload.text)
        assert re.search(r"data-rejected>1<", upload.text)
        assert 'data-reject="2"' in upload.text and "letters in number" in upload.text
        file_upload = client.post("/suppressions/import", data={"csrf_token": token},
                                  files={"file": ("stop.csv", b"+905329100005,asked\n",
                                                  "text/csv")})
        assert re.search(r"data-added>1<", file_upload.text)

        found = client.get("/suppressions", params={"q": "9100004"})
        assert 'data-suppression="+905329100004"' in found.text
        assert 'data-suppression="+905329100003"' not in found.text

        review = client.get("/suppressions/remove", params={"msisdn": "+905329100004"})
        assert review.status_code == 200 and "Send to" in review.text
        assert db_rows(server, "SELECT count(*) FROM suppressions WHERE msisdn = ?",
                       ("+905329100004",)) == [(1,)]  # showing the confirmation removes nothing
        removed = client.post("/suppressions/remove", data={
            "csrf_token": csrf_of(review.text), "msisdn": "+905329100004"})
        assert removed.status_code == 303
        assert "was taken off" in client.get(removed.headers["location"]).text
        assert client.get("/suppressions/remove", params={"msisdn": "+905329100004"}
                          ).status_code == 404
    assert db_rows(server, "SELECT source FROM suppressions WHERE msisdn IN (?, ?)"
                   " ORDER BY msisdn", ("+905329100002", "+905329100003")) == [
        ("console",), ("import",)]


def test_the_inbound_page_marks_stops_and_each_account_sees_its_own(server: Server) -> None:
    with server.client(KEYS["default"]) as api:  # alice's account messaged both numbers
        for number in ("+905329200001", "+905329200002"):
            queued = api.post("/api/messages", json={"to": number, "body": "hi"})
            assert queued.status_code == 202, queued.text
    inbound(server, "c-1", "+905329200001", "STOP")
    inbound(server, "c-3", "+905329200003", "STOP")  # a number nobody messaged
    inbound(server, "c-2", "+905329200002", "<script>alert(1)</script>")
    with sign_in(server) as client:
        page = client.get("/inbound")
        assert page.status_code == 200
        stop_row = re.search(r'<tr data-inbound="\d+" data-stop>.*?</tr>', page.text, re.S)
        assert stop_row and "+905329200001" in stop_row.group(0)
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        assert "<script>alert" not in page.text
        stops = client.get("/inbound", params={"stops": "1"}).text
        assert "+905329200001" in stops and "+905329200002" not in stops
        listed = client.get("/suppressions", params={"q": "+905329200001"}).text
        assert "inbound" in listed and "message #" in listed
        remove = client.get("/suppressions/remove", params={"msisdn": "+905329200001"}).text
        assert "asked to stop" in remove
        assert "+905329200003" not in page.text  # nobody's: listed to no account
    # Bob's account never messaged them: neither listed to it nor stopped in it, but the
    # STOP nobody can place stops every account; bob's own list is his.
    with sign_in(server, "bob") as bob:
        shown = bob.get("/inbound").text
        assert "+905329200001" not in shown and "+905329200003" not in shown
        assert "+905329200001" not in bob.get("/suppressions").text
        assert "+905329200003" in bob.get("/suppressions").text
        assert "+905329100003" not in bob.get("/suppressions").text


def send_key(client: httpx.Client, index: int) -> str:
    keys: list[str] = re.findall(r'name="send_key" value="([^"]+)"', client.get("/send").text)
    return keys[index]


def test_the_send_pages_refuse_and_count_suppressed_numbers(server: Server) -> None:
    with sign_in(server) as client:
        token = page_token(client, "/suppressions")
        client.post("/suppressions/add", data={"csrf_token": token, "msisdn": "+905329300001"})
        refused = client.post("/send/message", data={
            "csrf_token": token, "send_key": send_key(client, 0), "to": "0532 930 00 01",
            "body": "hi"})
        assert refused.status_code == 409 and "on the suppression list" in refused.text
        numbers = "+905329300001\n+905329300002\n+905329300003\n"
        made = client.post("/import", data={"csrf_token": token, "list": "",
                                            "new_list": "mixed", "region": "TR",
                                            "text": numbers}, files={"file": ("", b"")})
        job = int(made.headers["location"].rsplit("/", 1)[1])
        wait_for(lambda: client.get(f"/jobs/{job}.json").json()["state"] == "DONE", 30)
        review = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": send_key(client, 1), "list": "mixed",
            "body": "hello"})
        assert review.status_code == 200
        assert 'data-suppressed="1"' in review.text
    assert db_rows(server, "SELECT count(*) FROM messages WHERE msisdn = ?",
                   ("+905329300001",)) == [(0,)]
