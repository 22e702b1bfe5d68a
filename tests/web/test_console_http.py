"""The console over plain HTTP against a real server: sessions, CSRF, escaping,
account isolation, and the import form's answers (no browser needed)."""

from __future__ import annotations

import csv
import hashlib
import html
import io
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import Server, create_account, run_cli, wait_for
from tests.web.console_support import (
    PASSWORD,
    create_user,
    csrf_of,
    import_form,
    page_token,
    sign_in,
)

PAGES = ["/", "/import", "/lists", "/jobs/1", "/jobs/1.json", "/jobs/1/rejects.csv", "/send",
         "/campaigns/1", "/dashboard", "/dashboard/figures", "/messages?q=x",
         "/messages?state=QUEUED", "/logout", "/lists/1", "/lists/1/export.csv",
         "/lists/1/delete", "/inbox", "/keys", "/keys/1/revoke"]
MAX_ROWS = 500


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    data_dir = tmp_path_factory.mktemp("console") / "data"
    data_dir.mkdir()
    key = create_account(data_dir, "default")
    create_user(data_dir, "alice", "default")
    create_user(data_dir, "bob", "other")
    config = data_dir.parent / "appliance.toml"
    # A provider nobody answers for: sends stay queued for retry, which is all these
    # tests need (what is accepted, and how often).
    config.write_text('[providers.sim]\nkind = "simulator"\nbase_url = "http://127.0.0.1:9"\n')
    srv = Server(data_dir, config=config,
                 env={"APPLIANCE_IMPORT_MAX_ROWS": str(MAX_ROWS)}).start()
    try:
        yield srv, key
    finally:
        srv.stop()


@pytest.fixture
def server(console: tuple[Server, str]) -> Server:
    return console[0]


def db_rows(server: Server, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{server.data_dir / 'appliance.db'}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def wait_job(client: httpx.Client, job_id: int) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = client.get(f"/jobs/{job_id}.json",
                                         headers={"Accept": "application/json"}).json()
        return job if job["finished"] else None

    return wait_for(done, 60, interval=0.05, message=f"job {job_id} to finish")


def submit(client: httpx.Client, text: str, list_name: str, **headers: str) -> httpx.Response:
    data, files = import_form(page_token(client), text, list_name)
    return client.post("/import", data=data, files=files, headers=headers)


@pytest.mark.parametrize("path", PAGES)
def test_a_page_without_a_session_redirects_to_sign_in(server: Server, path: str) -> None:
    with server.client() as anonymous:
        answer = anonymous.get(path)
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/login?next=/")


def test_the_poll_endpoint_without_a_session_answers_401_json(server: Server) -> None:
    with server.client() as anonymous:
        answer = anonymous.get("/jobs/1.json", headers={"Accept": "application/json"})
    assert answer.status_code == 401
    assert answer.json()["login"] == "/login"


def test_sign_in_sets_a_hardened_cookie_and_stores_only_its_hash(server: Server) -> None:
    with server.client() as client:
        form = client.get("/login")
        answer = client.post("/login", data={"csrf_token": csrf_of(form.text),
                                             "username": "alice", "password": PASSWORD})
        assert answer.status_code == 303
        cookie = next(v for k, v in answer.headers.multi_items()
                      if k == "set-cookie" and v.startswith("appliance_session="))
        token = cookie.split(";")[0].split("=", 1)[1]
    flags = cookie.lower()
    assert "httponly" in flags and "samesite=lax" in flags
    assert "secure" not in flags  # plain http on 127.0.0.1
    stored = [r[0] for r in db_rows(server, "SELECT token_hash FROM sessions")]
    assert hashlib.sha256(token.encode()).hexdigest() in stored
    assert token not in stored
    hashes = db_rows(server, "SELECT password_hash FROM users WHERE name = 'alice'")
    assert hashes[0][0].startswith("scrypt$") and PASSWORD not in hashes[0][0]


def test_wrong_password_and_unknown_user_get_the_same_answer(server: Server) -> None:
    answers = []
    for name, password in (("alice", "not the password"), ("nobody", PASSWORD)):
        with server.client() as client:
            form = client.get("/login")
            answers.append(client.post("/login", data={
                "csrf_token": csrf_of(form.text), "username": name, "password": password}))
    assert [a.status_code for a in answers] == [401, 401]
    assert all("Wrong user name or password." in a.text for a in answers)
    assert all("appliance_session=" not in a.headers.get("set-cookie", "") for a in answers)


def test_the_sign_in_form_without_its_token_is_refused(server: Server) -> None:
    with server.client() as client:
        answer = client.post("/login", data={"username": "alice", "password": PASSWORD})
    assert answer.status_code == 403
    assert "appliance_session=" not in answer.headers.get("set-cookie", "")


def test_sign_in_never_redirects_to_another_site(server: Server) -> None:
    for target in ("//evil.example/x", "https://evil.example/", "/\\evil.example"):
        with server.client() as client:
            form = client.get("/login")
            answer = client.post("/login", data={"csrf_token": csrf_of(form.text),
                                                 "username": "alice", "password": PASSWORD,
                                                 "next": target})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/"


def test_a_form_post_without_the_csrf_token_is_refused(server: Server) -> None:
    with sign_in(server) as client:
        data, files = import_form("", "+905321112233\n", "csrf-list")
        del data["csrf_token"]
        refused = client.post("/import", data=data, files=files)
        assert refused.status_code == 403
        forged = client.post("/import", data={**data, "csrf_token": "x" * 43}, files=files)
        assert forged.status_code == 403
        sent = client.post("/send/message", data={"to": "+905321112233", "body": "hi",
                                                  "send_key": "k" * 20})
        assert sent.status_code == 403
        out = client.post("/logout")
        assert out.status_code == 403
        assert client.get("/import").status_code == 200  # still signed in
    assert db_rows(server, "SELECT count(*) FROM lists WHERE name = 'csrf-list'") == [(0,)]
    assert db_rows(server, "SELECT count(*) FROM messages WHERE body = 'hi'") == [(0,)]


def test_another_sessions_csrf_token_is_refused(server: Server) -> None:
    with sign_in(server) as first, sign_in(server) as second:
        foreign = page_token(first)
        data, files = import_form(foreign, "+905321112234\n", "foreign-token")
        assert second.post("/import", data=data, files=files).status_code == 403


def test_sign_out_ends_the_session_even_for_a_copied_cookie(server: Server) -> None:
    with sign_in(server) as client:
        cookie = client.cookies["appliance_session"]
        answer = client.post("/logout", data={"csrf_token": page_token(client)})
        assert answer.status_code == 303 and answer.headers["location"] == "/login"
    with server.client(cookies={"appliance_session": cookie}) as replay:
        assert replay.get("/import").status_code == 303


def test_same_paste_twice_is_one_job_and_its_report_matches_the_api(
        console: tuple[Server, str]) -> None:
    server, key = console
    text = "\n".join(["+90 532 000 00 01", "0532 000 00 02", "05320000001", "not a number",
                      "", "=cmd|' /C calc'!A0"]) + "\n"
    with sign_in(server) as client:
        first = submit(client, text, "twice")
        assert first.status_code == 303
        job_url = first.headers["location"]
        second = submit(client, text, "twice")
        assert second.headers["location"] == job_url + "?again=1"
        job_id = int(job_url.rsplit("/", 1)[1])
        job = wait_job(client, job_id)
        assert (job["inserted"], job["duplicates_in_paste"], job["rejected"], job["blank"]) \
            == (2, 1, 2, 1)
        again = client.get(second.headers["location"])
        assert "already submitted" in again.text
        console_csv = client.get(f"/jobs/{job_id}/rejects.csv")
    assert db_rows(server, "SELECT count(*) FROM import_jobs j JOIN lists l"
                   " ON l.id = j.list_id WHERE l.name = 'twice'") == [(1,)]
    assert console_csv.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(console_csv.text)))
    assert rows[0] == ["line_number", "line", "reason"]
    assert [(r[0], r[1]) for r in rows[1:]] == [("4", "not a number"),
                                                ("6", "'=cmd|' /C calc'!A0")]
    with server.client(key) as api:
        assert api.get(f"/api/jobs/{job_id}/rejects.csv").content == console_csv.content


def test_too_many_rows_is_a_413_with_the_limit_and_what_was_sent(server: Server) -> None:
    text = "\n".join(f"+90532{i:07d}" for i in range(MAX_ROWS + 7))
    with sign_in(server) as client:
        page = submit(client, text, "too-big")
        as_json = submit(client, text, "too-big", Accept="application/json")
    assert page.status_code == 413
    assert f"{MAX_ROWS + 7:,}".replace(",", "\u2009") + " submitted" in page.text
    assert as_json.status_code == 413
    body = as_json.json()
    assert (body["error"], body["limit"], body["submitted"]) == ("too_many_rows", MAX_ROWS,
                                                                MAX_ROWS + 7)
    assert "Split the list" in body["message"]
    assert db_rows(server, "SELECT count(*) FROM lists WHERE name = 'too-big'") == [(0,)]


@pytest.mark.parametrize("text, list_name, region, status, phrase", [
    ("", "empty", "TR", 422, "the list is empty"),
    ("+905321112233", "", "TR", 422, "give the list name"),
    ("+905321112233", "x" * 101, "TR", 422, "list names are 1 to 100"),
    ("+905321112233", "bad-region", "XYZ", 422, "is not a two-letter country code"),
])
def test_bad_import_forms_are_refused_with_a_reason(server: Server, text: str, list_name: str,
                                                    region: str, status: int,
                                                    phrase: str) -> None:
    with sign_in(server) as client:
        data, files = import_form(page_token(client), text, list_name, region)
        answer = client.post("/import", data=data, files=files)
    assert answer.status_code == status
    assert phrase in answer.text


def test_a_file_upload_is_imported_and_bad_bytes_are_refused(server: Server) -> None:
    with sign_in(server) as client:
        data, _ = import_form(page_token(client), "", "from-file")
        ok = client.post("/import", data=data,
                         files={"file": ("list.csv", b"phone,name\n+905321110001,Ali\n")})
        assert ok.status_code == 303
        job = wait_job(client, int(ok.headers["location"].rsplit("/", 1)[1]))
        assert (job["inserted"], job["header_skipped"]) == (1, 1)
        bad = client.post("/import", data=data, files={"file": ("x.txt", b"\xff\xfe\xfa\x00\xc3")})
        assert bad.status_code == 400
        both = client.post("/import", data={**data, "text": "+905321110002"},
                           files={"file": ("list.csv", b"+905321110001\n")})
        assert both.status_code == 422


def test_everything_shown_is_escaped(server: Server) -> None:
    evil = "<script>alert(1)</script>"
    with sign_in(server) as client:
        created = submit(client, f"<img src=x onerror=alert(2)>\n+905321119999,{evil}\n", evil)
        assert created.status_code == 303
        wait_job(client, int(created.headers["location"].rsplit("/", 1)[1]))
        for path in ("/lists", created.headers["location"], "/import", "/send"):
            html = client.get(path).text
            assert evil not in html and "<img src=x" not in html
            if path == "/lists":
                assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
        looked_up = client.get("/messages", params={"q": evil}).text
        assert evil not in looked_up
    headers = httpx.get(server.url + "/login").headers
    assert "script-src 'self'" in headers["content-security-policy"]


def test_one_account_never_sees_anothers_jobs(server: Server) -> None:
    with sign_in(server, "alice") as alice:
        made = submit(alice, "+905321117777\n", "alice-only")
        job_url = made.headers["location"]
        wait_job(alice, int(job_url.rsplit("/", 1)[1]))
    with sign_in(server, "bob") as bob:
        assert bob.get(job_url).status_code == 404
        assert bob.get(job_url + "/rejects.csv").status_code == 404
        assert bob.get(job_url + ".json").status_code == 404
        assert "alice-only" not in bob.get("/lists").text
        assert "alice-only" not in bob.get("/send").text


@pytest.mark.parametrize("path, status", [
    ("/jobs/99999999999999999999999", 404), ("/jobs/-1", 404), ("/jobs/abc", 404),
    ("/campaigns/99999999999999999999999", 404), ("/messages?q=" + "9" * 500, 422),
    ("/messages?q=01ARZ3NDEKTSV4RRFFQ69G5FAV", 404), ("/static/../users.py", 404),
])
def test_hostile_addresses_get_a_plain_answer(server: Server, path: str, status: int) -> None:
    with sign_in(server) as client:
        assert client.get(path).status_code == status


def test_user_create_asks_for_the_password_and_refuses_bad_input(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    made = run_cli("user", "create", "carol", "--data-dir", str(data_dir),
                   input=b"a long password\na long password\n")
    assert "carol" in made.stdout and "default" in made.stdout
    again = run_cli("user", "create", "carol", "--password", "another password",
                    "--data-dir", str(data_dir), check=False)
    assert again.returncode != 0 and "already exists" in again.stderr
    short = run_cli("user", "create", "dave", "--password", "short", "--data-dir",
                    str(data_dir), check=False)
    assert short.returncode != 0 and "at least 8" in short.stderr
    mismatch = run_cli("user", "create", "erin", "--data-dir", str(data_dir), check=False,
                       input=b"one long password\nanother password\n")
    assert mismatch.returncode != 0
    conn = sqlite3.connect(data_dir / "appliance.db")
    try:
        names = [r[0] for r in conn.execute("SELECT u.name FROM users u JOIN accounts a"
                                            " ON a.id = u.account_id WHERE a.name = 'default'")]
    finally:
        conn.close()
    assert names == ["carol"]


def test_the_secure_flag_is_set_when_the_console_is_public_over_https(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    create_user(data_dir, "alice")
    server = Server(data_dir, env={"APPLIANCE_PUBLIC_URL": "https://sms.example.org"}).start()
    try:
        with server.client() as client:
            form = client.get("/login")
            sign_in_cookie = form.headers["set-cookie"]
            # A Secure cookie is not sent back over plain http: hand it over as a TLS
            # proxy in front would.
            client.cookies.clear()
            answer = client.post("/login", data={"csrf_token": csrf_of(form.text),
                                                 "username": "alice", "password": PASSWORD},
                                 headers={"Cookie": sign_in_cookie.split(";")[0]})
    finally:
        server.stop()
    assert "secure" in sign_in_cookie.lower()
    assert answer.status_code == 303
    assert "secure" in answer.headers["set-cookie"].lower()


def send_key(client: httpx.Client, index: int) -> str:
    keys: list[str] = re.findall(r'name="send_key" value="([^"]+)"', client.get("/send").text)
    return keys[index]


def test_a_send_form_posted_twice_sends_one_message(server: Server) -> None:
    with sign_in(server) as client:
        form = {"csrf_token": page_token(client, "/send"), "send_key": send_key(client, 0),
                "to": "0532 765 43 21", "body": "twice?"}
        first = client.post("/send/message", data=form)
        second = client.post("/send/message", data=form)
        assert first.status_code == second.status_code == 303
        assert first.headers["location"] == second.headers["location"]
        shown = client.get(first.headers["location"])
        assert "+905327654321" in shown.text and "Accepted" in shown.text
        bad = client.post("/send/message", data={**form, "send_key": send_key(client, 0),
                                                 "to": "not a number"})
        assert bad.status_code == 422
    assert db_rows(server, "SELECT count(*) FROM messages WHERE body = 'twice?'") == [(1,)]


def test_a_campaign_goes_out_only_as_confirmed(server: Server) -> None:
    with sign_in(server) as client:
        made = submit(client, "+905361000001\n+905361000002\n+905361000003\n", "confirm-me")
        wait_job(client, int(made.headers["location"].rsplit("/", 1)[1]))
        token = page_token(client, "/send")
        review = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": send_key(client, 1), "list": "confirm-me",
            "body": "Sale & <more>"})
        assert review.status_code == 200
        assert "This will send 3 messages" in review.text
        confirm = dict(re.findall(r'type="hidden" name="([^"]+)" value="([^"]*)"', review.text))
        confirm["body"] = "Sale & <more>"  # the browser decodes the escaped attribute
        assert confirm["expected"] == "3"

        grown = submit(client, "+905361000004\n", "confirm-me")
        wait_job(client, int(grown.headers["location"].rsplit("/", 1)[1]))
        changed = client.post("/send/campaign", data=confirm)
        assert changed.status_code == 409
        assert "Nothing was sent" in changed.text and "This will send 4 messages" in changed.text
        assert db_rows(server, "SELECT count(*) FROM campaigns") == [(0,)]

        confirm["expected"] = "4"
        sent = client.post("/send/campaign", data=confirm)
        again = client.post("/send/campaign", data=confirm)
        assert sent.status_code == again.status_code == 303
        assert sent.headers["location"] == again.headers["location"]
        progress = client.get(sent.headers["location"])
        assert progress.status_code == 200 and "confirm-me" in progress.text
        empty_list = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": send_key(client, 1), "list": "no-such-list",
            "body": "x"})
        assert empty_list.status_code == 422
    assert db_rows(server, "SELECT total, body FROM campaigns") == [(4, "Sale & <more>")]


def test_the_confirmation_states_messages_parts_and_why_ucs2(server: Server) -> None:
    turkish = "Merhaba Ayşe, kampanyamız başladı! " * 3  # 105 characters: 2 UCS-2 parts
    with sign_in(server) as client:
        made = submit(client, "+905361000101\n+905361000102\n+905361000103\n", "parts-tr")
        wait_job(client, int(made.headers["location"].rsplit("/", 1)[1]))
        token = page_token(client, "/send")
        review = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": send_key(client, 1), "list": "parts-tr",
            "body": turkish})
        assert review.status_code == 200
        assert "3 messages, 6 parts, UCS-2 because of 'ş'" in html.unescape(review.text)
        assert 'data-confirm-parts="6"' in review.text
        plain = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": send_key(client, 1), "list": "parts-tr",
            "body": "Spring sale"})
        assert "3 messages, 3 parts, GSM-7</strong>" in plain.text
        too_long = client.post("/send/campaign/confirm", data={
            "csrf_token": token, "send_key": send_key(client, 1), "list": "parts-tr",
            "body": "x" * (153 * 10 + 1)})
        assert too_long.status_code == 422 and "more than the limit of 10" in too_long.text
        sent = client.post("/send/message", data={
            "csrf_token": token, "send_key": send_key(client, 0), "to": "+905361000104",
            "body": turkish})
        shown = html.unescape(client.get(sent.headers["location"]).text)
        assert "UCS-2 (because of 'ş')" in shown
        assert re.search(r"<dt>Parts</dt><dd><small data-message-parts>2</small>", shown)


def _job_of(answer: httpx.Response) -> int:
    return int(answer.headers["location"].rsplit("/", 1)[1].split("?")[0])


def _list_id(client: httpx.Client, name: str) -> int:
    found = re.search(r'<tr data-list="' + re.escape(name) + r'"><td><a href="/lists/(\d+)"',
                      client.get("/lists").text)
    assert found, f"no list {name} on /lists"
    return int(found.group(1))


def test_a_list_is_browsed_searched_exported_and_deleted_with_its_count_stated(
        console: tuple[Server, str]) -> None:
    server, key = console
    lines = [f"+90 534 {i:03d} 00 00, Name {i}" for i in range(150)] + ["+90534999 00 00,=1+2"]
    with sign_in(server) as client:
        wait_job(client, _job_of(submit(client, "\n".join(lines), "browse-me")))
        list_id = _list_id(client, "browse-me")
        first = client.get(f"/lists/{list_id}").text
        assert first.count("<tr data-contact=") == 100 and "data-list-count>151<" in first
        after = re.search(r'href="/lists/\d+\?after=(\d+)" data-next', first)
        assert after
        rest = client.get(f"/lists/{list_id}", params={"after": after.group(1)}).text
        assert rest.count("<tr data-contact=") == 51 and "data-next" not in rest
        exact = client.get(f"/lists/{list_id}", params={"q": "0534 007 00 00"}).text
        assert re.findall(r'data-contact="([^"]+)"', exact) == ["+905340070000"]
        named = client.get(f"/lists/{list_id}", params={"q": "Name 14"}).text
        assert named.count("<tr data-contact=") == 11  # Name 14, Name 140..149

        export = client.get(f"/lists/{list_id}/export.csv")
        assert export.status_code == 200 and "attachment" in export.headers["content-disposition"]
        rows = list(csv.reader(io.StringIO(export.text)))
        assert rows[0] == ["msisdn", "name", "added_at"] and len(rows) == 152
        assert rows[-1][:2] == ["+905349990000", "'=1+2"]  # a formula name is neutralised
        assert {r[0] for r in rows[1:]} == {r[0] for r in db_rows(
            server, "SELECT msisdn FROM contacts WHERE list_id = ?", (list_id,))}

        contact = db_rows(server, "SELECT id FROM contacts WHERE list_id = ? AND msisdn ="
                                  " '+905340070000'", (list_id,))[0][0]
        ask = client.get(f"/lists/{list_id}/delete", params={"contact": contact}).text
        assert 'data-delete-count="1"' in ask and "+905340070000" in ask
        token = csrf_of(ask)
        gone = client.post(f"/lists/{list_id}/delete", data={"csrf_token": token,
                                                             "contact": str(contact)})
        assert gone.status_code == 303 and gone.headers["location"].endswith("deleted=1")

        ask = client.get(f"/lists/{list_id}/delete").text
        assert 'data-delete-count="150"' in ask and "its 150 contacts" in ask
        stale = client.post(f"/lists/{list_id}/delete", data={"csrf_token": token,
                                                              "expected": "151"})
        assert stale.status_code == 409 and "Nothing was deleted" in stale.text
        assert db_rows(server, "SELECT count(*) FROM contacts WHERE list_id = ?",
                       (list_id,)) == [(150,)]
        with sign_in(server, "bob") as bob:
            assert bob.get(f"/lists/{list_id}").status_code == 404
            assert bob.post(f"/lists/{list_id}/delete", data={
                "csrf_token": page_token(bob, "/lists"), "expected": "150"}).status_code == 404
        done = client.post(f"/lists/{list_id}/delete", data={"csrf_token": token,
                                                             "expected": "150"})
        assert done.status_code == 303
        after_delete = client.get(done.headers["location"]).text
        assert "Deleted the list browse-me and its 150 contacts" in after_delete
        assert 'data-list="browse-me"' not in after_delete
        assert client.get(f"/lists/{list_id}").status_code == 404
    assert db_rows(server, "SELECT count(*) FROM contacts WHERE list_id = ?", (list_id,)) == [
        (0,)]
    with server.client(key) as api:
        assert api.get("/api/lists/browse-me").status_code == 404


def test_the_keys_page_shows_a_new_key_once_and_a_revoked_key_is_refused_at_once(
        server: Server) -> None:
    with sign_in(server) as client:
        made = client.post("/keys", data={"csrf_token": page_token(client, "/keys")})
        assert made.status_code == 201
        key = re.search(r"data-new-key>(apl_[^<]+)<", made.text)
        assert key
        new_key = key.group(1)
        listing = client.get("/keys").text
        assert new_key not in listing and new_key[:8] in listing
        with server.client(new_key) as api:
            assert api.get("/api/jobs").status_code == 200
            key_id = re.search(r'<tr data-key="' + re.escape(new_key[:8])
                               + r'">.*?href="/keys/(\d+)/revoke"', listing, re.S)
            assert key_id
            with sign_in(server, "bob") as bob:
                assert bob.get(f"/keys/{key_id.group(1)}/revoke").status_code == 404
            ask = client.get(f"/keys/{key_id.group(1)}/revoke")
            assert "refused" in ask.text
            done = client.post(f"/keys/{key_id.group(1)}/revoke",
                               data={"csrf_token": csrf_of(ask.text)})
            assert done.status_code == 303
            assert api.get("/api/jobs").status_code == 401  # the very next request
        assert "REVOKED" in client.get("/keys").text


def test_messages_are_filtered_by_provider_campaign_and_time(console: tuple[Server, str]) -> None:
    server, key = console
    with server.client(key) as api:
        refs = [api.post("/api/messages", json={"to": f"+90535111000{i}", "body": "filter me"}
                         ).json()["ref"] for i in range(3)]
    with sign_in(server) as client:
        def listed(**params: str) -> list[str]:
            page = client.get("/messages", params=params)
            assert page.status_code == 200, page.text
            return re.findall(r'<tr data-message="([^"]+)"', page.text)

        everything = listed()
        assert set(refs) <= set(everything)
        assert set(refs) <= set(listed(provider="sim", **{"from": "2000-01-01T00:00"}))
        assert not set(refs) & set(listed(provider="other"))
        assert not set(refs) & set(listed(**{"to": "2000-01-01T00:00"}))
        assert not set(refs) & set(listed(campaign="999999"))
        assert not set(refs) & set(listed(state="DELIVERED"))
        assert client.get("/messages", params={"state": "bogus"}).status_code == 422
        assert client.get("/messages", params={"from": "yesterday"}).status_code == 422
    with sign_in(server, "bob") as bob:
        assert not set(refs) & set(re.findall(r'data-message="([^"]+)"',
                                             bob.get("/messages").text))


def test_the_inbox_page_lists_reports_waiting_for_their_message(server: Server) -> None:
    import time as _time

    from appliance.simulator.behaviour import Behaviour
    from appliance.simulator.server import Simulator

    receipt = Simulator(Behaviour())._receipt("905321234567", "INBOX-PAGE-REF", "ABC123",
                                              "delivered", _time.time())
    with server.client() as provider:  # the simulator's own signed Vonage receipt
        assert provider.post("/callbacks/sim", data=receipt).status_code == 200
    with sign_in(server) as client:
        page = client.get("/inbox").text
        assert 'data-waiting="INBOX-PAGE-REF"' in page and "ABC123" in page
        assert 'data-provider="sim"' in page
        assert 'data-waiting="INBOX-PAGE-REF"' in client.get(
            "/inbox", params={"provider": "sim", "order": "newest"}).text


def test_the_import_preview_reads_the_first_lines_and_stores_nothing(server: Server) -> None:
    text = "phone,name\n0532 123 45 67,Ayşe\nnot a number\n"
    with sign_in(server) as client:
        data, files = import_form(page_token(client), text, "preview-only")
        shown = client.post("/import/preview", data=data, files=files,
                            headers={"Accept": "application/json"}).json()
        assert [(r["outcome"], r["msisdn"]) for r in shown["rows"]] == [
            ("header", None), ("ok", "+905321234567"), ("rejected", None)]
        assert shown["rows"][1]["cells"] == ["0532 123 45 67", "Ayşe"]
        page = client.post("/import/preview", data=data, files=files)  # without a script
        assert page.status_code == 200 and "rejected: " in page.text
        assert "0532 123 45 67,Ayşe" in page.text  # the pasted text is kept in the form
        upload = client.post("/import/preview", data={**data, "text": "", "partial": "1"},
                             files={"file": ("big.csv", b"+905321234567\n+9053212")},
                             headers={"Accept": "application/json"}).json()
        assert [r["msisdn"] for r in upload["rows"]] == ["+905321234567"]  # a cut line: left
    assert db_rows(server, "SELECT count(*) FROM lists WHERE name = 'preview-only'") == [(0,)]


def test_a_finished_job_runs_again_from_its_page(server: Server) -> None:
    with sign_in(server) as client:
        job_id = _job_of(submit(client, "+905361110001\n+905361110002\n", "rerun-src"))
        wait_job(client, job_id)
        page = client.get(f"/jobs/{job_id}").text
        form = dict(re.findall(r'type="hidden" name="([^"]+)" value="([^"]*)"',
                               page.split("data-rerun-form")[1]))
        form.update({"list": "rerun-src", "new_list": "rerun-copy"})
        first = client.post(f"/jobs/{job_id}/rerun", data=form)
        second = client.post(f"/jobs/{job_id}/rerun", data=form)  # a double click
        assert first.status_code == second.status_code == 303
        assert first.headers["location"] == second.headers["location"]
        copy = wait_job(client, _job_of(first))
        assert (copy["list"], copy["inserted"], copy["rerun_of"]) == ("rerun-copy", 2, job_id)
        assert f"re-run of <a href=\"/jobs/{job_id}\"" in client.get(
            first.headers["location"]).text
        with sign_in(server, "bob") as bob:
            refused = bob.post(f"/jobs/{job_id}/rerun", data={
                **form, "csrf_token": page_token(bob)})
            assert refused.status_code == 404


def test_a_list_export_quotes_every_field_and_defuses_formulas_in_any_locale(
        server: Server) -> None:
    """EDGE-7 for the list export: a name that a `;`-separated spreadsheet would split
    into a formula cell comes out with every piece defused, every field quoted."""
    lines = ["+905349980001,\"x;=cmd|' /C calc'!A0\"", "+905349980002,@SUM(A1),ok"]
    with sign_in(server) as client:
        wait_job(client, _job_of(submit(client, "\n".join(lines), "export-safe")))
        export = client.get(f"/lists/{_list_id(client, 'export-safe')}/export.csv").text
    body = export.splitlines()[1:]
    assert all(line.startswith('"') and line.endswith('"') for line in body), body
    names = {r[0]: r[1] for r in csv.reader(io.StringIO(export)) if r[0].startswith("+")}
    assert names["+905349980001"] == "x;'=cmd|' /C calc'!A0"
    assert names["+905349980002"].startswith("'@")
    for name in names.values():  # split as a `;` or `,` locale would: no piece a formula
        for piece in re.split(r"[,;\t]", name):
            assert not piece.lstrip(" \"").startswith(("=", "+", "-", "@")), name
