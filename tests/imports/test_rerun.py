"""Re-running an import from its stored payload (IMP-11), with the parser swapped.

The raw payload is kept so that a job can be parsed again after a parser fix. To
prove a re-run uses the parser as it is *now*, the server runs in this process (a
real uvicorn on 127.0.0.1, a real SQLite file) and the test swaps the normaliser
between the first run and the re-run: the re-run must insert exactly the lines the
changed parser now accepts, and count every other line as before.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from appliance.accounts import create_account
from appliance.clock import iso
from appliance.imports import normalise
from appliance.imports.normalise import Invalid, Normalised, normalise_msisdn
from appliance.provider_kinds import load_settings
from appliance.retention import _prune_payloads
from appliance.runtime import Runtime
from appliance.server import assemble
from appliance.web.app import build_app
from tests.harness import free_port, wait_for

VALID = [f"+90532111{i:04d}" for i in range(5)]
TEL = [f"tel:+90532222{i:04d}" for i in range(3)]  # refused today: letters in the number
PAYLOAD = "\n".join(["phone", *VALID, *TEL, "not a number", VALID[0]]) + "\n"


class InProcessServer:
    def __init__(self, data_dir: Path) -> None:
        settings = load_settings(env={}, overrides={"data_dir": str(data_dir)})
        self.appliance = Runtime(settings).open()
        parts = assemble(self.appliance)
        self.port = free_port()
        config = uvicorn.Config(build_app(parts), host="127.0.0.1", port=self.port,
                                log_config=None, lifespan="on", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> InProcessServer:
        self.thread.start()
        wait_for(lambda: self.server.started, 30, message="the in-process server")
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.appliance.close()

    def client(self, key: str) -> httpx.Client:
        return httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=30,
                            headers={"Authorization": f"Bearer {key}"})


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[InProcessServer, str]]:
    with InProcessServer(tmp_path / "data") as srv:
        _, key = srv.appliance.store.writer.call(lambda c: create_account(c, "acme", 0))
        yield srv, key


def done(api: httpx.Client, job_id: int) -> dict[str, Any]:
    return wait_for(lambda: (lambda j: j if j["state"] == "DONE" else None)(
        api.get(f"/api/jobs/{job_id}").json()), 30, interval=0.05, message=f"job {job_id}")


def contacts(api: httpx.Client, name: str) -> int:
    return int(api.get(f"/api/lists/{name}").json()["contacts"])


def accepting_tel(raw: str, region: str) -> Normalised | Invalid:
    """The parser after a fix: a ``tel:`` URI is read as the number it carries."""
    return normalise_msisdn(raw.removeprefix("tel:"), region)


def test_a_rerun_inserts_exactly_what_the_changed_parser_now_accepts(
        served: tuple[InProcessServer, str], monkeypatch: pytest.MonkeyPatch) -> None:
    srv, key = served
    with srv.client(key) as api:
        first = api.post("/api/contacts/import", json={"list": "people", "text": PAYLOAD})
        assert first.status_code == 202
        job = done(api, first.json()["jobId"])
        assert (job["inserted"], job["rejected"], job["duplicates_in_paste"]) == (5, 4, 1)
        rejects = api.get(f"/api/jobs/{job['id']}/rejects.csv").text
        assert all(t in rejects for t in TEL)

        # The parser reads numbers with normalise_msisdn, looked up as each chunk starts.
        monkeypatch.setattr(normalise, "normalise_msisdn", accepting_tel)
        again = api.post(f"/api/jobs/{job['id']}/rerun")
        assert again.status_code == 202
        body = again.json()
        assert body["rerun_of"] == job["id"] and body["total"] == job["total"]
        assert body["poll"] == f"/api/jobs/{body['jobId']}"
        rerun = done(api, body["jobId"])
        # Exactly the three lines the fix accepts are new; the rest count as before.
        assert rerun["inserted"] == len(TEL)
        assert rerun["duplicates_in_list"] == len(VALID) + 1
        assert rerun["rejected"] == 1 and rerun["rerun_of"] == job["id"]
        assert rerun["list"] == "people" and contacts(api, "people") == len(VALID) + len(TEL)
        assert "not a number" in api.get(f"/api/jobs/{rerun['id']}/rejects.csv").text

        # The same stored paste into another list: all eight numbers, as the parser is now.
        other = api.post(f"/api/jobs/{job['id']}/rerun", json={"list": "others"})
        assert other.status_code == 202
        assert done(api, other.json()["jobId"])["inserted"] == len(VALID) + len(TEL)
        assert contacts(api, "others") == len(VALID) + len(TEL)


def test_a_rerun_of_a_pruned_payload_is_410_with_the_date_and_others_are_refused(
        served: tuple[InProcessServer, str], tmp_path: Path) -> None:
    srv, key = served
    store = srv.appliance.store
    _, stranger = store.writer.call(lambda c: create_account(c, "stranger", 0))
    with srv.client(key) as api, srv.client(stranger) as other:
        job = done(api, api.post("/api/contacts/import", json={
            "list": "people", "text": "+905321234567\n"}).json()["jobId"])
        assert other.post(f"/api/jobs/{job['id']}/rerun").status_code == 404
        assert api.post(f"/api/jobs/{job['id']}/rerun", content=b"[1]",
                        headers={"Content-Type": "application/json"}).status_code == 400
        pruned_at = srv.appliance.now_ms()
        assert store.writer.call(lambda c: _prune_payloads(c, pruned_at + 1, 10, pruned_at)) == 1
        gone = api.post(f"/api/jobs/{job['id']}/rerun")
        assert gone.status_code == 410
        assert gone.json()["error"] == "payload_pruned"
        assert gone.json()["pruned_at"] == iso(pruned_at)
        assert str(iso(pruned_at))[:10] in gone.json()["message"]
        assert api.get(f"/api/jobs/{job['id']}").json()["payload_pruned_at"] == iso(pruned_at)
