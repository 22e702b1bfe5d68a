"""Callbacks stored together: :func:`receive_all`, the first try at a batch of
callbacks on either port (:func:`appliance.web.callback_store.store_batch`).

Each statement is written once for all the callbacks, not once for each: on
PostgreSQL every statement is a round trip, and a batch of unknown receipts costs three
instead of eight a receipt. Every function here is a part of a write unit.
"""

from __future__ import annotations

from collections.abc import Sequence

from appliance.reports.apply import Receipt, find_messages_by_ref, not_ready, settle_all
from appliance.reports.inbox import (
    InboxReport,
    RawCallback,
    Waiting,
    file_report_all,
    store_raw_all,
)
from appliance.reports.states import Verdict
from appliance.store.connection import Connection

Callback = tuple[RawCallback, Sequence[InboxReport], str | None]  # raw, reports, parse error


def receive_all(conn: Connection, callbacks: Sequence[Callback], now_ms: int) -> list[Receipt]:
    """:func:`~appliance.reports.apply.receive` of several callbacks, each statement
    written once for all of them (the raw rows, the messages looked up, the reports
    filed, those whose message is not there filed deferred once), with each one's
    :class:`~appliance.reports.apply.Receipt` as ``receive`` would give it.

    Nothing is contained here: a report that cannot be filed or applied raises, and the
    caller undoes the whole call (a savepoint around it) and takes the callbacks one by
    one with ``receive``, which keeps such a callback raw and the others whole.
    """
    raw_ids = store_raw_all(conn, [(raw, error) for raw, _, error in callbacks], now_ms)
    receipts = [Receipt(raw_id, error=error)
                for raw_id, (_, _, error) in zip(raw_ids, callbacks, strict=True)]
    filing = [(i, report) for i, (_, reports, error) in enumerate(callbacks)
              if error is None for report in reports]
    # The messages first: a report whose message is not there is filed deferred once,
    # as settling it would leave it, in the statement that files it.
    found = find_messages_by_ref(conn, [(report.provider, report.ref) for _, report in filing])
    tried = {n for n, (_, report) in enumerate(filing)
             if report.ref and not_ready(found.get((report.provider, report.ref)))}
    rows = file_report_all(conn, [(report, raw_ids[i]) for i, report in filing], now_ms,
                           tried)
    verdict_of: dict[int, Verdict] = {}
    settling: list[tuple[int, Waiting]] = []
    for n, ((i, _), row) in enumerate(zip(filing, rows, strict=True)):
        if row is None:
            receipts[i].repeats += 1
            continue
        receipts[i].filed += 1
        if n in tried:
            verdict_of[n] = Verdict.WAIT
        else:
            settling.append((n, row))
    verdicts = settle_all(conn, [row for _, row in settling], now_ms, found)
    verdict_of.update((n, verdict) for (n, _), verdict in zip(settling, verdicts, strict=True))
    for n, (i, report) in enumerate(filing):
        verdict = verdict_of.get(n)
        if verdict is None:  # a repeat
            continue
        receipt = receipts[i]
        receipt.outcomes[verdict.value] = receipt.outcomes.get(verdict.value, 0) + 1
        if verdict is Verdict.WAIT:
            receipt.waiting.append(report.ref or f"{report.provider}:{report.provider_msg_id}")
    return receipts
