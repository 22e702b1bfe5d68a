"""The demo's banner and status line, from the API answers they are made of."""

from __future__ import annotations

import io
import re
import tempfile
from pathlib import Path

from appliance.demo_terminal import (
    BannerFacts,
    StatusLine,
    backup_suggestion,
    banner,
    pulled_final,
)


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


def test_the_banner_fits_80_columns_shows_the_key_once_and_backs_up_outside_the_checkout(
        tmp_path: Path) -> None:
    key = "apl_" + "K" * 43
    facts = BannerFacts(Path("/tmp/appliance-demo-abc"), Path("/tmp/appliance-demo-abc/x.log"),
                        "http://127.0.0.1:9", "http://127.0.0.1:8080", key, 1, "pw",
                        ".venv/bin/appliance", "127.0.0.1:40000")
    text = banner(facts)
    for line in text.splitlines():
        assert len(line) < 80 or " doctor " in line or " backup " in line, line
    # The key only where it is used; as itself, once: stdout's line after "API key".
    assert text.rstrip().endswith("API key")
    assert not any(line.strip() == key for line in text.splitlines())
    # Every curl command, its continuation lines joined, is one valid command.
    joined = re.sub(r" \\\n\s+", " ", text)
    assert joined.count(f"-H 'Authorization: Bearer {key}'") == 3
    assert "-d '{\"to\": \"+905321234567\", \"body\": \"hello\"}' http" in joined
    # The backup goes beside the data dir, or to the temporary directory when the data
    # dir is in the current directory (a checkout): never into the current directory.
    beside = backup_suggestion(Path("/tmp/appliance-demo-abc"), cwd=tmp_path)
    assert beside == Path("/tmp/appliance-demo-abc-backup.db")
    inside = backup_suggestion(tmp_path / "demo-data", cwd=tmp_path)
    assert inside.parent == Path(tempfile.gettempdir()) and tmp_path not in inside.parents


def test_the_status_line_counts_the_finals_of_the_provider_that_never_pushes() -> None:
    metrics = (
        '# TYPE appliance_report_pulls counter\n'
        'appliance_report_pulls_total{provider="quiet",outcome="pending"} 12.0\n'
        'appliance_report_pulls_total{provider="quiet",outcome="final"} 89.0\n'
        'appliance_report_pulls_total{outcome="final",provider="sim"} 3.0\n')
    assert pulled_final(metrics, "quiet") == 89 and pulled_final(metrics, "sim") == 3
    assert pulled_final(metrics, "smsc") is None
    status = StatusLine(pulled=("quiet", 100))
    assert "by pulls" not in status.text()  # not read yet
    status.pulled_final = 89
    assert "quiet 89/100 final by pulls" in status.text()
    assert "by pulls" not in StatusLine().text()  # no such provider, no such part
    facts = BannerFacts(Path("/tmp/d"), Path("/tmp/d/x.log"), "http://127.0.0.1:9",
                        "http://127.0.0.1:8080", "apl_K", 1, "pw", "appliance",
                        "127.0.0.1:40000", "http://127.0.0.1:40001", 10.0)
    text = banner(facts)
    assert "quiet      http://127.0.0.1:40001  (never pushes" in text
    assert "asked about 10 s after sending" in text
    assert all(len(line) < 80 for line in text.splitlines() if "quiet" in line)
