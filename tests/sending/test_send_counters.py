"""A campaign's rate (and so its ETA) is what went out over the last minute, right from
its first records (issue 32: the early ETA was ten times too long)."""

from __future__ import annotations

import pytest

from appliance.sending.send_counters import RATE_WINDOW_S, SendCounters


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_the_rate_is_right_from_the_first_tenth_of_a_second() -> None:
    clock = Clock()
    counters = SendCounters(clock=clock)
    for _ in range(11):  # 50 messages recorded every 10 ms: 5,000 a second
        counters.went_out(7, 50)
        clock.t += 0.01
    clock.t -= 0.01
    # The time between the first and last record covers the 500 recorded after the first.
    assert counters.campaign_per_s(7) == pytest.approx(5000, rel=0.01)


def test_the_rate_is_the_last_minutes_and_falls_to_zero_when_nothing_goes_out() -> None:
    clock = Clock()
    counters = SendCounters(clock=clock)
    for _ in range(120):  # two minutes at 10 a second, then 100 a second for one
        counters.went_out(1, 10)
        clock.t += 1.0
    for _ in range(60):
        counters.went_out(1, 100)
        clock.t += 1.0
    assert counters.campaign_per_s(1) == pytest.approx(100, rel=0.05)
    clock.t += RATE_WINDOW_S + 1
    assert counters.campaign_per_s(1) == 0.0
    assert counters.campaign_per_s(2) == 0.0  # a campaign never seen
