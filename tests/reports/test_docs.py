"""docs/reports.md says what the code does: settings and defaults, the retry
schedule, the tie precedence."""

from __future__ import annotations

import re
from pathlib import Path

from appliance.config import SECTION_ATTR, Settings
from appliance.reports.inbox import BACKOFF_S
from appliance.reports.states import REPORTED_FINAL, REPORTED_INTERMEDIATE

DOC = (Path(__file__).resolve().parents[2] / "docs" / "reports.md").read_text()


def test_every_setting_in_the_table_exists_with_its_default() -> None:
    rows = re.findall(r"^\| `\[(\w+)\] (\w+)` \| ([^|]+) \|", DOC, re.M)
    assert len(rows) >= 10
    for section, key, default in rows:
        value = getattr(getattr(Settings(), SECTION_ATTR.get(section, section)), key)
        shown = default.strip().strip('"')
        assert str(value) == shown or (isinstance(value, float) and value == float(shown)), key


def test_the_retry_schedule_is_the_one_in_the_code() -> None:
    line = next(x for x in DOC.splitlines() if x.startswith("failed attempt: "))
    words = re.findall(r"(\d+) (s|min|h)\b", line.split(", then")[0])
    unit = {"s": 1, "min": 60, "h": 3600}
    assert tuple(int(n) * unit[u] for n, u in words) == BACKOFF_S


def test_the_tie_precedence_is_the_one_in_the_code() -> None:
    order = re.search(r"`DELIVERED` >[^.]*", DOC)
    assert order is not None
    assert re.findall(r"`(\w+)`", order.group(0)) == [*REPORTED_FINAL, *REPORTED_INTERMEDIATE]
