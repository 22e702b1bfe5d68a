"""Our refs (DLR-1) and the token bucket, as pure functions."""

from __future__ import annotations

import itertools

from appliance.rate import TokenBucket
from appliance.sending.refs import ALPHABET, RefMaker, looks_like_ref, ref_time_ms


def test_refs_are_unique_sortable_url_safe_and_monotonic() -> None:
    maker = RefMaker()
    refs = [maker.new_ref(1_700_000_000_000) for _ in range(5000)]
    refs += [maker.new_ref(1_700_000_000_001 + i // 100) for i in range(5000)]
    assert len(set(refs)) == len(refs)
    assert refs == sorted(refs)
    assert all(len(r) == 26 and set(r) <= set(ALPHABET) and looks_like_ref(r) for r in refs)
    assert ref_time_ms(refs[0]) == 1_700_000_000_000


def test_refs_stay_increasing_when_the_clock_steps_back() -> None:
    maker = RefMaker()
    later = maker.new_ref(1_800_000_000_000)
    earlier_clock = maker.new_ref(1_700_000_000_000)
    assert earlier_clock > later


def test_looks_like_ref_refuses_other_shapes() -> None:
    assert not looks_like_ref("0" * 25)
    assert not looks_like_ref("I" * 26)  # not in the Crockford alphabet
    assert not looks_like_ref("01m8pw4c5995svv1cgb44rftcb")  # callers upper-case first


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_bucket_paces_to_the_rate_after_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, burst=2, clock=clock)
    waits = [bucket.reserve() for _ in range(22)]
    assert waits[:2] == [0.0, 0.0]
    # Token n (after the burst) may go at (n - burst + 1) / rate seconds.
    assert abs(waits[-1] - 2.0) < 1e-9
    assert all(b > a for a, b in itertools.pairwise(waits[2:]))


def test_bucket_refills_but_never_above_the_burst() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10.0, burst=2, clock=clock)
    bucket.reserve()
    clock.now = 100.0  # a long quiet spell
    waits = [bucket.reserve() for _ in range(3)]
    assert waits[:2] == [0.0, 0.0] and waits[2] > 0
