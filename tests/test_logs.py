"""The sampled log line: the first of each interval in full, the rest summed up."""

from __future__ import annotations

import json
import logging

import pytest

from appliance.logs import JsonFormatter, SampledLine


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[dict[str, object]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(JsonFormatter().format(record)))


@pytest.fixture
def captured() -> Lines:
    handler = Lines()
    logger = logging.getLogger("test.sampled")
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return handler


def test_each_interval_logs_its_first_occurrence_and_one_sum_of_the_rest(
        captured: Lines) -> None:
    now = [100.0]
    line = SampledLine(logging.getLogger("test.sampled"), "unknown report", interval_s=10,
                       sample=2, detail_key="ref", clock=lambda: now[0])
    for i in range(500):  # a burst: one provider, then another
        line.note("sim", f"R{i}", provider="sim")
    line.note("gw", "G0", provider="gw")
    now[0] += 11
    line.note("sim", "R500", provider="sim")  # a new interval closes the old one
    line.flush()
    info = captured.lines
    assert [(x.get("ref"), x["count"], x.get("summary")) for x in info] == [
        ("R0", 1, None), ("G0", 1, None), (None, 499, True), ("R500", 1, None)]
    assert info[2]["sample"] == ["R1", "R2"] and info[2]["provider"] == "sim"
    # Adding up the counts gives every occurrence: what the field note counts.
    assert sum(int(str(x["count"])) for x in info) == 502
