"""Cut-off (DLR-7), coverage and inbox health (DLR-9, 10), alerts (DLR-11) and
retention (DLR-12) on a real SQLite file, and the same on PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import apsw
import pytest

from appliance.config import Settings
from appliance.reports.alerts import evaluate
from appliance.reports.apply import receive
from appliance.reports.coverage import coverage, inbox_health, open_by_hour, overdue
from appliance.reports.cutoff import cut_off, overdue_ids
from appliance.reports.inbox import RawCallback
from appliance.reports.pruning import prune_inbox, prune_raw_reports
from appliance.store import Store
from tests.reports.support import PROVIDER, add_account, add_message, inbox_rows, message, report

HOUR = 3_600_000
DAY = 24 * HOUR
NOW = 1_700_000_000_000
RAW = RawCallback(PROVIDER, "POST", "application/json", "", b"{}")


@pytest.fixture
def store(store_on_both: Any) -> Store:
    """Every test here on both backends."""
    return store_on_both  # type: ignore[no-any-return]


def deliver(store: Store, ref: str, state: str, at: int, now: int = NOW) -> None:
    store.writer.call(lambda c: receive(c, RAW, [report(ref, state, at)], None, now))


def state_of(store: Store, ref: str) -> str:
    return str(store.readers.call(lambda c: message(c, ref))["state"])


def adding(account_id: int, ref: str, state: str, created: int) -> Callable[[apsw.Connection], int]:
    return lambda c: add_message(c, account_id, ref, state=state, created_at=created)


def test_cut_off_closes_only_messages_past_the_window_and_a_late_final_still_wins(
        store: Store) -> None:
    acct = store.writer.call(add_account)
    window = 72 * HOUR
    store.writer.call(lambda c: add_message(c, acct, "old", submitted_at=NOW - window - 1))
    store.writer.call(lambda c: add_message(c, acct, "unsure", state="UNCERTAIN",
                                            created_at=NOW - window - 1, submitted_at=None))
    store.writer.call(lambda c: add_message(c, acct, "young", submitted_at=NOW - window + 1))
    store.writer.call(lambda c: add_message(c, acct, "queued", state="RETRY",
                                            created_at=NOW - 10 * window, submitted_at=None))
    ids = store.readers.call(lambda c: overdue_ids(c, NOW - window, 100))
    assert store.writer.call(lambda c: cut_off(c, ids, NOW)) == 2
    states = {r: state_of(store, r) for r in ("old", "unsure", "young", "queued")}
    assert states == {"old": "UNKNOWN", "unsure": "UNKNOWN", "young": "SUBMITTED",
                      "queued": "RETRY"}

    deliver(store, "old", "ENROUTE", NOW - 5)
    assert store.readers.call(lambda c: message(c, "old"))["state"] == "UNKNOWN"
    deliver(store, "old", "DELIVERED", NOW - 4)
    assert store.readers.call(lambda c: message(c, "old"))["state"] == "DELIVERED"


def test_cut_off_spares_a_message_a_report_closed_meanwhile(store: Store) -> None:
    acct = store.writer.call(add_account)
    store.writer.call(lambda c: add_message(c, acct, "m", submitted_at=0))
    ids = store.readers.call(lambda c: overdue_ids(c, NOW, 100))
    deliver(store, "m", "DELIVERED", 5)
    assert store.writer.call(lambda c: cut_off(c, ids, NOW)) == 0
    assert store.readers.call(lambda c: message(c, "m"))["state"] == "DELIVERED"


def test_coverage_and_delivery_rate_are_separate_figures(store: Store) -> None:
    acct = store.writer.call(add_account)
    other = store.writer.call(lambda c: add_account(c, "other"))
    created = NOW - 10 * HOUR  # inside the 48 h window, past the 6 h settle time
    outcomes = ["DELIVERED"] * 6 + ["FAILED"] * 2 + ["SUBMITTED", "UNKNOWN"]
    for i, state in enumerate(outcomes):
        store.writer.call(adding(acct, f"m{i}", state, created))
    store.writer.call(lambda c: add_message(c, other, "x", created_at=created))
    store.writer.call(lambda c: add_message(c, acct, "fresh", created_at=NOW - HOUR))
    cov = store.readers.call(lambda c: coverage(c, NOW, 48, 6, acct))
    assert (cov.total, cov.finalised, cov.delivered) == (10, 8, 6)
    assert (cov.coverage_pct, cov.delivered_pct) == (80.0, 60.0)
    hours = store.readers.call(lambda c: open_by_hour(c, NOW, 48, 6, acct))
    assert [(h.still_open, h.total) for h in hours] == [(2, 10)]
    everyone = store.readers.call(lambda c: coverage(c, NOW, 48, 6))
    assert everyone.total == 11


def test_inbox_health_counts_waiting_reports_and_the_oldest_age(store: Store) -> None:
    assert store.readers.call(lambda c: inbox_health(c, NOW)).oldest_age_s is None
    deliver(store, "a", "DELIVERED", 1, now=NOW - 90_000)
    deliver(store, "b", "DELIVERED", 1, now=NOW - 2_000)
    health = store.readers.call(lambda c: inbox_health(c, NOW))
    assert health.oldest_age_s == 90.0
    assert (health.waiting, health.oldest_age_s) == (2, 90.0)


def test_the_three_alerts(store: Store) -> None:
    settings = Settings()
    acct = store.writer.call(add_account)
    assert not any(a.firing for a in store.readers.call(lambda c: evaluate(c, settings, NOW)))

    store.writer.call(lambda c: add_message(c, acct, "open", created_at=NOW - 10 * HOUR,
                                            submitted_at=NOW - 10 * HOUR))
    deliver(store, "nobody", "DELIVERED", 1, now=NOW - 2 * HOUR)
    firing = {a.name for a in store.readers.call(lambda c: evaluate(c, settings, NOW))
              if a.firing}
    assert firing == {"coverage_low", "inbox_stale"}

    later = NOW + 80 * HOUR  # past the 72 h delivery window
    firing = {a.name for a in store.readers.call(lambda c: evaluate(c, settings, later))
              if a.firing}
    assert "overdue" in firing
    assert store.readers.call(lambda c: overdue(c, later, 72, 48)) == 1
    lenient = replace(settings, alerts=replace(settings.alerts, overdue_max=1))
    assert "overdue" not in {a.name for a in store.readers.call(
        lambda c: evaluate(c, lenient, later)) if a.firing}


def test_retention_prunes_unmatched_reports_and_raw_callbacks_by_receive_time(
        store: Store) -> None:
    acct = store.writer.call(add_account)
    store.writer.call(lambda c: add_message(c, acct, "kept"))
    # Provider time far in the future: retention must not care.
    deliver(store, "ghost", "DELIVERED", NOW + 365 * DAY, now=NOW - 31 * DAY)
    deliver(store, "kept", "DELIVERED", 1, now=NOW - 31 * DAY)
    deliver(store, "recent", "DELIVERED", 1, now=NOW - DAY)

    def prune(c: apsw.Connection) -> tuple[int, int]:
        return prune_inbox(c, NOW - 30 * DAY, 500), prune_raw_reports(c, NOW - 30 * DAY, 500)

    assert store.writer.call(prune) == (1, 2)
    left = {r["ref"]: r["outcome"] for r in store.readers.call(inbox_rows)}
    assert left == {"kept": "APPLIED", "recent": None}  # history stays, raw may go
    assert store.readers.call(lambda c: message(c, "kept"))["state"] == "DELIVERED"


def test_live_figures_cover_the_settle_time_the_settled_window_leaves_out(store: Store) -> None:
    from appliance.ops.observability.summary import summary
    from appliance.reports.coverage import live_by_hour

    acct = store.writer.call(add_account)
    store.writer.call(adding(acct, "settled", "DELIVERED", NOW - 10 * HOUR))
    recent = ["DELIVERED", "DELIVERED", "FAILED", "SUBMITTED", "QUEUED", "UNKNOWN"]
    for i, state in enumerate(recent):
        store.writer.call(adding(acct, f"r{i}", state, NOW - HOUR - i * 60_000))
    store.writer.call(adding(acct, "now", "SUBMITTED", NOW))
    live, hours = store.readers.call(lambda c: live_by_hour(c, NOW, 6, 72, acct))
    # Everything created in [now - 6 h, now]: finals the provider reported, and the
    # open ones still within their delivery window (UNKNOWN is neither).
    assert (live.messages, live.finalised, live.delivered, live.still_due) == (7, 3, 2, 3)
    assert live.as_json() == {"messages": 7, "finalised": 3, "coverage_pct": 42.86,
                              "delivered_pct": 28.57, "still_due": 3}
    assert sum(h.total for h in hours) == 7
    data = store.readers.call(lambda c: summary(c, Settings(), NOW, acct))
    assert data["window"]["total"] == 1 and data["coverage_pct"] == 100.0
    assert data["live"] == live.as_json()
    assert sum(h["total"] for h in data["live_by_hour"]) == 7
    # No settle time: no live figures, everything is in the settled window.
    empty, _ = store.readers.call(lambda c: live_by_hour(c, NOW, 0, 72, acct))
    assert (empty.messages, empty.coverage_pct) == (0, None)
