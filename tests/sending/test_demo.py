"""``appliance demo``: one command, and imports, sends and reports flow."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
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
                by_provider = {c["provider"]: c for c in campaigns}
                if len(by_provider) == 2 and all(c["finalised"] >= 30
                                                 for c in by_provider.values()):
                    return by_provider
                return None

            # One campaign through the HTTP simulator, one through the SMSC simulator.
            campaigns = wait_for(reported, 120, interval=0.5, message="demo reports")
            assert set(campaigns) == {"sim", "smsc"}
            assert campaigns["sim"]["total"] == campaigns["smsc"]["total"] == 300
            assert campaigns["smsc"]["encoding"] == "UCS-2"
            assert campaigns["smsc"]["parts_per_message"] == 2
            ready = httpx.get(server.url + "/readyz").json()
            assert ready["checks"]["smpp:smsc"]["ok"]
            job = api.get("/api/jobs").json()["jobs"][0]
            assert job["duplicates"] > 0 and job["rejected"] > 0
            assert api.get("/api/stats").status_code == 200
    finally:
        server.stop()
