"""DLR-6 in the sender's batch: the reports waiting for its refs are found by ref.

Every unit that records submissions looks for reports that came first. That lookup
must cost the same whatever the inbox holds: counted here in SQLite virtual-machine
steps (a progress handler), not in time. Reading every report of the provider instead
(what SQLite did while the provider was part of the query) costs thousands of steps
per batch once a few thousand reports are kept.
"""

from __future__ import annotations

from pathlib import Path

import apsw

from appliance.reports.apply import apply_waiting_for_refs, receive
from appliance.reports.inbox import InboxReport, RawCallback
from appliance.store import Store
from tests.reports.support import PROVIDER, add_account, add_message, message, report

NOW = 1_700_000_000_000
KEPT = 3000


def fill_inbox(store: Store) -> None:
    """KEPT reports of the provider waiting for messages that are not there."""
    raw = RawCallback(PROVIDER, "POST", "application/json", "", b"{}")
    reports = [report(f"ghost-{i:05d}", "DELIVERED", NOW + i) for i in range(KEPT)]
    store.writer.call(lambda c: receive(c, raw, reports, None, NOW))


def steps_of(conn: apsw.Connection, refs: list[str], provider: str | None) -> tuple[int, int]:
    steps = 0

    def count() -> bool:
        nonlocal steps
        steps += 100
        return False  # go on

    conn.set_progress_handler(count, 100)
    try:
        applied = apply_waiting_for_refs(conn, refs, NOW, provider=provider)
    finally:
        conn.set_progress_handler(None)
    return applied, steps


def test_the_batch_lookup_does_not_read_the_providers_other_reports(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "appliance.db"))
    try:
        fill_inbox(store)
        acct = store.writer.call(add_account)
        refs = [f"sent-{i:02d}" for i in range(16)]
        store.writer.call(lambda c: [add_message(c, acct, r) for r in refs])
        applied, steps = store.writer.call(lambda c: steps_of(c, refs, PROVIDER))
        assert applied == 0
        assert steps < KEPT, f"{steps} VM steps to find the reports of 16 refs"
    finally:
        store.close()


def test_a_report_from_another_provider_for_the_ref_is_not_applied(tmp_path: Path) -> None:
    store = Store.open(str(tmp_path / "appliance.db"))
    try:
        acct = store.writer.call(add_account)
        store.writer.call(lambda c: add_message(c, acct, "r1", state="SENDING"))
        raw = RawCallback("other", "POST", "application/json", "", b"{}")
        theirs = InboxReport("other", "r1", "", "delivered", NOW, "DELIVERED")
        store.writer.call(lambda c: receive(c, raw, [theirs], None, NOW))

        def record(c: apsw.Connection) -> int:
            c.execute("UPDATE messages SET state = 'SUBMITTED' WHERE ref = 'r1'")
            return apply_waiting_for_refs(c, ["r1"], NOW + 10, provider=PROVIDER)

        assert store.writer.call(record) == 0
        assert store.readers.call(lambda c: message(c, "r1"))["state"] == "SUBMITTED"
    finally:
        store.close()
