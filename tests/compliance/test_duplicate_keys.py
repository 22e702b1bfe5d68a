"""The duplicate-today key (IYS-4) names what it guards and keeps a day's keys together.

Two messages share a key exactly when they go to the same number of the same account,
through the same sender header, with the same text, due the same day in Istanbul. The
key leads with the day, then the account, so one account's keys of one day lie in one
stretch of the ``messages_duplicate_today`` index: a campaign's expansion writes there,
never all over an index that holds every live message ever keyed.
"""

from __future__ import annotations

import random

from appliance.sending.duplicates import DayKeys, dup_key

# 2026-03-10 20:30 UTC is 23:30 in Istanbul; an hour later it is the next day there.
LATE_EVENING_MS = 1_773_174_600_000
NEXT_DAY_MS = LATE_EVENING_MS + 3_600_000


def test_a_key_is_the_same_exactly_for_the_same_number_account_sender_text_and_day() -> None:
    key = dup_key(1, "+905350000001", "ACME", LATE_EVENING_MS, "Merhaba")
    assert dup_key(1, "+905350000001", "ACME", LATE_EVENING_MS - 3_600_000, "Merhaba") == key
    assert DayKeys(1, "ACME", LATE_EVENING_MS).of("+905350000001", "Merhaba") == key
    others = {
        dup_key(2, "+905350000001", "ACME", LATE_EVENING_MS, "Merhaba"),
        dup_key(1, "+905350000002", "ACME", LATE_EVENING_MS, "Merhaba"),
        dup_key(1, "+905350000001", "ACME2", LATE_EVENING_MS, "Merhaba"),
        dup_key(1, "+905350000001", "ACME", LATE_EVENING_MS, "Merhaba!"),
        dup_key(1, "+905350000001", "ACME", NEXT_DAY_MS, "Merhaba"),
        # The sender and the text are hashed together, never run into each other.
        dup_key(1, "+905350000001", "ACMEM", LATE_EVENING_MS, "erhaba"),
        dup_key(11, "+905350000001", "ACME", LATE_EVENING_MS, "Merhaba"),
    }
    assert key not in others and len(others) == 7


def test_one_accounts_keys_of_one_day_lie_together_whatever_the_numbers_and_texts() -> None:
    rng = random.Random(4)

    def keys(account_id: int, at_ms: int) -> list[str]:
        day = DayKeys(account_id, "ACME", at_ms)
        return [day.of(f"+90532{rng.randrange(10**7):07d}", f"Merhaba {rng.random()}")
                for _ in range(200)]

    groups = {(a, at): keys(a, at) for a in (1, 2, 12) for at in (LATE_EVENING_MS,
                                                                  NEXT_DAY_MS)}
    ordered = sorted(k for ks in groups.values() for k in ks)
    for (account_id, at), ks in groups.items():
        where = sorted(ordered.index(k) for k in ks)
        assert where == list(range(where[0], where[0] + len(ks))), (account_id, at)
    first_day = set(groups[(1, LATE_EVENING_MS)]) | set(groups[(2, LATE_EVENING_MS)]) \
        | set(groups[(12, LATE_EVENING_MS)])
    assert set(ordered[:len(first_day)]) == first_day  # the day leads
