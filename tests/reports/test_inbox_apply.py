"""The inbox and the apply rule on a real SQLite file, through the real writer.

Messages are written the way the sender leaves them; reports go in through the same
write unit the callback handler uses (:func:`receive`).
"""

from __future__ import annotations

from collections.abc import Callable

import apsw
import pytest

from appliance.reports.apply import apply_waiting_for_refs, receive, settle_due
from appliance.reports.inbox import BACKOFF_S, InboxReport, RawCallback, due_rows
from appliance.store import Store
from tests.reports.support import (
    PROVIDER,
    add_account,
    add_message,
    inbox_rows,
    message,
    one,
    report,
)

RAW = RawCallback(PROVIDER, "POST", "application/json", "", b"{}")
NOW = 1_700_000_000_000


def deliver(store: Store, *reports: InboxReport, now: int = NOW) -> None:
    store.writer.call(lambda c: receive(c, RAW, list(reports), None, now))


def test_a_report_before_its_message_waits_and_applies_when_the_sender_records_it(
        store: Store) -> None:
    acct = store.writer.call(add_account)
    deliver(store, report("r1", "DELIVERED", NOW - 500))
    [row] = store.readers.call(lambda c: inbox_rows(c, "r1"))
    assert row["applied_at"] is None and row["attempts"] == 1  # waiting, retry scheduled

    # The sender has claimed it (SENDING) but not recorded the submission: still waits.
    store.writer.call(lambda c: add_message(c, acct, "r1", state="SENDING"))
    assert store.writer.call(lambda c: apply_waiting_for_refs(c, ["r1"], NOW)) == 0

    def record_submission(c: apsw.Connection) -> int:
        c.execute("UPDATE messages SET state = 'SUBMITTED' WHERE ref = 'r1'")
        return apply_waiting_for_refs(c, ["r1"], NOW + 10)

    assert store.writer.call(record_submission) == 1
    msg = store.readers.call(lambda c: message(c, "r1"))
    assert (msg["state"], msg["state_at"], msg["finalised_at"]) == ("DELIVERED", NOW - 500,
                                                                    NOW + 10)
    [row] = store.readers.call(lambda c: inbox_rows(c, "r1"))
    assert (row["outcome"], row["message_id"]) == ("APPLIED", msg["id"])


def test_a_repeated_report_is_the_same_fact(store: Store) -> None:
    acct = store.writer.call(add_account)
    store.writer.call(lambda c: add_message(c, acct, "r1"))
    for _ in range(3):
        deliver(store, report("r1", "DELIVERED", NOW))
    [row] = store.readers.call(lambda c: inbox_rows(c, "r1"))
    assert row["repeats"] == 2
    raws = store.readers.call(lambda c: one(c, "SELECT count(*) FROM raw_reports"))
    assert raws == (3,)  # every callback is kept as received


def test_out_of_order_reports_keep_the_newest_final_state_and_all_history(
        store: Store) -> None:
    acct = store.writer.call(add_account)
    store.writer.call(lambda c: add_message(c, acct, "r1"))
    deliver(store, report("r1", "DELIVERED", NOW + 2000))
    deliver(store, report("r1", "ENROUTE", NOW + 1000))
    deliver(store, report("r1", "ACCEPTED", NOW))
    msg = store.readers.call(lambda c: message(c, "r1"))
    assert (msg["state"], msg["state_at"]) == ("DELIVERED", NOW + 2000)
    rows = store.readers.call(lambda c: inbox_rows(c, "r1"))
    assert [(r["state"], r["outcome"]) for r in rows] == [
        ("DELIVERED", "APPLIED"), ("ENROUTE", "STALE"), ("ACCEPTED", "STALE")]


def test_reports_in_one_callback_out_of_order_settle_the_same(store: Store) -> None:
    acct = store.writer.call(add_account)
    store.writer.call(lambda c: add_message(c, acct, "r1"))
    deliver(store, report("r1", "FAILED", NOW + 5, status="undeliv"),
           report("r1", "ENROUTE", NOW + 9), report("r1", "ACCEPTED", NOW + 1))
    msg = store.readers.call(lambda c: message(c, "r1"))
    assert msg["state"] == "FAILED" and "undeliv" in msg["error"]


def test_a_provider_that_reports_only_its_own_id_is_matched_through_the_mapping(
        store: Store) -> None:
    acct = store.writer.call(add_account)
    deliver(store, report("", "DELIVERED", NOW, provider_msg_id="P-77"))

    def record_submission(c: apsw.Connection) -> int:
        add_message(c, acct, "r1", provider_msg_id="P-77")
        c.execute("INSERT INTO provider_ids (provider, provider_msg_id, ref)"
                  " VALUES (?, 'P-77', 'r1')", (PROVIDER,))
        return apply_waiting_for_refs(c, ["r1"], NOW, [(PROVIDER, "P-77")])

    assert store.writer.call(record_submission) == 1
    assert store.readers.call(lambda c: message(c, "r1"))["state"] == "DELIVERED"


def due_at(now: int) -> Callable[[apsw.Connection], dict[str, int]]:
    """The reconciler's unit as of ``now``."""
    return lambda c: settle_due(c, due_rows(c, now, 10), now)


def test_unmatched_reports_are_retried_on_the_backoff_schedule(store: Store) -> None:
    deliver(store, report("ghost", "DELIVERED", NOW))
    now = NOW
    seen = []
    for _ in range(len(BACKOFF_S) + 1):
        [row] = store.readers.call(lambda c: inbox_rows(c, "ghost"))
        seen.append((row["next_try_at"] - now) // 1000)
        now = row["next_try_at"]
        assert store.writer.call(due_at(now - 1)) == {}
        assert store.writer.call(due_at(now)) == {"WAIT": 1}
    assert seen == [*BACKOFF_S, BACKOFF_S[-1]]


def test_the_reconciler_unit_applies_a_report_once_the_message_exists(store: Store) -> None:
    acct = store.writer.call(add_account)
    deliver(store, report("late", "EXPIRED", NOW))
    store.writer.call(lambda c: add_message(c, acct, "late"))
    counts = store.writer.call(lambda c: settle_due(c, due_rows(c, NOW + 1000, 10), NOW + 1000))
    assert counts == {"APPLY": 1}
    assert store.readers.call(lambda c: message(c, "late"))["state"] == "EXPIRED"
    assert store.readers.call(lambda c: due_rows(c, NOW + 10**9, 10)) == []


def test_an_unparseable_callback_is_kept_raw(store: Store) -> None:
    receipt = store.writer.call(lambda c: receive(c, RAW, [], "not JSON", NOW))
    row = store.readers.call(lambda c: one(
        c, "SELECT parsed, error, body FROM raw_reports WHERE id = ?", receipt.raw_id))
    assert row == (0, "not JSON", b"{}")


def test_a_report_that_cannot_be_filed_leaves_the_raw_callback_stored(store: Store) -> None:
    broken = InboxReport(PROVIDER, "r1", "", "delivered", NOW, None)  # type: ignore[arg-type]
    receipt = store.writer.call(lambda c: receive(c, RAW, [broken], None, NOW))
    assert receipt.error is not None
    row = store.readers.call(lambda c: one(
        c, "SELECT parsed, error FROM raw_reports WHERE id = ?", receipt.raw_id))
    assert row[0] == 0 and "NOT NULL" in row[1]
    assert store.readers.call(inbox_rows) == []


@pytest.mark.parametrize("bad_time", [-5, 0])
def test_a_missing_or_negative_provider_time_is_stored_as_none(store: Store,
                                                                bad_time: int) -> None:
    deliver(store, report("r9", "DELIVERED", bad_time))
    assert store.readers.call(lambda c: inbox_rows(c, "r9"))[0]["reported_at"] == 0
