"""``appliance demo``: one command, and imports, sends and reports flow."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.harness import Server, wait_for


@pytest.mark.slow
def test_demo_imports_sends_and_reports(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = Server(data, command="demo", extra_args=("--contacts", "300")).start()
    try:
        found = wait_for(lambda: re.search(r"API key\s+(apl_\S+)", server.log()), 30)
        key = found.group(1)
        assert "curl" in server.log()
        with server.client(key) as api:
            def reported() -> dict[str, Any] | None:
                campaigns = api.get("/api/campaigns").json()["campaigns"]
                if campaigns and campaigns[0]["finalised"] >= 30:
                    return dict(campaigns[0])
                return None

            campaign = wait_for(reported, 120, interval=0.5, message="demo reports")
            assert campaign["total"] == 300
            job = api.get("/api/jobs").json()["jobs"][0]
            assert job["duplicates"] > 0 and job["rejected"] > 0
            assert api.get("/api/stats").status_code == 200
    finally:
        server.stop()
