"""Quarantined callbacks are read again later (DLR-2), e.g. after a parser fix."""

from __future__ import annotations

import json

from appliance.config import ProviderSettings
from appliance.providers import build_adapter
from appliance.reports.apply import receive
from appliance.reports.inbox import RawCallback
from appliance.reports.reparse import reparse
from appliance.store import Store
from tests.reports.support import PROVIDER, SECRET, add_account, add_message, message, one

NOW = 1_767_225_600_000


def test_a_quarantined_callback_that_now_parses_is_filed_and_applied(store: Store) -> None:
    adapter = build_adapter(ProviderSettings(name=PROVIDER, kind="http",
                                             base_url="http://127.0.0.1:9", secret=SECRET))
    acct = store.writer.call(add_account)
    store.writer.call(lambda c: add_message(c, acct, "R1"))
    good = json.dumps({"ref": "R1", "status": "delivered",
                       "reported_at": "2026-01-01T00:00:01Z"}).encode()
    # Stored by an older parser that could not read it, and one nobody can read.
    quarantined = [RawCallback(PROVIDER, "POST", "application/json", "", good),
                   RawCallback(PROVIDER, "POST", "application/json", "", b"still not json"),
                   RawCallback("gone", "POST", "application/json", "", good)]
    store.writer.call(lambda c: [receive(c, raw, [], "old parser failed", NOW)
                                 for raw in quarantined])

    result, last = store.writer.call(
        lambda c: reparse(c, {PROVIDER: adapter}, NOW + 5, after_id=0, limit=10))
    assert (result.parsed, result.still_unreadable, result.reports, last) == (1, 1, 1, 3)
    assert store.readers.call(lambda c: message(c, "R1"))["state"] == "DELIVERED"
    left = store.readers.call(lambda c: one(
        c, "SELECT count(*) FROM raw_reports WHERE parsed = 0"))
    assert left == (2,)  # the unreadable one and the one whose provider is gone
    reason = store.readers.call(lambda c: one(
        c, "SELECT error FROM raw_reports WHERE body = ?", b"still not json"))
    assert "old parser failed" not in reason[0]  # the latest reason is kept

    again, _ = store.writer.call(
        lambda c: reparse(c, {PROVIDER: adapter}, NOW + 6, after_id=0, limit=10))
    assert again.reports == 0  # nothing filed twice
