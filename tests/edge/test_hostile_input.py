"""EDGE-3, EDGE-7 and the import fixes: hostile input gets a clear 4xx, never a 5xx.

One server for the many small cases; each asserts the status, the JSON error, and
that nothing was stored for a refused request.
"""

from __future__ import annotations

import csv
import io
import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from appliance.csv_export import spreadsheet_safe
from tests.edge.support import edge_config, signed_callback
from tests.harness import Server, create_account, db_rows, wait_for
from tests.reports.support import post_report
from tests.web.console_support import create_user, import_form, page_token, sign_in


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, httpx.Client]]:
    root = tmp_path_factory.mktemp("hostile")
    data_dir = root / "data"
    data_dir.mkdir()
    srv = Server(data_dir, config=edge_config(root / "edge.toml")).start()
    try:
        create_user(data_dir)
        with srv.client(create_account(data_dir)) as api:
            yield srv, api
    finally:
        srv.stop()


def job_count(srv: Server) -> int:
    return int(db_rows(srv.data_dir, "SELECT count(*) FROM import_jobs")[0][0])


def refused(answer: httpx.Response, status: int, error: str) -> None:
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert body["error"] == error and body["message"], body


@pytest.mark.parametrize(("body", "status", "error"), [
    (b'{"list": "x", "text": "\\ud800"}', 422, "invalid_unicode"),
    (b'{"list": "\\udfff", "text": "+905321234567"}', 422, "invalid_unicode"),
    (b'{"list": "x", "text": "+905321234567", "region": "\\ud83d"}', 422, "invalid_unicode"),
    (b'{"list": "x", "text": "1", "n": ' + b"9" * 5000 + b"}", 400, "invalid_json"),
    (b'{"list": "x", "text": "1", "n": 1e999}', 400, "invalid_json"),
    (b'{"list": "x", "text": "1", "n": NaN}', 400, "invalid_json"),
    (b'{"a":' * 5000 + b"1" + b"}" * 5000, 400, "invalid_json"),
    (b"[" * 100 + b"]" * 100, 400, "invalid_json"),
    (b'{"list": "x", "text": "\xed\xa0\x80"}', 400, "invalid_json"),  # a surrogate as bytes
    (b'\xef\xbb\xbf{"list": "x", "text": "1"}', 400, "invalid_json"),
])
def test_json_that_python_would_half_accept_is_refused(
        hostile: tuple[Server, httpx.Client], body: bytes, status: int, error: str) -> None:
    srv, api = hostile
    before = job_count(srv)
    for path in ("/api/contacts/import", "/api/messages", "/api/campaigns"):
        answer = api.post(path, content=body, headers={"Content-Type": "application/json"})
        refused(answer, status, error)
    assert job_count(srv) == before


def test_a_surrogate_pair_is_one_character_and_accepted(
        hostile: tuple[Server, httpx.Client]) -> None:
    _, api = hostile
    answer = api.post("/api/contacts/import", content=b'{"list": "emoji \\ud83d\\ude00",'
                      b' "text": "+905321234567"}', headers={"Content-Type": "application/json"})
    assert answer.status_code == 202, answer.text
    assert api.get("/api/lists/emoji \U0001f600").status_code == 200


NOT_ASCII_NUMBERS = ["²", "١", "１", "1²", "1" * 40]


@pytest.mark.parametrize("raw", NOT_ASCII_NUMBERS)
def test_numbers_in_queries_are_ascii_digits_only(hostile: tuple[Server, httpx.Client],
                                                 raw: str) -> None:
    srv, api = hostile
    for param in ("limit", "before"):
        for path in ("/api/suppressions", "/api/inbound"):
            refused(api.get(path, params={param: raw}), 422, f"invalid_{param}")
    with sign_in(srv) as console:
        # A console page ignores a number it cannot read (or says so): never a 5xx,
        # and never takes ``١`` for 1.
        for path, params in (("/lists", {"count": raw}), ("/suppressions", {"before": raw}),
                             ("/inbound", {"before": raw}), ("/messages", {"before": raw}),
                             ("/messages", {"campaign": raw})):
            answer = console.get(path, params=params)
            assert answer.status_code in (200, 422), (path, params, answer.status_code)
        page = console.get("/messages", params={"campaign": raw})
        assert "is not a campaign number" in page.text
        console.post("/import", data=import_form(page_token(console), "+905321239901\n",
                                                "digits-only")[0])
        found = re.search(r'/lists/(\d+)"', console.get("/lists").text)
        assert found
        list_id = found.group(1)
        for params in ({"after": raw}, {"contact": raw}):
            page = console.get(f"/lists/{list_id}" + ("/delete" if "contact" in params
                                                       else ""), params=params)
            assert page.status_code < 500, (params, page.status_code)
        token = page_token(console, f"/lists/{list_id}")
        for form in ({"contact": raw}, {"expected": raw}):
            answer = console.post(f"/lists/{list_id}/delete", data={"csrf_token": token,
                                                                    **form})
            assert answer.status_code in (400, 404, 409), (form, answer.status_code)
    assert db_rows(srv.data_dir, "SELECT count(*) FROM contacts c JOIN lists l"
                   " ON l.id = c.list_id WHERE l.name = 'digits-only'") == [(1,)]


@pytest.mark.parametrize("raw", ["²", "١", "１", "1²", "0x1", "-1", "+1", " 1", "1" * 40])
def test_ids_are_ascii_digits_only(hostile: tuple[Server, httpx.Client], raw: str) -> None:
    _, api = hostile
    for path in (f"/api/jobs/{raw}", f"/api/jobs/{raw}/rejects.csv",
                 f"/api/campaigns/{raw}"):
        refused(api.get(path), 404, "not_found")
    refused(api.post(f"/api/jobs/{raw}/cancel"), 404, "not_found")


def test_invalid_utf8_in_a_form_is_refused_like_text_plain(
        hostile: tuple[Server, httpx.Client]) -> None:
    srv, api = hostile
    before = job_count(srv)
    plain = api.post("/api/contacts/import?list=enc", content=b"+90532\xff1234567\n",
                     headers={"Content-Type": "text/plain"})
    refused(plain, 400, "invalid_encoding")
    url = api.post("/api/contacts/import", content=b"list=enc&text=%2B90532%FF1234567",
                   headers={"Content-Type": "application/x-www-form-urlencoded"})
    refused(url, 400, "invalid_encoding")
    raw_bytes = api.post("/api/contacts/import", content=b"list=enc\xff&text=%2B905321234567",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    refused(raw_bytes, 400, "invalid_encoding")
    boundary = "b0undary"
    multipart = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"list\"\r\n\r\n"
                 "enc\r\n"
                 f"--{boundary}\r\nContent-Disposition: form-data; name=\"text\"\r\n\r\n"
                 ).encode() + b"+90532\xff1234567\r\n" + f"--{boundary}--\r\n".encode()
    field = api.post("/api/contacts/import", content=multipart,
                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    refused(field, 400, "invalid_encoding")
    assert job_count(srv) == before
    # The same forms with valid UTF-8 are accepted, so the refusal is about the bytes.
    good = api.post("/api/contacts/import", content="list=enç&text=%2B905321234567".encode(),
                    headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert good.status_code == 202, good.text
    assert api.get("/api/lists/enç").status_code == 200

    with sign_in(srv) as console:
        data, _ = import_form(page_token(console), "+905321112233\n", "enc-console")
        fields = [(k, v.encode("utf-8")) for k, v in data.items() if k != "text"]
        body, ctype = encode_multipart([*fields, ("text", b"+90532\xff1112233\n")])
        answer = console.post("/import", content=body, headers={
            "Content-Type": ctype, "Accept": "application/json"})
        refused(answer, 400, "invalid_encoding")
    assert job_count(srv) == before + 1


def encode_multipart(fields: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    boundary = "f0rmb0undary"
    out = b""
    for name, value in fields:
        out += (f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n"
                ).encode() + value + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_an_aborted_upload_logs_no_traceback(hostile: tuple[Server, httpx.Client]) -> None:
    srv, api = hostile
    key = api.headers["Authorization"].split(" ", 1)[1]
    before = requests_with(srv, "/api/contacts/import", "400")
    for _ in range(20):
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            sock.sendall(b"POST /api/contacts/import?list=gone HTTP/1.1\r\nHost: x\r\n"
                         b"Authorization: Bearer " + key.encode() + b"\r\n"
                         b"Content-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
                         b"+905321234567\n" * 100)
    wait_for(lambda: requests_with(srv, "/api/contacts/import", "400") >= before + 20,
             10, message="the aborted uploads to be answered")
    assert api.get("/healthz").status_code == 200
    log = srv.log()
    assert "Traceback" not in log and "Exception in ASGI application" not in log
    assert 'status="500"' not in metrics(srv)


def metrics(srv: Server) -> str:
    return httpx.get(srv.url + "/metrics", timeout=5).text


def requests_with(srv: Server, route: str, status: str) -> float:
    found = re.search(rf'appliance_http_requests_total{{method="POST",'
                      rf'route="{re.escape(route)}",status="{status}"}} (\S+)', metrics(srv))
    return float(found.group(1)) if found else 0.0


def test_unknown_routes_and_methods_answer_json(hostile: tuple[Server, httpx.Client]) -> None:
    _, api = hostile
    refused(api.get("/api/nothing-here"), 404, "not_found")
    refused(api.delete("/api/jobs"), 405, "method_not_allowed")
    refused(api.get("/callbacks/nosuchprovider"), 404, "not_found")
    refused(httpx.post(api.base_url.join("/callbacks/gw"), content=b"{}",
                       headers={"X-Signature": "sha256=00"}), 401, "unauthorized")


def test_a_signed_callback_with_a_lone_surrogate_is_kept_raw(
        hostile: tuple[Server, httpx.Client]) -> None:
    srv, api = hostile
    body = b'{"ref": "A\\ud800", "status": "delivered", "reported_at": "2026-01-01T00:00:00Z"}'
    answer = post_report(api, body)
    assert answer.status_code == 200, answer.text
    rows = db_rows(srv.data_dir, "SELECT parsed, body FROM raw_reports ORDER BY id DESC LIMIT 1")
    assert rows[0][0] == 0 and bytes(rows[0][1]) == body
    assert signed_callback(api).status_code == 200


def test_csv_exports_quote_every_field_and_defuse_formulas_in_any_locale(
        hostile: tuple[Server, httpx.Client]) -> None:
    _, api = hostile
    evil = ["1;=cmd|' /C calc'!A0;", "=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)",
            "Ayşe,=1+1", "x;  \"=2+2\"", "\t=3+3", "name;+905321234567;=4+4"]
    accepted = api.post("/api/contacts/import?list=csv",
                        content=("\n".join(["+905321234567", *evil]) + "\n").encode(),
                        headers={"Content-Type": "text/plain"})
    assert accepted.status_code == 202
    job = wait_for(lambda: (j := api.get(accepted.json()["poll"]).json())["state"] == "DONE"
                   and j, 20, message="the job to finish")
    text = api.get(job["rejects_url"]).text
    lines = text.split("\r\n")
    assert lines[0] == '"line_number","line","reason"'
    for line in lines[1:-1]:
        assert line.startswith('"') and line.endswith('"'), line
    for delimiter in (",", ";", "\t"):
        for row in csv.reader(io.StringIO(text), delimiter=delimiter):
            for cell in row:
                assert not cell.lstrip(' "').startswith(("=", "+", "-", "@", "\t", "\r")), \
                    (delimiter, cell)
    rows = list(csv.reader(io.StringIO(text)))
    shown = {r[1] for r in rows[1:]}
    assert shown == {spreadsheet_safe(e) for e in evil if e != "name;+905321234567;=4+4"}
    assert "1;'=cmd|' /C calc'!A0;" in shown


def test_the_fallback_idempotency_key_covers_list_and_region(
        hostile: tuple[Server, httpx.Client]) -> None:
    _, api = hostile
    text = "+905321234567\n+905329876543\n"

    def send(list_name: str, region: str = "TR") -> httpx.Response:
        return api.post("/api/contacts/import", json={"list": list_name, "text": text,
                                                      "region": region})

    first, again = send("idem-a"), send("idem-a")
    assert first.status_code == again.status_code == 202
    assert first.json()["jobId"] == again.json()["jobId"]
    other_list = send("idem-b")
    assert other_list.status_code == 202, other_list.text
    assert other_list.json()["jobId"] != first.json()["jobId"]
    other_region = send("idem-a", "GB")
    assert other_region.status_code == 202
    assert other_region.json()["jobId"] not in (first.json()["jobId"], other_list.json()["jobId"])
    for answer in (first, other_list, other_region):
        done(api, str(answer.json()["poll"]))
    assert api.get("/api/lists/idem-b").json()["contacts"] == 2
    # A key the caller did send is still theirs to reuse wrongly.
    k1 = api.post("/api/contacts/import", json={"list": "idem-a", "text": text},
                  headers={"Idempotency-Key": "mine-1"})
    k2 = api.post("/api/contacts/import", json={"list": "idem-b", "text": text},
                  headers={"Idempotency-Key": "mine-1"})
    assert k1.status_code == 202
    refused(k2, 422, "idempotency_key_reused")
    assert "Idempotency-Key" in k2.json()["message"]


def done(api: httpx.Client, poll: str) -> None:
    wait_for(lambda: api.get(poll).json()["state"] == "DONE", 20, message=f"{poll} to finish")


def test_a_20_mb_rejected_line_is_kept_shortened_with_its_length(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    srv = Server(data_dir).start()  # the default limits: 64 MB bodies
    try:
        with srv.client(create_account(data_dir)) as api:
            long_line = b"9" * 20_000_000
            started = time.monotonic()
            accepted = api.post("/api/contacts/import?list=long",
                                content=b"+905321234567\n" + long_line + b"\n+905329876543\n",
                                headers={"Content-Type": "text/plain"})
            assert accepted.status_code == 202, accepted.text
            job = wait_for(lambda: (j := api.get(accepted.json()["poll"]).json())["state"]
                           == "DONE" and j, 60, message="the job to finish")
            assert job["inserted"] == 2 and job["rejected"] == 1
            stored = db_rows(data_dir, "SELECT length(line), line_length, reason"
                                       " FROM import_rejects")
            assert stored == [(1000, 20_000_000, "line too long")]
            rows = list(csv.reader(io.StringIO(api.get(job["rejects_url"]).text)))
            assert rows[1][1] == "9" * 1000
            assert "20000000 characters" in rows[1][2]
            assert time.monotonic() - started < 30
    finally:
        srv.stop()


def test_a_database_from_before_reject_lengths_is_migrated(tmp_path: Path) -> None:
    import apsw

    from appliance.store.schema import SCHEMA_VERSION, migrate

    path = str(tmp_path / "old.db")
    conn = apsw.Connection(path)
    conn.execute((Path(__file__).parent.parent / "store" / "schemas" / "v1.sql").read_text())
    conn.execute("PRAGMA user_version = 1;"
                 "INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0);"
                 "INSERT INTO lists (id, account_id, name, created_at) VALUES (1, 1, 'l', 0);"
                 "INSERT INTO import_jobs (id, account_id, list_id, idempotency_key,"
                 " payload_sha256, region, state, total, created_at, updated_at)"
                 " VALUES (1, 1, 1, 'k', 'd', 'TR', 'DONE', 1, 0, 0);"
                 "INSERT INTO import_rejects (job_id, line_number, line, reason)"
                 " VALUES (1, 1, 'abc', 'not a number')")
    conn.close()
    assert migrate(path) == SCHEMA_VERSION
    conn = apsw.Connection(path)
    assert conn.execute("SELECT line_length FROM import_rejects").fetchall() == [(3,)]
    conn.close()


def test_json_answers_for_json_requests_only_need_valid_input(
        hostile: tuple[Server, httpx.Client]) -> None:
    _, api = hostile
    answer = api.post("/api/messages", content=json.dumps({"to": "+905321234567",
                                                           "body": "hello"}).encode(),
                      headers={"Content-Type": "application/json"})
    assert answer.status_code == 202, answer.text


def test_the_console_import_decides_the_row_limit_while_the_form_streams(
        hostile: tuple[Server, httpx.Client]) -> None:
    srv, _ = hostile
    before = job_count(srv)
    with sign_in(srv) as console:
        data, files = import_form(page_token(console), "+905321234567\n" * 6000, "console-rows")
        answer = console.post("/import", data=data, files=files,
                              headers={"Accept": "application/json"})
    refused(answer, 413, "too_many_rows")
    assert answer.json()["at_least"] is True and answer.json()["submitted"] > 5000
    assert job_count(srv) == before
