"""The reconciler's unit (:func:`reconcile_due`), on both engines: the rows whose
message is still not there move along the ladder in one statement, and every row comes
to what :func:`settle_due` (each row read and settled) would make of it."""

from __future__ import annotations

from typing import Any

from appliance.reports.apply import receive, settle_due
from appliance.reports.inbox import BACKOFF_S, InboxReport, RawCallback, due_rows
from appliance.reports.reconciler import reconcile_due
from tests.reports.support import PROVIDER, add_account, add_message, message, report

RAW = RawCallback(PROVIDER, "POST", "application/json", "", b"{}")
NOW = 1_700_000_000_000


def deliver(store: Any, *reports: InboxReport, now: int = NOW) -> None:
    store.writer.call(lambda c: receive(c, RAW, list(reports), None, now))


def waiting(store: Any) -> dict[str, tuple[int, int]]:
    """Each waiting row's ref (or provider id): (attempts, next_try_at)."""
    rows = store.readers.call(lambda c: c.execute(
        "SELECT ref, provider_msg_id, attempts, next_try_at FROM report_inbox"
        " WHERE applied_at IS NULL").fetchall())
    return {str(r[0] or r[1]): (int(r[2]), int(r[3])) for r in rows}


def test_unknown_reports_move_along_the_whole_ladder(store_on_both: Any) -> None:
    store = store_on_both
    deliver(store, report("ghost", "DELIVERED", NOW))
    now = NOW
    seen = []
    for attempt in range(len(BACKOFF_S) + 1):
        attempts, due = waiting(store)["ghost"]
        assert attempts == attempt + 1
        seen.append((due - now) // 1000)
        now = due
        assert store.writer.call(lambda c, at=now - 1: reconcile_due(c, at, 10)) == {}
        assert store.writer.call(lambda c, at=now: reconcile_due(c, at, 10)) == {"WAIT": 1}
    assert seen == [*BACKOFF_S, BACKOFF_S[-1]]


Outcome = tuple[dict[str, int], dict[str, tuple[int, int]], dict[str, str]]


def five_reports_settled(store: Any, reconcile: bool) -> Outcome:
    """A report for a message not there, one not sent yet, one sent through another
    provider (MSG-6: not ours), one sent, and one naming only the provider's id, tried
    once by the reconciler's unit (``reconcile``) or by reading and settling each."""
    for table in ("report_inbox", "provider_ids", "message_parts", "messages"):
        store.writer.call(lambda c, table=table: c.execute(f"DELETE FROM {table}"))
    acct = store.writer.call(lambda c: add_account(c, f"acme-{reconcile}"))
    deliver(store, report("absent", "DELIVERED", NOW), report("queued", "DELIVERED", NOW),
            report("elsewhere", "DELIVERED", NOW), report("sent", "DELIVERED", NOW),
            report("", "DELIVERED", NOW, provider_msg_id="P-9"))

    def messages(c: Any) -> None:
        add_message(c, acct, "queued", state="SENDING")
        add_message(c, acct, "elsewhere", provider="other")
        add_message(c, acct, "sent")
        add_message(c, acct, "by-id", provider_msg_id="P-9")
        c.execute("INSERT INTO provider_ids (provider, provider_msg_id, ref)"
                  " VALUES (?, 'P-9', 'by-id')", (PROVIDER,))

    store.writer.call(messages)
    then = NOW + 1000
    if reconcile:
        counts = store.writer.call(lambda c: reconcile_due(c, then, 10))
    else:
        counts = store.writer.call(lambda c: settle_due(c, due_rows(c, then, 10), then))
    states = {ref: store.readers.call(lambda c, ref=ref: message(c, ref))["state"]
              for ref in ("queued", "elsewhere", "sent", "by-id")}
    return counts, waiting(store), states


def test_one_unit_settles_each_row_as_reading_it_would(store_on_both: Any) -> None:
    """The same outcome, attempts and next try as :func:`settle_due` gives each."""
    outcome = five_reports_settled(store_on_both, reconcile=True)
    assert outcome == five_reports_settled(store_on_both, reconcile=False)
    counts, still, states = outcome
    assert counts == {"WAIT": 3, "APPLY": 2}
    assert still == {ref: (2, NOW + 1000 + BACKOFF_S[1] * 1000)
                     for ref in ("absent", "queued", "elsewhere")}
    assert states == {"queued": "SENDING", "elsewhere": "SUBMITTED", "sent": "DELIVERED",
                      "by-id": "DELIVERED"}


def test_a_unit_moves_at_most_its_limit_and_the_others_come_once_those_are_moved(
        store_on_both: Any) -> None:
    """``limit`` of the rows whose message is not there go in the statement, the
    earliest due first, and a unit that fills it reads nothing more (the rows it would
    read are more of the same); the rows whose message is there are settled by the unit
    that finds fewer than ``limit`` of the others due, so none waits behind a flood for
    longer than the flood takes to move."""
    store = store_on_both
    deliver(store, report("sent", "DELIVERED", NOW), now=NOW - 1)  # due first of all
    acct = store.writer.call(lambda c: add_account(c))
    store.writer.call(lambda c: add_message(c, acct, "sent"))  # its message came later
    for n in range(5):
        deliver(store, report(f"ghost-{n}", "DELIVERED", NOW), now=NOW + n)
    then = NOW + 10_000
    assert store.writer.call(lambda c: reconcile_due(c, then, 2)) == {"WAIT": 2}
    rows = waiting(store)
    assert sorted(ref for ref, (attempts, _) in rows.items() if attempts == 2) == [
        "ghost-0", "ghost-1"]
    assert "sent" in rows  # not read: the unit filled its limit with the flood
    assert store.writer.call(lambda c: reconcile_due(c, then, 2)) == {"WAIT": 2}
    assert "sent" in waiting(store)
    assert store.writer.call(lambda c: reconcile_due(c, then, 2)) == {"WAIT": 1, "APPLY": 1}
    rows = waiting(store)
    assert "sent" not in rows
    assert all(attempts == 2 for attempts, _ in rows.values())
    assert store.readers.call(lambda c: message(c, "sent"))["state"] == "DELIVERED"
