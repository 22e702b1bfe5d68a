"""The demo's banner and status line, from the API answers they are made of."""

from __future__ import annotations

import io
import re
from pathlib import Path

from appliance.demo_terminal import BannerFacts, StatusLine, banner


def test_the_banner_names_the_data_dir_the_log_and_ready_commands() -> None:
    text = banner(BannerFacts(Path("/tmp/demo dir"), Path("/tmp/demo dir/appliance.log"),
                              "http://127.0.0.1:9", "http://127.0.0.1:8080", "apl_KEY", 1,
                              "pw", ".venv/bin/appliance"))
    assert "data dir   /tmp/demo dir" in text and "/tmp/demo dir/appliance.log" in text
    assert ".venv/bin/appliance doctor --data-dir '/tmp/demo dir'" in text
    assert re.search(r"\.venv/bin/appliance backup --data-dir '/tmp/demo dir' \S+\.db", text)
    assert "user demo, password pw" in text and "apl_KEY" in text


def test_the_status_line_says_jobs_sending_rate_coverage_and_inbox() -> None:
    status = StatusLine()
    status.jobs = [{"id": 1, "state": "DONE", "percent": 100.0}]
    status.campaigns = [{"id": 1, "total": 2000, "created": 2000, "finalised": 900,
                         "counts": {"QUEUED": 500, "SUBMITTED": 600, "DELIVERED": 900}}]
    status.stats = {"live": {"coverage_pct": 45.0}, "coverage_pct": None,
                    "inbox": {"waiting": 12}}
    status.add_sample(0.0)
    status.campaigns[0]["counts"] = {"QUEUED": 300, "SUBMITTED": 700, "DELIVERED": 1000}
    status.add_sample(2.0)
    line = status.text()
    assert "jobs 1/1 done" in line and "sent 1,700/2,000" in line
    assert "100 msg/s" in line and "coverage 45.0% live" in line and "inbox 12" in line
    assert "\n" not in line and len(line) < 100
    assert io.StringIO().isatty() is False  # off a terminal the writer prints full lines
