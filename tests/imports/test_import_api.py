"""The import endpoint through a real server: accept, idempotency, limits, reports."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.harness import Server, create_account, db_rows, wait_for
from tests.imports.corpus import make_corpus, make_numbers


def wait_done(api: httpx.Client, job_id: int, timeout: float = 120) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        job: dict[str, Any] = api.get(f"/api/jobs/{job_id}").json()
        return job if job["state"] not in ("DRAFT", "RUNNING") else None

    return wait_for(done, timeout, interval=0.1, message=f"job {job_id} to finish")


def submit_text(api: httpx.Client, text: str, list_name: str = "main",
                key: str | None = None, region: str | None = None) -> httpx.Response:
    body: dict[str, Any] = {"list": list_name, "text": text}
    if region:
        body["region"] = region
    headers = {"Idempotency-Key": key} if key else {}
    return api.post("/api/contacts/import", json=body, headers=headers)


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
def test_100k_paste_gives_exact_counts_and_reject_lines(server: Server, api: httpx.Client) -> None:
    seed_numbers = make_numbers(500, seed=1)
    first = submit_text(api, "\n".join(seed_numbers))
    assert first.status_code == 202
    assert wait_done(api, first.json()["jobId"])["inserted"] == 500

    corpus = make_corpus(100_000, seed=11, existing=seed_numbers)
    payload = b"\xef\xbb\xbf" + corpus.text("\r\n").encode("utf-8")  # BOM + CRLF
    resp = api.post("/api/contacts/import?list=main&region=TR", content=payload,
                    headers={"Content-Type": "text/csv"})
    assert resp.status_code == 202, resp.text
    accepted = resp.json()
    assert accepted["total"] == corpus.total == 100_000
    assert accepted["poll"] == f"/api/jobs/{accepted['jobId']}"

    job = wait_done(api, accepted["jobId"])
    assert job["state"] == "DONE"
    assert job["processed"] == job["total"] == 100_000
    assert job["inserted"] == corpus.inserted
    assert job["duplicates_in_paste"] == corpus.duplicates_in_paste
    assert job["duplicates_in_list"] == corpus.duplicates_in_list
    assert job["duplicates"] == corpus.duplicates_in_paste + corpus.duplicates_in_list
    assert job["rejected"] == len(corpus.rejected_lines)
    assert job["blank"] == corpus.blank
    assert job["header_skipped"] == 1

    rejects = api.get(job["rejects_url"])
    assert rejects.status_code == 200
    assert rejects.headers["content-type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(rejects.text)))
    assert rows[0] == ["line_number", "line", "reason"]
    assert [int(r[0]) for r in rows[1:]] == corpus.rejected_lines
    assert all(r[2] for r in rows[1:]), "every reject has a reason"
    # Formula-looking cells come back neutralised for spreadsheets.
    formulas = [r[1] for r in rows[1:] if r[1].lstrip("'").startswith(("=", "@", "-", "+"))]
    assert formulas and all(cell.startswith("'") for cell in formulas)

    listed = api.get("/api/lists/main").json()
    assert listed["contacts"] == len(seed_numbers) + corpus.inserted
    distinct = db_rows(server.data_dir, "SELECT count(*), count(DISTINCT msisdn) FROM contacts")
    assert distinct[0][0] == distinct[0][1] == len(set(seed_numbers) | corpus.distinct)


@pytest.mark.usefixtures("backend")
def test_same_paste_same_job_and_key_reuse_is_refused(server: Server, api: httpx.Client) -> None:
    corpus = make_corpus(3000, seed=3)
    a = submit_text(api, corpus.text())
    b = submit_text(api, corpus.text())
    assert a.status_code == b.status_code == 202
    assert a.json()["jobId"] == b.json()["jobId"]
    job = wait_done(api, a.json()["jobId"])
    again = submit_text(api, corpus.text())
    assert again.json()["jobId"] == job["id"]
    assert api.get("/api/lists/main").json()["contacts"] == corpus.inserted
    assert len(api.get("/api/jobs").json()["jobs"]) == 1

    k1 = submit_text(api, "+905321111111\n", key="batch-7")
    k2 = submit_text(api, "+905321111111\n", key="batch-7")
    assert k1.status_code == k2.status_code == 202
    assert k1.json()["jobId"] == k2.json()["jobId"]
    other = submit_text(api, "+905322222222\n", key="batch-7")
    assert other.status_code == 422
    assert other.json()["error"] == "idempotency_key_reused"
    other_list = submit_text(api, "+905321111111\n", list_name="other", key="batch-7")
    assert other_list.status_code == 422
    wait_done(api, k1.json()["jobId"])
    assert api.get("/api/lists/main").json()["contacts"] == corpus.inserted + 1
    assert api.get("/api/lists/other").status_code == 404


@pytest.mark.usefixtures("backend")
def test_a_json_paste_is_stored_as_the_same_text_sent_plain(server: Server,
                                                             api: httpx.Client) -> None:
    """A JSON paste, decoded piece by piece as it arrives, stores the very bytes of its
    text: sent again as text/plain it has the same hash, so it is the same job."""
    text = "\n".join(f"+90532{i:07d},Ayşe Öztürk \"{i}\" \\ ğüş 😀" for i in range(20_000))
    body = json.dumps({"list": "names", "text": text, "region": "tr"}).encode()
    assert len(body) > 1_000_000  # arrives in many pieces
    as_json = api.post("/api/contacts/import", content=body,
                       headers={"Content-Type": "application/json"})
    assert as_json.status_code == 202, as_json.text
    assert as_json.json()["total"] == 20_000
    plain = api.post("/api/contacts/import?list=names&region=TR", content=text.encode(),
                     headers={"Content-Type": "text/plain"})
    assert plain.status_code == 202, plain.text
    assert plain.json()["jobId"] == as_json.json()["jobId"]
    stored = db_rows(server.data_dir, "SELECT content_type, body FROM import_payloads"
                     " WHERE job_id = ?", (as_json.json()["jobId"],))
    assert stored == [("text/plain", text.encode())]
    assert wait_done(api, as_json.json()["jobId"])["inserted"] == 20_000


def test_row_and_byte_limits_refuse_with_numbers_and_store_nothing(data_dir: Path) -> None:
    srv = Server(data_dir, env={"APPLIANCE_IMPORT_MAX_ROWS": "1000",
                                "APPLIANCE_IMPORT_MAX_BYTES": "200000"}).start()
    try:
        key = create_account(data_dir)
        with srv.client(key) as api:
            rows = submit_text(api, "\n".join(make_numbers(1001, seed=5)))
            assert rows.status_code == 413
            body = rows.json()
            assert body["error"] == "too_many_rows"
            assert body["limit"] == 1000 and body["submitted"] == 1001
            assert "split" in body["message"].lower()

            exact = submit_text(api, "\n".join(make_numbers(1000, seed=5)))
            assert exact.status_code == 202

            big = b"+905321234567\n" * 20_000  # 300 kB > 200 kB
            resp = api.post("/api/contacts/import?list=big", content=big,
                            headers={"Content-Type": "text/plain"})
            assert resp.status_code == 413
            assert resp.json()["error"] == "payload_too_large"
            assert resp.json()["limit"] == 200_000

            def chunks() -> Any:  # no Content-Length: decided while streaming
                for _ in range(10):  # 1,000 long lines: under the row limit, over the bytes
                    yield (b"+905321234567" + b" " * 300 + b"\n") * 100

            streamed = api.post("/api/contacts/import?list=big", content=chunks(),
                                headers={"Content-Type": "text/plain"})
            assert streamed.status_code == 413
            assert streamed.json()["error"] == "payload_too_large"
        jobs = db_rows(data_dir, "SELECT count(*) FROM import_jobs")
        assert jobs[0][0] == 1  # only the accepted one
        assert db_rows(data_dir, "SELECT count(*) FROM lists WHERE name = 'big'")[0][0] == 0
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, httpx.Client]]:
    """One server for the many malformed-body cases (each leaves nothing behind)."""
    data_dir = tmp_path_factory.mktemp("shared") / "data"
    data_dir.mkdir()
    srv = Server(data_dir).start()
    try:
        with srv.client(create_account(data_dir)) as api:
            yield srv, api
    finally:
        srv.stop()


@pytest.mark.parametrize(
    ("content_type", "body", "status", "error"),
    [
        ("application/json", b"{not json", 400, "invalid_json"),
        ("application/json", b"[1,2,3]", 400, "invalid_json"),
        ("application/json", json.dumps({"list": "x", "text": 12}).encode(), 422, "invalid_text"),
        ("application/json", json.dumps({"text": "+905321234567"}).encode(), 422, "invalid_list"),
        ("application/json", json.dumps({"list": "", "text": "1"}).encode(), 422, "invalid_list"),
        ("application/json", json.dumps({"list": "x" * 101, "text": "1"}).encode(), 422,
         "invalid_list"),
        ("application/json", json.dumps({"list": "x", "text": "+9053", "region": "XX"}).encode(),
         422, "invalid_region"),
        ("application/json", json.dumps({"list": "x", "text": ""}).encode(), 422, "empty_list"),
        ("application/json", json.dumps({"list": "x", "text": "\n"}).encode(), 422, "empty_list"),
        ("application/xml", b"<list/>", 415, "unsupported_media_type"),
        ("", b"+905321234567", 415, "unsupported_media_type"),
        ("text/plain", b"\x00\xff\xfe\x80garbage\xc3\x28", 400, "invalid_encoding"),
        ("multipart/form-data; boundary=zzz", b"--zzz\r\nbroken", 422, "invalid_text"),
        ("multipart/form-data", b"--zzz\r\nbroken", 400, "invalid_multipart"),
    ],
)
def test_malformed_bodies_get_clear_errors(shared: tuple[Server, httpx.Client],
                                           content_type: str, body: bytes, status: int,
                                           error: str) -> None:
    server, api = shared
    headers = {"Content-Type": content_type} if content_type else {}
    url = "/api/contacts/import" + ("?list=x" if content_type.startswith("text/") else "")
    resp = api.post(url, content=body, headers=headers)
    assert resp.status_code == status, resp.text
    assert resp.json()["error"] == error
    assert resp.json()["message"]
    assert db_rows(server.data_dir, "SELECT count(*) FROM import_jobs")[0][0] == 0


def test_one_line_paste_and_multipart_upload(server: Server, api: httpx.Client) -> None:
    one = submit_text(api, "0532 123 45 67", list_name="one")
    assert one.status_code == 202 and one.json()["total"] == 1
    job = wait_done(api, one.json()["jobId"])
    assert (job["inserted"], job["rejected"], job["processed"]) == (1, 0, 1)

    upload = api.post(
        "/api/contacts/import",
        data={"list": "uploaded", "region": "TR"},
        files={"file": ("list.csv", b"phone;name\r\n00905321234567;Ali\r\n+90 532 123 4567\r\n",
                        "text/csv")},
    )
    assert upload.status_code == 202, upload.text
    job = wait_done(api, upload.json()["jobId"])
    assert (job["inserted"], job["duplicates_in_paste"], job["header_skipped"]) == (1, 1, 1)
    assert api.get("/api/lists/uploaded").json()["contacts"] == 1

    big_text = "\n".join(make_numbers(80_000, seed=8))  # over 1 MB in a form field
    assert len(big_text) > 1_100_000
    as_field = api.post("/api/contacts/import", data={"list": "field", "text": big_text})
    assert as_field.status_code == 202, as_field.text
    assert as_field.json()["total"] == 80_000


def test_keys_and_accounts_are_isolated(server: Server, api: httpx.Client) -> None:
    job_id = submit_text(api, "+905321234567").json()["jobId"]
    wait_done(api, job_id)
    other_key = create_account(server.data_dir, "other")
    with server.client(other_key) as other:
        assert other.get(f"/api/jobs/{job_id}").status_code == 404
        assert other.get(f"/api/jobs/{job_id}/rejects.csv").status_code == 404
        assert other.post(f"/api/jobs/{job_id}/cancel").status_code == 404
        assert other.get("/api/lists/main").status_code == 404
        assert other.get("/api/jobs").json()["jobs"] == []
    with server.client() as anon:
        for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"},
                        {"Authorization": "Bearer " + "x" * 5000}):
            resp = anon.get(f"/api/jobs/{job_id}", headers=headers)
            assert resp.status_code == 401
            assert resp.json()["error"] == "unauthorized"
        resp = anon.post("/api/contacts/import", json={"list": "x", "text": "+905321234567"})
        assert resp.status_code == 401
    assert api.get("/api/jobs/999999").status_code == 404
    assert api.get("/api/jobs/abc").status_code == 404


def test_cancel_stops_a_job(data_dir: Path) -> None:
    srv = Server(data_dir, env={"APPLIANCE_IMPORT_CHUNK_LINES": "50"}).start()
    try:
        key = create_account(data_dir)
        with srv.client(key) as api:
            corpus = make_corpus(60_000, seed=9)
            job_id = submit_text(api, corpus.text()).json()["jobId"]
            cancelled = api.post(f"/api/jobs/{job_id}/cancel").json()
            assert cancelled["state"] == "CANCELLED"
            stopped_at = cancelled["processed"]
            # The worker takes jobs in order: once a later job is done, the cancelled
            # one has had every chance to move.
            later = submit_text(api, "+905321234567", list_name="later").json()["jobId"]
            wait_done(api, later)
            job = api.get(f"/api/jobs/{job_id}").json()
            assert job["state"] == "CANCELLED"
            assert job["processed"] == stopped_at < 60_000
            assert api.get("/api/lists/main").json()["contacts"] <= stopped_at
    finally:
        srv.stop()
