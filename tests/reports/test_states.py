"""DLR-5: newer wins, final beats intermediate, the same answer in any arrival order."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from appliance.reports.states import REPORTED_FINAL, REPORTED_INTERMEDIATE, Verdict, decide

REPORTED = REPORTED_FINAL + REPORTED_INTERMEDIATE


def replay(start: str, reports: list[tuple[str, int]]) -> tuple[str, int]:
    state, at = start, 0
    for reported, reported_at in reports:
        if decide(state, at, reported, reported_at) is Verdict.APPLY:
            state, at = reported, reported_at
    return state, at


def test_an_older_intermediate_never_overwrites_a_newer_final() -> None:
    assert decide("DELIVERED", 2_000, "ENROUTE", 1_000) is Verdict.STALE


def test_an_intermediate_never_reopens_a_final_even_with_a_later_time() -> None:
    assert decide("DELIVERED", 1_000, "ENROUTE", 9_000) is Verdict.STALE


def test_a_newer_final_replaces_an_older_final() -> None:
    assert decide("FAILED", 1_000, "DELIVERED", 2_000) is Verdict.APPLY
    assert decide("DELIVERED", 2_000, "FAILED", 1_000) is Verdict.STALE


def test_without_times_final_beats_intermediate() -> None:
    assert decide("ENROUTE", 0, "DELIVERED", 0) is Verdict.APPLY
    assert decide("DELIVERED", 0, "ACCEPTED", 0) is Verdict.STALE


def test_on_a_tie_final_beats_intermediate() -> None:
    # SMPP reports have minute resolution: ENROUTE and DELIVERED share a minute.
    assert decide("DELIVERED", 60_000, "ENROUTE", 60_000) is Verdict.STALE
    assert decide("ENROUTE", 60_000, "DELIVERED", 60_000) is Verdict.APPLY


def test_reports_wait_until_the_sender_recorded_the_submission() -> None:
    assert decide("QUEUED", 0, "DELIVERED", 1) is Verdict.WAIT
    assert decide("SENDING", 0, "DELIVERED", 1) is Verdict.WAIT
    for state in ("SUBMITTED", "UNCERTAIN", "RETRY"):
        assert decide(state, 0, "ENROUTE", 1) is Verdict.APPLY


def test_cut_off_gives_way_to_a_late_final_report_only() -> None:
    assert decide("UNKNOWN", 0, "DELIVERED", 5) is Verdict.APPLY
    assert decide("UNKNOWN", 0, "ENROUTE", 5) is Verdict.STALE


def test_a_repeat_changes_nothing() -> None:
    assert decide("DELIVERED", 5, "DELIVERED", 5) is Verdict.STALE


timed = st.lists(st.tuples(st.sampled_from(REPORTED), st.integers(1, 10)), min_size=1,
                 max_size=5)
untimed = st.lists(st.tuples(st.sampled_from(REPORTED), st.just(0)), min_size=1, max_size=5)


@given(st.one_of(timed, untimed))
def test_any_arrival_order_gives_the_same_state(reports: list[tuple[str, int]]) -> None:
    outcomes = {replay("SUBMITTED", list(p)) for p in itertools.permutations(reports)}
    assert len({state for state, _ in outcomes}) == 1


@given(timed)
def test_a_final_report_is_never_undone_by_an_intermediate(
        reports: list[tuple[str, int]]) -> None:
    state, _ = replay("SUBMITTED", reports)
    if any(r in REPORTED_FINAL for r, _ in reports):
        assert state in REPORTED_FINAL
