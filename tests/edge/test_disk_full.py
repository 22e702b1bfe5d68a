"""EDGE-4: a full disk, on a real 30 MB filesystem (tmpfs) under the data dir.

Below the reserve, imports and campaigns are refused ``503 storage_full`` while
callbacks and single messages still store and ``/readyz`` says why; with no space at
all, every write path answers ``503`` JSON with ``Retry-After`` and acknowledges
nothing it did not store; once space is freed, everything works again without a
restart. Mounting needs root (CI runs as root); elsewhere the test is skipped.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.edge.support import edge_config, signed_callback
from tests.harness import Server, create_account, db_rows, free_port, wait_for
from tests.web.console_support import create_user, sign_in

RESERVE = 8 * 1024 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "data"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a 30 MB tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=30m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def free(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def fill(path: Path, leave: int) -> None:
    """Write ballast until ``leave`` bytes are free (0: until the disk refuses)."""
    with open(path, "ab") as fh:
        while True:
            room = free(path.parent) - leave
            if room <= 0:
                break
            try:
                fh.write(b"\0" * min(room, 1 << 20))
                fh.flush()
            except OSError:
                break


def storage_refusal(answer: httpx.Response, error: str) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"] == error and answer.json()["message"]
    assert int(answer.headers["Retry-After"]) > 0


def test_a_full_disk_is_503_json_everywhere_and_recovers_without_a_restart(
        small_disk: Path, tmp_path: Path) -> None:
    srv = Server(small_disk, config=edge_config(tmp_path / "edge.toml", min_free_bytes=RESERVE))
    srv.start()
    try:
        key = create_account(small_disk)
        create_user(small_disk)
        with srv.client(key) as api, sign_in(srv) as console:
            assert api.get("/readyz").status_code == 200
            seed = api.post("/api/contacts/import?list=base", content=b"+905321234567\n",
                            headers={"Content-Type": "text/plain"})
            assert seed.status_code == 202
            wait_for(lambda: api.get(seed.json()["poll"]).json()["state"] == "DONE", 20)

            # 1. Under the reserve: the big writes wait, the small ones still store.
            ballast = small_disk / "ballast"
            fill(ballast, RESERVE // 2)
            ready = api.get("/readyz")
            assert ready.status_code == 503
            assert not ready.json()["checks"]["storage"]["ok"]
            assert "min_free_bytes" in ready.json()["checks"]["storage"]["detail"]
            storage_refusal(api.post("/api/contacts/import?list=more", content=b"+905329876543\n",
                                     headers={"Content-Type": "text/plain"}), "storage_full")
            storage_refusal(api.post("/api/campaigns", json={"list": "base", "body": "hi"}),
                            "storage_full")
            stored_report = signed_callback(api, "RESERVE000000001")
            assert stored_report.status_code == 200
            message = api.post("/api/messages", json={"to": "+905321234567", "body": "hi"})
            assert message.status_code == 202, message.text

            # 2. No space at all: every write path says 503 and stores nothing.
            full = small_disk / "ballast-2"
            fill(full, 0)
            messages_before = count(small_disk, "messages")
            refusals = [api.post("/api/messages", json={"to": f"+90532123{i:04d}", "body": "x"})
                        for i in range(5)]
            assert all(r.status_code in (202, 503) for r in refusals)
            failed = [r for r in refusals if r.status_code == 503]
            assert failed, "the disk was never full: the test proves nothing"
            for answer in failed:
                storage_refusal(answer, "not_stored")
            report = signed_callback(api, "FULLDISK00000001")
            if report.status_code != 200:
                storage_refusal(report, "not_stored")
            token = console.get("/send").text.split('name="csrf_token" value="')[1].split('"')[0]
            form = console.post("/send/message", data={
                "csrf_token": token, "to": "+905321239999", "body": "from the console",
                "send_key": "k" * 20}, headers={"Accept": "application/json"})
            storage_refusal(form, "not_stored")
            assert api.get("/readyz").status_code == 503
            assert api.get("/healthz").status_code == 200
            accepted = [r for r in refusals if r.status_code == 202]

            # 3. Space is freed: everything works again, nothing acknowledged was lost.
            full.unlink()
            ballast.unlink()
            wait_for(lambda: api.get("/readyz").status_code == 200, 20,
                     message="/readyz to be ready again")
            again = api.post("/api/contacts/import?list=more", content=b"+905329876543\n",
                             headers={"Content-Type": "text/plain"})
            assert again.status_code == 202, again.text
            assert api.post("/api/messages", json={"to": "+905321230000",
                                                   "body": "x"}).status_code == 202
            assert signed_callback(api, "AFTER00000000001").status_code == 200
            wait_for(lambda: api.get(again.json()["poll"]).json()["state"] == "DONE", 20)
        refs = {r[0] for r in db_rows(small_disk, "SELECT ref FROM report_inbox")}
        assert {"RESERVE000000001", "AFTER00000000001"} <= refs
        stored = {r[0] for r in db_rows(small_disk, "SELECT ref FROM messages")}
        assert message.json()["ref"] in stored
        assert all(a.json()["ref"] in stored for a in accepted)
        assert count(small_disk, "messages") == messages_before + len(accepted) + 1
        assert srv.proc is not None and srv.proc.poll() is None, "the server kept running"
        log = srv.log()
        assert "Exception in ASGI application" not in log
    finally:
        srv.stop()
        with contextlib.suppress(OSError):
            (small_disk / "ballast").unlink()


def count(data_dir: Path, table: str) -> int:
    return int(db_rows(data_dir, f"SELECT count(*) FROM {table}")[0][0])


def test_the_report_intake_answers_503_on_a_full_disk_and_acks_only_what_it_stored(
        small_disk: Path, tmp_path: Path) -> None:
    intake_port = free_port()
    srv = Server(small_disk, config=edge_config(
        tmp_path / "edge.toml", extra=f"\n[reports]\nintake_port = {intake_port}\n"))
    srv.start()
    intake = httpx.Client(base_url=f"http://127.0.0.1:{intake_port}", timeout=30)
    try:
        wait_for(lambda: _answers(intake), 30, message="the report intake")
        full = small_disk / "ballast"
        fill(full, 0)
        answers = []
        for i in range(300):
            answer = signed_callback(intake, f"INTAKEFULL{i:06d}")
            answers.append((f"INTAKEFULL{i:06d}", answer))
            if answer.status_code == 503 and sum(
                    a.status_code == 503 for _, a in answers) >= 3:
                break
        refused = [a for _, a in answers if a.status_code == 503]
        assert refused, "the disk was never full: the test proves nothing"
        for answer in refused:
            storage_refusal(answer, "not_stored")
        assert all(a.status_code in (200, 503) for _, a in answers)
        full.unlink()
        assert signed_callback(intake, "INTAKEAFTER00001").status_code == 200
        acked = {ref for ref, a in answers if a.status_code == 200} | {"INTAKEAFTER00001"}
        refs = {r[0] for r in db_rows(small_disk, "SELECT ref FROM report_inbox")}
        assert acked <= refs
        assert srv.proc is not None and srv.proc.poll() is None, "the server kept running"
    finally:
        intake.close()
        srv.stop()
        with contextlib.suppress(OSError):
            (small_disk / "ballast").unlink()


def _answers(client: httpx.Client) -> bool | None:
    try:
        return client.post("/callbacks/gw").status_code == 401 or None
    except httpx.TransportError:
        return None
