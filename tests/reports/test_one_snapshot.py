"""One answer, one snapshot: the figures of ``/api/stats`` and of the dashboard agree with
each other while a flood of reports commits between the queries behind them."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from tests.harness import Server, create_account, wait_for
from tests.ops.load import ReportFlood
from tests.reports.support import http_provider_config
from tests.web.console_support import create_user, sign_in

WAITING_IN_ALERT = re.compile(r"(\d+) reports waiting")
CARD = re.compile(r"data-inbox-waiting>([\d\u2009]+)<")
ALERT_LINE = re.compile(r'data-alert="inbox_stale"[^>]*>.*?(\d+) reports waiting', re.S)


def _alert_waiting(stats: dict[str, Any]) -> int:
    alert = next(a for a in stats["alerts"] if a["name"] == "inbox_stale")
    found = WAITING_IN_ALERT.search(alert["message"])
    assert found, alert
    return int(found.group(1))


def test_stats_and_dashboard_figures_agree_under_a_report_flood(
        tmp_path: Path, data_dir: Path) -> None:
    create_user(data_dir, "alice", "acme")
    srv = Server(data_dir, config=http_provider_config(tmp_path / "appliance.toml")).start()
    flood = ReportFlood(srv, threads=6)
    try:
        key = create_account(data_dir, "other")
        flood.start()
        wait_for(lambda: flood.count() > 200, 30, message="the flood to build up")
        seen: set[int] = set()
        deadline = time.monotonic() + 3
        checked = 0
        with srv.client(key) as api, sign_in(srv) as console:
            while time.monotonic() < deadline or len(seen) < 3:
                stats = api.get("/api/stats").json()
                # The inbox card and the inbox alert: two queries, one snapshot.
                assert stats["inbox"]["waiting"] == _alert_waiting(stats)
                assert stats["live"]["finalised"] <= stats["live"]["messages"]
                html = console.get("/dashboard/figures").text
                card = CARD.search(html)
                line = ALERT_LINE.search(html)
                assert card and line
                assert int(card.group(1).replace("\u2009", "")) == int(line.group(1))
                seen.add(stats["inbox"]["waiting"])
                checked += 1
                assert time.monotonic() < deadline + 30, "the flood did not move the inbox"
        assert len(seen) >= 3, "the inbox did not grow during the checks"
        assert checked >= 10
    finally:
        flood.stop()
        srv.stop()
