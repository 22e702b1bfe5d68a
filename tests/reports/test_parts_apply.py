"""MSG-4, MSG-6: reports land on their part, the message is the aggregate of its parts.

On real SQLite: the property tests run each example on a fresh in-memory database with
the full schema (through the same ``settle`` unit the callbacks use); the others on a
file through the real writer.
"""

from __future__ import annotations

from typing import Any

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

from appliance.reports.aggregate import (
    FINAL_PRECEDENCE,
    OPEN_PRECEDENCE,
    PartView,
    aggregate,
    message_state,
)
from appliance.reports.apply import receive
from appliance.reports.coverage import coverage
from appliance.reports.cutoff import cut_off
from appliance.reports.inbox import InboxReport, RawCallback
from appliance.reports.states import FINAL_STATES, REPORTED_FINAL, REPORTED_INTERMEDIATE
from appliance.sending.messages import message_history
from appliance.store import Store
from appliance.store.schema import schema_sql
from tests.reports.support import PROVIDER, add_account, add_message, inbox_rows, message, one

NOW = 1_700_000_000_000
HOUR = 3_600_000
RAW = RawCallback(PROVIDER, "POST", "application/json", "", b"{}")
REPORTED = REPORTED_FINAL + REPORTED_INTERMEDIATE


def add_parts(conn: apsw.Connection, message_id: int, count: int,
              state: str = "SUBMITTED") -> None:
    """Part rows as the sender records an accepted submission: one id per part."""
    conn.executemany(
        "INSERT INTO message_parts (message_id, part, provider_msg_id, state, submitted_at,"
        " updated_at) VALUES (?, ?, ?, ?, 0, 0)",
        [(message_id, p, f"P{p}", state) for p in range(1, count + 1)])
    conn.execute("UPDATE messages SET parts = ? WHERE id = ?", (count, message_id))


def part_report(part: int | None, state: str, at: int, ref: str = "r1",
                provider: str = PROVIDER) -> InboxReport:
    """A report about one part (its provider id), or about the whole message (None)."""
    pid = "" if part is None else f"P{part}"
    return InboxReport(provider, ref, pid, state.lower(), at, state)


def parts_of(conn: apsw.Connection, ref: str) -> list[tuple[int, str | None, str]]:
    return [(int(r[0]), r[1], str(r[2])) for r in conn.execute(
        "SELECT p.part, p.provider_msg_id, p.state FROM message_parts p"
        " JOIN messages m ON m.id = p.message_id WHERE m.ref = ? ORDER BY p.part", (ref,))]


# -- the aggregate, pure ------------------------------------------------------------------

STATES = st.sampled_from(FINAL_PRECEDENCE + OPEN_PRECEDENCE)


@given(st.lists(STATES, min_size=1, max_size=6), st.randoms())
def test_the_aggregate_is_a_function_of_the_set_of_part_states(
        states: list[str], rnd: object) -> None:
    shuffled = list(states)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    state = message_state(states)
    assert message_state(shuffled) == state
    assert (state in FINAL_STATES) == all(s in FINAL_STATES for s in states)
    assert (state == "DELIVERED") == all(s == "DELIVERED" for s in states)


def test_the_worst_final_state_wins_and_the_slowest_part_sets_an_open_message() -> None:
    assert message_state(["DELIVERED", "FAILED"]) == "FAILED"
    assert message_state(["EXPIRED", "REJECTED", "DELIVERED"]) == "REJECTED"
    assert message_state(["FAILED", "REJECTED"]) == "FAILED"
    assert message_state(["UNKNOWN", "EXPIRED"]) == "EXPIRED"
    assert message_state(["UNKNOWN", "DELIVERED"]) == "UNKNOWN"
    assert message_state(["DELIVERED", "ENROUTE"]) == "ENROUTE"
    assert message_state(["ENROUTE", "SUBMITTED", "DELIVERED"]) == "SUBMITTED"
    assert message_state(["SUBMITTED", "UNCERTAIN"]) == "UNCERTAIN"
    assert message_state(["DELIVERED", "RETRY", "UNCERTAIN"]) == "RETRY"


def test_the_error_is_the_first_part_in_the_deciding_state() -> None:
    got = aggregate([PartView(1, "DELIVERED", 5), PartView(2, "FAILED", 9, "report: x"),
                     PartView(3, "FAILED", 7, "report: y")])
    assert (got.state, got.final, got.state_at, got.error) == ("FAILED", True, 9,
                                                               "part 2: report: x")


# -- permutations through settle ---------------------------------------------------------


def fresh_db(parts: int) -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute(schema_sql())
    acct = add_account(conn)
    message_id = add_message(conn, acct, "r1")
    add_parts(conn, message_id, parts)
    return conn


def replay(parts: int, reports: list[InboxReport]) -> tuple[object, ...]:
    conn = fresh_db(parts)
    for r in reports:
        receive(conn, RAW, [r], None, NOW)
    m = message(conn, "r1")
    return (m["state"], m["finalised_at"], m["state_at"], tuple(parts_of(conn, "r1")))


def reports_of(parts: int, timed: bool) -> st.SearchStrategy[list[InboxReport]]:
    one_report = st.builds(
        part_report,
        st.one_of(st.none(), st.integers(1, parts)),
        st.sampled_from(REPORTED),
        st.integers(1, 6) if timed else st.just(0))
    return st.lists(one_report, min_size=1, max_size=6)


@st.composite
def cases(draw: st.DrawFn) -> tuple[int, list[InboxReport], list[InboxReport]]:
    parts = draw(st.integers(1, 3))
    reports = draw(reports_of(parts, draw(st.booleans())))
    return parts, reports, draw(st.permutations(reports))


@settings(max_examples=300, deadline=None)
@given(cases())
def test_any_order_of_the_same_part_reports_gives_the_same_message(
        case: tuple[int, list[InboxReport], list[InboxReport]]) -> None:
    parts, reports, shuffled = case
    first = replay(parts, reports)
    assert replay(parts, shuffled) == first
    state, finalised_at, _, part_rows = first
    part_states = [s for _, _, s in part_rows]  # type: ignore[attr-defined]
    assert (state in FINAL_STATES) == all(s in FINAL_STATES for s in part_states)
    assert (finalised_at is not None) == (state in FINAL_STATES)
    assert (state == "DELIVERED") == all(s == "DELIVERED" for s in part_states)


@settings(max_examples=150, deadline=None)
@given(st.integers(2, 3), st.data())
def test_newer_wins_holds_per_part(parts: int, data: st.DataObject) -> None:
    """A part's newest final report is its state, whatever the other parts say."""
    reports = data.draw(st.lists(st.builds(
        part_report, st.integers(1, parts), st.sampled_from(REPORTED_FINAL),
        st.integers(1, 50)), min_size=1, max_size=8,
        unique_by=lambda r: (r.provider_msg_id, r.reported_at)))
    _, _, _, rows = replay(parts, reports)
    for part, _pid, state in rows:  # type: ignore[attr-defined]
        mine = [r for r in reports if r.provider_msg_id == f"P{part}"]
        if mine:
            assert state == max(mine, key=lambda r: r.reported_at).state


# -- the rules on a file, through the writer ----------------------------------------------


def deliver(store: Store, *reports: InboxReport, now: int = NOW) -> None:
    store.writer.call(lambda c: receive(c, RAW, list(reports), None, now))


def message_of(store: Store, ref: str) -> dict[str, Any]:
    return store.readers.call(lambda c: message(c, ref))


def two_part_message(store: Store, ref: str = "r1", provider: str = PROVIDER) -> int:
    def unit(c: apsw.Connection) -> int:
        acct = add_account(c, f"acct-{ref}-{provider}")
        message_id = add_message(c, acct, ref, provider=provider)
        add_parts(c, message_id, 2)
        return message_id

    return store.writer.call(unit)


def test_delivered_and_failed_parts_end_failed_in_either_order(store: Store) -> None:
    for ref, (first, second) in (("a", ("DELIVERED", "FAILED")),
                                 ("b", ("FAILED", "DELIVERED"))):
        two_part_message(store, ref)
        deliver(store, part_report(1, first, NOW - 5, ref))
        assert message_of(store, ref)["state"] == "SUBMITTED"
        deliver(store, part_report(2, second, NOW - 5, ref))
        m = message_of(store, ref)
        assert (m["state"], m["finalised_at"]) == ("FAILED", NOW)
        history = store.readers.call(inbox_rows)
        assert sorted((r["part"], r["outcome"]) for r in history if r["ref"] == ref) == [
            (1, "APPLIED"), (2, "APPLIED")]


def test_a_report_without_a_part_id_applies_to_every_part_under_newer_wins(
        store: Store) -> None:
    two_part_message(store)
    deliver(store, part_report(1, "FAILED", NOW - 10))
    deliver(store, part_report(None, "DELIVERED", NOW - 20))  # older than part 1's
    assert store.readers.call(lambda c: parts_of(c, "r1")) == [
        (1, "P1", "FAILED"), (2, "P2", "DELIVERED")]
    assert store.readers.call(lambda c: message(c, "r1"))["state"] == "FAILED"
    [whole] = [r for r in store.readers.call(lambda c: inbox_rows(c, "r1"))
               if r["provider_msg_id"] == ""]
    assert (whole["outcome"], whole["part"]) == ("APPLIED", None)


def test_a_report_from_another_provider_never_touches_the_message(store: Store) -> None:
    """MSG-6: ref X sent through provider A; provider B reports on ref X."""
    message_id = two_part_message(store, "X", provider="A")
    deliver(store, part_report(1, "FAILED", NOW, "X", provider="B"),
            part_report(None, "FAILED", NOW, "X", provider="B"))
    m = store.readers.call(lambda c: message(c, "X"))
    assert (m["state"], m["finalised_at"]) == ("SUBMITTED", None)
    assert {s for _, _, s in store.readers.call(lambda c: parts_of(c, "X"))} == {"SUBMITTED"}
    rows = store.readers.call(lambda c: inbox_rows(c, "X"))
    assert [(r["outcome"], r["message_id"]) for r in rows] == [(None, None), (None, None)]

    def history(c: apsw.Connection) -> int:
        from appliance.sending.messages import get_message

        found = get_message(c, "X", int(m["account_id"]))
        assert found is not None and found.id == message_id
        return len(message_history(c, found))

    assert store.readers.call(history) == 0
    deliver(store, part_report(1, "DELIVERED", NOW, "X", provider="A"))
    assert store.readers.call(lambda c: parts_of(c, "X"))[0] == (1, "P1", "DELIVERED")


def test_a_provider_id_from_another_provider_never_touches_the_message(store: Store) -> None:
    """MSG-6 by provider id: provider A took X's parts as P1 and P2 (the id mapping says
    so); provider B reports on an id P1 of its own, and on Z9, the id of a message sent
    through A with no mapping row. Neither touches A's messages; A's own report does."""
    def unit(c: apsw.Connection) -> None:
        acct = add_account(c, "acct-ids")
        message_id = add_message(c, acct, "X", provider="A")
        add_parts(c, message_id, 2)
        c.executemany("INSERT INTO provider_ids (provider, provider_msg_id, ref, part)"
                      " VALUES ('A', ?, 'X', ?)", [("P1", 1), ("P2", 2)])
        lone = add_message(c, acct, "Y", provider="A")
        c.execute("UPDATE messages SET provider_msg_id = 'Z9' WHERE id = ?", (lone,))

    store.writer.call(unit)
    deliver(store, InboxReport("B", "", "P1", "failed", NOW, "FAILED"),
            InboxReport("B", "", "Z9", "failed", NOW, "FAILED"))
    assert store.readers.call(lambda c: parts_of(c, "X")) == [
        (1, "P1", "SUBMITTED"), (2, "P2", "SUBMITTED")]
    assert store.readers.call(lambda c: message(c, "Y"))["state"] == "SUBMITTED"
    waiting = store.readers.call(lambda c: [r[0] for r in c.execute(
        "SELECT provider_msg_id FROM report_inbox WHERE provider = 'B'"
        " AND applied_at IS NULL ORDER BY provider_msg_id")])
    assert waiting == ["P1", "Z9"]
    deliver(store, InboxReport("A", "", "P1", "delivered", NOW, "DELIVERED"),
            InboxReport("A", "", "Z9", "delivered", NOW, "DELIVERED"))
    assert store.readers.call(lambda c: parts_of(c, "X"))[0] == (1, "P1", "DELIVERED")
    assert store.readers.call(lambda c: message(c, "Y"))["state"] == "DELIVERED"


def test_a_report_for_an_unknown_part_id_binds_to_a_part_whose_id_is_not_known(
        store: Store) -> None:
    def unit(c: apsw.Connection) -> None:
        message_id = add_message(c, add_account(c), "u", state="UNCERTAIN")
        c.executemany(
            "INSERT INTO message_parts (message_id, part, state, updated_at)"
            " VALUES (?, ?, 'UNCERTAIN', 0)", [(message_id, 1), (message_id, 2)])

    store.writer.call(unit)
    deliver(store, InboxReport(PROVIDER, "u", "Q9", "delivered", NOW, "DELIVERED"))
    assert store.readers.call(lambda c: message(c, "u"))["state"] == "UNCERTAIN"
    deliver(store, InboxReport(PROVIDER, "u", "Q7", "delivered", NOW, "DELIVERED"))
    assert store.readers.call(lambda c: parts_of(c, "u")) == [
        (1, "Q9", "DELIVERED"), (2, "Q7", "DELIVERED")]
    assert store.readers.call(lambda c: message(c, "u"))["state"] == "DELIVERED"


def test_the_cut_off_closes_open_parts_and_a_late_final_part_report_still_lands(
        store: Store) -> None:
    a = two_part_message(store, "a")
    b = two_part_message(store, "b")
    deliver(store, part_report(1, "DELIVERED", NOW - 9, "a"))
    deliver(store, part_report(1, "FAILED", NOW - 9, "b"))
    assert store.writer.call(lambda c: cut_off(c, [a, b], NOW)) == 2
    assert store.readers.call(lambda c: parts_of(c, "a")) == [
        (1, "P1", "DELIVERED"), (2, "P2", "UNKNOWN")]
    ma = store.readers.call(lambda c: message(c, "a"))
    assert (ma["state"], ma["finalised_at"]) == ("UNKNOWN", NOW)
    assert store.readers.call(lambda c: message(c, "b"))["state"] == "FAILED"

    deliver(store, part_report(2, "ENROUTE", NOW + 5, "a"), now=NOW + 10)
    assert store.readers.call(lambda c: message(c, "a"))["state"] == "UNKNOWN"
    deliver(store, part_report(2, "DELIVERED", NOW + 6, "a"), now=NOW + 20)
    ma = store.readers.call(lambda c: message(c, "a"))
    assert (ma["state"], ma["finalised_at"]) == ("DELIVERED", NOW + 20)


def test_coverage_counts_a_message_only_when_every_part_is_final(store: Store) -> None:
    def unit(c: apsw.Connection) -> int:
        acct = add_account(c)
        message_id = add_message(c, acct, "r1", created_at=NOW - 10 * HOUR)
        add_parts(c, message_id, 2)
        return acct

    acct = store.writer.call(unit)
    deliver(store, part_report(1, "DELIVERED", NOW - 5))
    cov = store.readers.call(lambda c: coverage(c, NOW, 48, 6, acct))
    assert (cov.total, cov.finalised, cov.delivered) == (1, 0, 0)
    deliver(store, part_report(2, "DELIVERED", NOW - 4))
    cov = store.readers.call(lambda c: coverage(c, NOW, 48, 6, acct))
    assert (cov.total, cov.finalised, cov.delivered) == (1, 1, 1)
    assert cov.coverage_pct == 100.0


def test_a_message_without_part_rows_is_one_part(store: Store) -> None:
    """Before version 2, and after a refusal, the message has no part rows: a report
    makes its one part, standing where the message stood."""
    store.writer.call(lambda c: add_message(c, add_account(c), "old", provider_msg_id="M1"))
    deliver(store, InboxReport(PROVIDER, "old", "M1", "delivered", NOW, "DELIVERED"))
    assert store.readers.call(lambda c: parts_of(c, "old")) == [(1, "M1", "DELIVERED")]
    deliver(store, InboxReport(PROVIDER, "old", "M1", "enroute", NOW + 1, "ENROUTE"))
    assert store.readers.call(lambda c: message(c, "old"))["state"] == "DELIVERED"
    assert store.readers.call(lambda c: one(
        c, "SELECT count(*) FROM report_inbox WHERE outcome = 'STALE'")) == (1,)
