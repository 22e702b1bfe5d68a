"""kill -9 in the middle of an import, again and again (the server, or its parser
process): the final table is exact."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import httpx
import pytest

from appliance.imports.parse_process import PROCESS_MIN_LINES
from appliance.imports.parser_budget import parser_processes
from tests.harness import Server, create_account, db_rows, wait_for
from tests.imports.corpus import make_corpus


def progress(data_dir: Path, job_id: int) -> int:
    return int(db_rows(data_dir, "SELECT processed FROM import_jobs WHERE id = ?", (job_id,))[0][0])


@pytest.mark.slow
@pytest.mark.usefixtures("backend")
def test_kill_9_during_import_resumes_to_the_exact_table(data_dir: Path) -> None:
    corpus = make_corpus(60_000, seed=21)
    srv = Server(data_dir, env={"APPLIANCE_IMPORT_CHUNK_LINES": "1000"}).start()
    key = create_account(data_dir)
    seen: list[int] = []
    try:
        with srv.client(key) as api:
            resp = api.post("/api/contacts/import", json={"list": "crash", "text": corpus.text()})
            assert resp.status_code == 202
            job_id = int(resp.json()["jobId"])
        # Kill right after the accept, then at growing positions while chunks commit.
        thresholds = [0, 8_000, 20_000, 31_000, 45_000, 52_000]
        for threshold in thresholds:
            if threshold:
                with srv.client(key) as api:
                    def passed(t: int = threshold) -> int | None:
                        p = int(api.get(f"/api/jobs/{job_id}").json()["processed"])
                        seen.append(p)
                        return p if p >= t else None
                    wait_for(passed, 60, interval=0.005, message=f"processed >= {threshold}")
            srv.kill9()
            on_disk = progress(data_dir, job_id)
            assert on_disk >= (seen[-1] if seen else 0), "a reported position was not durable"
            seen.append(on_disk)
            srv.restart()
        with srv.client(key) as api:
            def done() -> dict[str, int] | None:
                job = api.get(f"/api/jobs/{job_id}").json()
                seen.append(int(job["processed"]))
                return job if job["state"] == "DONE" else None
            job = wait_for(done, 120, interval=0.05, message="job to finish")
    finally:
        srv.stop()
    assert seen == sorted(seen), "processed went backwards"
    assert job["processed"] == job["total"] == corpus.total
    assert job["inserted"] == corpus.inserted
    assert job["duplicates_in_paste"] == corpus.duplicates_in_paste
    assert job["rejected"] == len(corpus.rejected_lines)
    count, distinct = db_rows(data_dir, "SELECT count(*), count(DISTINCT msisdn) FROM contacts")[0]
    assert count == distinct == len(corpus.distinct) == corpus.inserted
    rejects = db_rows(data_dir, "SELECT line_number FROM import_rejects WHERE job_id = ?"
                      " ORDER BY line_number", (job_id,))
    assert [r[0] for r in rejects] == corpus.rejected_lines


def test_second_server_on_the_same_data_dir_refuses(server: Server) -> None:
    second = Server(server.data_dir)
    with pytest.raises(AssertionError, match="in use by a running appliance"):
        second.start()
    with httpx.Client() as c:
        assert c.get(server.url + "/healthz").status_code == 200


@pytest.mark.slow
def test_the_parser_process_killed_mid_import_is_replaced_and_the_table_is_exact(
        data_dir: Path) -> None:
    corpus = make_corpus(PROCESS_MIN_LINES * 3, seed=22)
    srv = Server(data_dir, env={"APPLIANCE_IMPORT_CHUNK_LINES": "500"}).start()
    key = create_account(data_dir)
    try:
        with srv.client(key) as api:
            job_id = int(api.post("/api/contacts/import", json={
                "list": "parser", "text": corpus.text()}).json()["jobId"])
            wait_for(lambda: progress(data_dir, job_id) >= 5_000, 60, interval=0.005,
                     message="the import to be under way")
            pids = [int(json.loads(line)["pid"]) for line in srv.log().splitlines()
                    if "import parser process started" in line]
            assert len(pids) == parser_processes()
            os.kill(pids[-1], signal.SIGKILL)  # with two, the one on the odd windows
            job = wait_for(lambda: (lambda j: j if j["state"] == "DONE" else None)(
                api.get(f"/api/jobs/{job_id}").json()), 120, interval=0.05,
                message="the job to finish")
    finally:
        srv.stop()
    assert (job["processed"], job["inserted"], job["duplicates_in_paste"], job["rejected"]) == (
        corpus.total, corpus.inserted, corpus.duplicates_in_paste, len(corpus.rejected_lines))
    assert db_rows(data_dir, "SELECT count(*) FROM contacts")[0][0] == corpus.inserted
    assert "parser process ended" in srv.log()
