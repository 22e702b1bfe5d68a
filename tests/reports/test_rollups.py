"""The kept counts give exactly the numbers of a full recount, whatever the write paths do.

Random runs drive messages through the real write units (an API send, a campaign's
expansion with a suppressed number, claims, the sender's outcomes per part, callbacks
and their repeats, the reconciler, the cut-off, a crash recovery, suppressions and
inbound STOPs, retention of the inbox and of raw callbacks) on a real SQLite file,
fold some of the changed messages into the counts at random moments, and after each
step compare:

* every kept count with a recount of the rows (``rollups.drift``);
* coverage, open-by-hour, the live figures, inbox health and the metrics' counts, for
  random windows whose edges fall anywhere within a minute, with the same figures
  computed by scanning the messages (the queries the summaries ran before there were
  kept counts).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.inbound.store import InboundRules, receive_inbound
from appliance.optout.keywords import Keywords
from appliance.optout.suppressions import add as suppress
from appliance.providers.base import Outcome, PartOutcome, SubmitResult
from appliance.reports.apply import receive, settle_due
from appliance.reports.coverage import (
    HOUR_MS,
    inbox_health,
    live_by_hour,
    open_by_hour,
)
from appliance.reports.cutoff import cut_off, overdue_ids
from appliance.reports.inbox import InboxReport, RawCallback, due_rows
from appliance.reports.pruning import prune_inbox, prune_raw_reports
from appliance.reports.states import FINAL_STATES, REPORTED_FINAL
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.campaign_messages import expand_chunk
from appliance.sending.campaigns import NewCampaign, create_campaign, get_campaign
from appliance.sending.claims import claim_due, mark_sending
from appliance.sending.outcomes import record_outcomes
from appliance.sending.recovery import recover_interrupted
from appliance.store import Store, rollups
from appliance.store.rollups import counts, message_states

PROVIDER = "gw"
START = 1_700_000_000_000
STATUSES = [("delivered", "DELIVERED"), ("delivrd", "DELIVERED"), ("undeliv", "FAILED"),
            ("expired", "EXPIRED"), ("rejectd", "REJECTED"), ("enroute", "ENROUTE"),
            ("accepted", "ACCEPTED")]


# -- the recount: the summaries' figures by scanning every message ----------------------

def scanned_hours(conn: apsw.Connection, lo: int, hi: int, account_id: int | None
                  ) -> list[tuple[int, int, int, int]]:
    final = ",".join(f"'{s}'" for s in REPORTED_FINAL)
    where, args = ("", ()) if account_id is None else (" AND account_id = ?", (account_id,))
    return [(int(h) * HOUR_MS, int(t), int(f), int(d)) for h, t, f, d in conn.execute(
        f"SELECT created_at / {HOUR_MS}, count(*),"
        f" sum(CASE WHEN state IN ({final}) THEN 1 ELSE 0 END),"
        " sum(CASE WHEN state = 'DELIVERED' THEN 1 ELSE 0 END) FROM messages"
        f" WHERE created_at >= ? AND created_at < ? AND state <> 'CANCELLED'{where}"
        " GROUP BY 1 ORDER BY 1 DESC", (lo, hi, *args))]


def one(conn: apsw.Connection, sql: str, *args: Any) -> Any:
    row = conn.execute(sql, args).fetchone()
    assert row is not None
    return row


def scanned_due(conn: apsw.Connection, lo: int, hi: int, account_id: int | None) -> int:
    finals = ",".join(f"'{s}'" for s in FINAL_STATES)
    where, args = ("", ()) if account_id is None else (" AND account_id = ?", (account_id,))
    return int(one(conn, f"SELECT count(*) FROM messages WHERE created_at >= ?"
                         f" AND created_at < ? AND state NOT IN ({finals}){where}",
                   lo, hi, *args)[0])


def check(conn: apsw.Connection, rng: random.Random, now: int, accounts: list[int]) -> None:
    assert rollups.drift(conn) == []
    for account_id in (None, *accounts):
        # Window edges anywhere in a minute, sometimes on one.
        window = rng.choice([0.5, 3, 48, 200]) * HOUR_MS + rng.randrange(-90_000, 90_000)
        settle = rng.choice([0, 0.01, 1, 6]) * HOUR_MS + rng.choice([0, rng.randrange(60_000)])
        at = now + rng.choice([0, rng.randrange(-HOUR_MS, HOUR_MS)])
        hours = open_by_hour(conn, at, window / HOUR_MS, settle / HOUR_MS, account_id)
        assert [(h.hour, h.total, h.finalised, h.delivered) for h in hours] == scanned_hours(
            conn, at - int(window), at - int(settle), account_id)
        delivery = rng.choice([0.005, 2, 72])
        live, live_hours = live_by_hour(conn, at, settle / HOUR_MS, delivery, account_id)
        start = at - int(settle)
        if start < at:
            assert [(h.hour, h.total, h.finalised, h.delivered) for h in live_hours] == \
                scanned_hours(conn, start, at + 1, account_id)
            due_from = max(start, at - int(delivery * HOUR_MS))
            assert live.still_due == scanned_due(conn, due_from, at + 1, account_id)
        else:
            assert live_hours == [] and live.messages == 0
    health = inbox_health(conn, now)
    row = one(conn, "SELECT count(*), min(received_at) FROM report_inbox"
                    " WHERE applied_at IS NULL")
    assert health.waiting == row[0]
    assert health.oldest_age_s == (None if row[1] is None
                                   else round(max(now - int(row[1]), 0) / 1000, 3))
    assert health.quarantined == one(conn, "SELECT count(*) FROM raw_reports WHERE parsed = 0")[0]
    assert message_states(conn) == dict(conn.execute(
        "SELECT state, count(*) FROM messages GROUP BY state"))
    assert counts(conn, "report_inbox") == dict(conn.execute(
        "SELECT coalesce(outcome, 'WAITING'), count(*) FROM report_inbox GROUP BY 1"))


# -- the run ------------------------------------------------------------------------------

class Run:
    def __init__(self, store: Store, seed: int) -> None:
        self.store = store
        self.rng = random.Random(seed)
        self.now = START + self.rng.randrange(60_000)
        self.refs = 0
        self.submitted: list[tuple[str, list[str]]] = []  # ref, part ids
        self.accounts = [self.write(lambda c, name=name: int(one(
            c, "INSERT INTO accounts (name, created_at) VALUES (?, 0) RETURNING id", name)[0]))
            for name in ("a", "b")]
        self.numbers = [f"+90532{self.rng.randrange(10**7):07d}" for _ in range(40)]
        self.rules = InboundRules(Keywords(("STOP",)), "TR")

    def write(self, unit: Any) -> Any:
        return self.store.writer.call(unit)

    def ref(self) -> str:
        self.refs += 1
        return f"R{self.refs:06d}"

    # Each action is one or a few real write units.
    def api_send(self) -> None:
        new = NewMessage(self.rng.choice(self.accounts), PROVIDER, self.rng.choice(self.numbers),
                         self.rng.choice(["hi", "x" * 200]))
        ref, now = self.ref(), self.now
        self.write(lambda c: insert_message(c, new, ref, now))

    def campaign(self) -> None:
        account = self.rng.choice(self.accounts)
        name = f"list{self.refs}"
        numbers = self.rng.sample(self.numbers, 6)
        now = self.now

        def unit(c: apsw.Connection) -> None:
            list_id = int(one(c, "INSERT INTO lists (account_id, name, created_at)"
                                 " VALUES (?, ?, 0) RETURNING id", account, name)[0])
            c.executemany("INSERT INTO contacts (list_id, msisdn, created_at) VALUES (?, ?, 0)",
                          [(list_id, n) for n in numbers])
            suppress(c, account, numbers[0], "", "api", now)  # created CANCELLED
            camp, _ = create_campaign(c, NewCampaign(account, name, PROVIDER, "hello", name), now)
            expand_chunk(c, camp, self.ref, now, chunk=4)
            again = get_campaign(c, camp.id)
            assert again is not None
            expand_chunk(c, again, self.ref, now, chunk=4)

        self.write(unit)

    def send_batch(self) -> None:
        now = self.now
        reserved = self.write(lambda c: claim_due(c, PROVIDER, now, self.rng.randrange(1, 8)))
        if reserved and self.rng.random() < 0.05:
            return  # a crash between the reservation and the SENDING mark
        claimed = self.write(lambda c: mark_sending(c, reserved, now))
        results = []
        for msg in claimed:
            kind = self.rng.random()
            if kind < 0.6 and msg.parts_to_send:
                ids = [f"P{msg.ref}-{i}" for i in msg.parts_to_send]
                outcome = Outcome.of_parts(tuple(
                    PartOutcome(i, SubmitResult.ACCEPTED, f"P{msg.ref}-{i}")
                    for i in msg.parts_to_send))
                self.submitted.append((msg.ref, ids))
            elif kind < 0.75:
                outcome = Outcome(SubmitResult.RETRY, error="throttled", retry_after_s=0.0)
            elif kind < 0.85:
                outcome = Outcome(SubmitResult.REJECTED, error="refused")
            else:
                outcome = Outcome(SubmitResult.UNCERTAIN, error="no answer")
                self.submitted.append((msg.ref, []))
            results.append((msg, outcome))
        if results and self.rng.random() < 0.1:
            return  # a crash before the outcomes were recorded: recovered below
        self.write(lambda c: record_outcomes(c, PROVIDER, results, now, max_attempts=3,
                                             dedupes_on_ref=False, map_provider_ids=True,
                                             reports_per_part=True))

    def callback(self) -> None:
        reports = []
        for _ in range(self.rng.randrange(1, 4)):
            status, state = self.rng.choice(STATUSES)
            at = self.now - self.rng.randrange(10**6)
            if self.submitted and self.rng.random() < 0.8:
                ref, ids = self.rng.choice(self.submitted)
                if ids and self.rng.random() < 0.5:
                    reports.append(InboxReport(PROVIDER, "", self.rng.choice(ids), status, at,
                                               state))
                else:
                    reports.append(InboxReport(PROVIDER, ref, "", status, at, state))
            else:  # a race: the message is not there yet, or never will be
                reports.append(InboxReport(PROVIDER, f"R{self.refs + 1:06d}", "", status, at,
                                           state))
        raw = RawCallback(PROVIDER, "POST", "application/json", "", b"{}")
        unreadable = "unreadable" if self.rng.random() < 0.1 else None
        now = self.now
        self.write(lambda c: receive(c, raw, [] if unreadable else reports, unreadable, now))
        if self.rng.random() < 0.2:  # the provider sends the same callback again
            self.write(lambda c: receive(c, raw, reports, None, now))

    def reconcile(self) -> None:
        now = self.now
        self.write(lambda c: settle_due(c, due_rows(c, now, 50), now))

    def cut(self) -> None:
        now = self.now
        window = self.rng.choice([60_000, HOUR_MS])
        ids = self.store.readers.call(lambda c: overdue_ids(c, now - window, 20))
        self.write(lambda c: cut_off(c, ids, now))

    def crash_recovery(self) -> None:
        now = self.now
        self.write(lambda c: recover_interrupted(c, PROVIDER, now, self.rng.random() < 0.5,
                                                 reports_per_part=True))

    def inbound(self) -> None:
        now = self.now
        text = self.rng.choice(["STOP", "hello"])
        msisdn = self.rng.choice(self.numbers)
        pid = f"MO{self.refs}{self.rng.randrange(3)}"
        self.write(lambda c: receive_inbound(c, self.rules, PROVIDER, msisdn, "ACME", text, pid,
                                             b"raw", now))

    def retention(self) -> None:
        cutoff = self.now - self.rng.randrange(HOUR_MS)
        self.write(lambda c: prune_inbox(c, cutoff, 5))
        self.write(lambda c: prune_raw_reports(c, cutoff, 5))

    def fold(self) -> None:
        limit = self.rng.choice([1, 7, 5000])
        self.write(lambda c: rollups.fold(c, limit))

    def step(self) -> None:
        self.now += self.rng.choice([0, 1, 999, 59_999, 60_000, 61_000, 10 * 60_000, HOUR_MS])
        action = self.rng.choices(
            [self.api_send, self.campaign, self.send_batch, self.callback, self.reconcile,
             self.cut, self.crash_recovery, self.inbound, self.retention, self.fold],
            weights=[8, 1, 6, 6, 2, 2, 1, 1, 1, 3])[0]
        action()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kept_counts_equal_a_full_recount_after_every_write(store: Store, seed: int) -> None:
    run = Run(store, seed)
    for _ in range(200):
        run.step()
        store.readers.call(lambda c: check(c, run.rng, run.now, run.accounts))
    messages = store.readers.call(lambda c: one(c, "SELECT count(*) FROM messages")[0])
    states = store.readers.call(message_states)
    assert messages > 50 and len(states) >= 5  # the run reached many states
    store.writer.call(lambda c: rollups.fold(c, 10**6))
    assert store.readers.call(lambda c: c.execute(
        "SELECT count(*) FROM messages WHERE counted_state IS DISTINCT FROM state").fetchone()
        ) == (0,)
    store.readers.call(lambda c: check(c, run.rng, run.now, run.accounts))


def test_a_database_from_before_the_counts_gets_them_filled(tmp_path: Path) -> None:
    from appliance.store.schema import migrate
    from tests.store.test_migrations import SCHEMAS

    old = tmp_path / "old.db"
    conn = apsw.Connection(str(old))
    conn.execute((SCHEMAS / "v1.sql").read_text())
    conn.execute("PRAGMA user_version=1")
    conn.execute("INSERT INTO accounts (id, name, created_at) VALUES (1, 'a', 0)")
    conn.executemany(
        "INSERT INTO messages (ref, account_id, provider, msisdn, body, state, next_attempt_at,"
        " created_at, updated_at) VALUES (?, 1, 'p', '+905321234567', 'hi', ?, 0, ?, 0)",
        [(f"r{i}", ["DELIVERED", "QUEUED", "FAILED"][i % 3], START + i * 7_000)
         for i in range(300)])
    conn.close()
    migrate(str(old))
    s = Store.open(str(old))
    try:
        assert s.readers.call(rollups.drift) == []
        assert s.readers.call(message_states) == {"DELIVERED": 100, "QUEUED": 100, "FAILED": 100}
        hours = s.readers.call(lambda c: open_by_hour(c, START + 3 * HOUR_MS, 3, 0))
        assert sum(h.total for h in hours) == 300
    finally:
        s.close()
