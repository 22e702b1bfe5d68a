"""What ``doctor`` and ``/api/stats`` say when nothing waits: words, not ``None``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness import Server, create_account, run_cli


def test_nothing_waiting_reads_as_such_and_no_message_says_none(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    key = create_account(data)
    text = run_cli("doctor", "--data-dir", str(data)).stdout
    assert "None" not in text, text
    assert "0 reports waiting" in text
    figures = json.loads(run_cli("doctor", "--json", "--data-dir", str(data)).stdout)
    assert figures["inbox"]["oldest_age_s"] is None  # as documented: null, nothing waits
    for alert in figures["alerts"]:
        assert "None" not in alert["message"], alert
    stale = next(a for a in figures["alerts"] if a["name"] == "inbox_stale")
    assert stale["value"] == 0 and stale["message"] == "0 reports waiting"
    server = Server(data).start()
    try:
        with server.client(key) as api:
            stats = api.get("/api/stats").json()
    finally:
        server.stop()
    for alert in stats["alerts"]:
        assert "None" not in alert["message"], alert
    assert next(a for a in stats["alerts"] if a["name"] == "inbox_stale")["value"] == 0
