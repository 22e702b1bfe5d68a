"""MSG-3: what the sender records of each part, on a real SQLite file through the writer.

The outcomes here are the ones a transport that submits part by part (SMPP: one
``submit_sm`` per segment) reports: a later segment throttled or unanswered after the
first was accepted. The rule under test is the money rule per part: every part the
provider took keeps its id and is never sent again, a part not taken is sent by the
next attempt and only it, a part that may have been taken is never resent blindly.
"""

from __future__ import annotations

import apsw

from appliance.providers.base import Outcome, PartOutcome, SubmitResult
from appliance.reports.apply import receive
from appliance.reports.inbox import InboxReport, RawCallback
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.claims import Claimed, claim_due, mark_sending
from appliance.sending.outcomes import record_outcomes
from appliance.sending.recovery import recover_interrupted
from appliance.store import Store

NOW = 1_700_000_000_000
PROVIDER = "smsc"
THREE_PARTS = "x" * 400  # GSM-7: 3 x 153
ACCEPTED, RETRY, REJECTED, UNCERTAIN = (SubmitResult.ACCEPTED, SubmitResult.RETRY,
                                        SubmitResult.REJECTED, SubmitResult.UNCERTAIN)


def queue(store: Store, ref: str, body: str = THREE_PARTS) -> None:
    def unit(c: apsw.Connection) -> None:
        row = c.execute("SELECT id FROM accounts WHERE name = 'acme'").fetchone()
        acct = int(row[0]) if row else int(c.execute(
            "INSERT INTO accounts (name, created_at) VALUES ('acme', 0) RETURNING id"
        ).fetchone()[0])  # type: ignore[index]
        insert_message(c, NewMessage(acct, PROVIDER, "+905321234567", body), ref, NOW)

    store.writer.call(unit)


def claim(store: Store, now: int = NOW) -> list[Claimed]:
    """Reserve, then mark SENDING, as the sender does just before submitting."""
    return store.writer.call(lambda c: mark_sending(c, claim_due(c, PROVIDER, now, 10), now))


def record(store: Store, claimed: Claimed, outcome: Outcome, *, max_attempts: int = 8,
           per_part: bool = True, map_ids: bool = True, now: int = NOW) -> None:
    store.writer.call(lambda c: record_outcomes(
        c, PROVIDER, [(claimed, outcome)], now, max_attempts=max_attempts,
        dedupes_on_ref=False, map_provider_ids=map_ids, reports_per_part=per_part))


def state(store: Store, ref: str) -> tuple[str, str | None]:
    row = store.readers.call(lambda c: c.execute(
        "SELECT state, error FROM messages WHERE ref = ?", (ref,)).fetchone())
    assert row is not None
    return str(row[0]), row[1]


def parts(store: Store, ref: str) -> list[tuple[int, str | None, str]]:
    return store.readers.call(lambda c: [(int(r[0]), r[1], str(r[2])) for r in c.execute(
        "SELECT p.part, p.provider_msg_id, p.state FROM message_parts p JOIN messages m"
        " ON m.id = p.message_id WHERE m.ref = ? ORDER BY p.part", (ref,))])


def report(store: Store, pid: str, status: str = "delivered", state_: str = "DELIVERED",
           now: int = NOW) -> None:
    """A receipt carrying only the provider's id, as SMPP's do."""
    raw = RawCallback(PROVIDER, "SMPP", "", "", b"")
    store.writer.call(lambda c: receive(
        c, raw, [InboxReport(PROVIDER, "", pid, status, now, state_)], None, now))


def test_a_throttled_segment_is_sent_alone_by_the_next_attempt(store: Store) -> None:
    queue(store, "m1")
    [first] = claim(store)
    assert (first.parts, first.skip_parts) == (3, frozenset())
    record(store, first, Outcome.of_parts((
        PartOutcome(1, ACCEPTED, "S1"), PartOutcome(2, RETRY, error="throttled",
                                                    retry_after_s=2.0),
        PartOutcome(3, RETRY, error="not sent"))))
    assert state(store, "m1")[0] == "RETRY"
    assert parts(store, "m1") == [(1, "S1", "SUBMITTED"), (2, None, "RETRY"),
                                  (3, None, "RETRY")]
    assert claim(store, NOW + 1_999) == []  # the wait the throttled segment asked for
    [again] = claim(store, NOW + 2_000)
    assert again.skip_parts == frozenset({1}) and again.parts_to_send == (2, 3)
    record(store, again, Outcome.of_parts((PartOutcome(2, ACCEPTED, "S2"),
                                           PartOutcome(3, ACCEPTED, "S3"))))
    assert state(store, "m1")[0] == "SUBMITTED"
    assert parts(store, "m1") == [(1, "S1", "SUBMITTED"), (2, "S2", "SUBMITTED"),
                                  (3, "S3", "SUBMITTED")]
    for pid in ("S3", "S1"):
        report(store, pid)
        assert state(store, "m1")[0] == "SUBMITTED"
    report(store, "S2", "undeliv", "FAILED")
    assert state(store, "m1") == ("FAILED", "part 2: report: undeliv")


def test_a_report_for_a_taken_part_while_the_rest_waits_keeps_the_message_to_send(
        store: Store) -> None:
    queue(store, "m1")
    [first] = claim(store)
    record(store, first, Outcome.of_parts((PartOutcome(1, ACCEPTED, "S1"),
                                           PartOutcome(2, RETRY), PartOutcome(3, RETRY))))
    report(store, "S1")
    assert state(store, "m1")[0] == "RETRY"
    [again] = claim(store, NOW + 10**7)
    assert again.skip_parts == frozenset({1})


def test_an_unanswered_segment_is_uncertain_and_never_resent(store: Store) -> None:
    queue(store, "m1")
    [first] = claim(store)
    record(store, first, Outcome.of_parts((
        PartOutcome(1, ACCEPTED, "S1"), PartOutcome(2, UNCERTAIN, error="no submit_sm_resp"),
        PartOutcome(3, RETRY))))
    # Part 3 can go, part 2 may be at the provider: the next attempt sends 3 only.
    [again] = claim(store, NOW + 10**7)
    assert again.skip_parts == frozenset({1, 2}) and again.parts_to_send == (3,)
    record(store, again, Outcome.of_parts((PartOutcome(3, ACCEPTED, "S3"),)))
    assert state(store, "m1")[0] == "UNCERTAIN"
    assert claim(store, NOW + 10**8) == []
    for pid in ("S1", "S3", "S2"):
        report(store, pid)
    # A receipt that names only an id we never heard cannot be matched: it waits in the
    # inbox, and part 2 stays open (until a receipt proves it, or the cut-off).
    assert parts(store, "m1") == [(1, "S1", "DELIVERED"), (2, None, "UNCERTAIN"),
                                  (3, "S3", "DELIVERED")]
    assert state(store, "m1")[0] == "UNCERTAIN"
    waiting = store.readers.call(lambda c: c.execute(
        "SELECT provider_msg_id FROM report_inbox WHERE applied_at IS NULL").fetchall())
    assert [tuple(r) for r in waiting] == [("S2",)]


def test_a_transport_that_reports_a_skipped_part_never_overwrites_it(store: Store) -> None:
    queue(store, "m1")
    [first] = claim(store)
    record(store, first, Outcome.of_parts((PartOutcome(1, ACCEPTED, "S1"),
                                           PartOutcome(2, RETRY), PartOutcome(3, RETRY))))
    [again] = claim(store, NOW + 10**7)
    record(store, again, Outcome.of_parts((PartOutcome(1, REJECTED, error="dup"),
                                           PartOutcome(2, ACCEPTED, "S2"),
                                           PartOutcome(3, ACCEPTED, "S3"))))
    assert parts(store, "m1")[0] == (1, "S1", "SUBMITTED")
    assert state(store, "m1")[0] == "SUBMITTED"


def test_out_of_attempts_the_parts_left_are_rejected_and_the_rest_stands(
        store: Store) -> None:
    queue(store, "m1")
    [first] = claim(store)
    record(store, first, Outcome.of_parts((PartOutcome(1, ACCEPTED, "S1"),
                                           PartOutcome(2, RETRY, error="throttled"),
                                           PartOutcome(3, RETRY))), max_attempts=1)
    assert parts(store, "m1") == [(1, "S1", "SUBMITTED"), (2, None, "REJECTED"),
                                  (3, None, "REJECTED")]
    assert state(store, "m1") == ("SUBMITTED", "gave up after 1 attempts; last: "
                                               "part 2: throttled")
    report(store, "S1")
    assert state(store, "m1")[0] == "REJECTED"


def test_a_message_level_answer_on_a_later_attempt_is_the_parts_it_tried(
        store: Store) -> None:
    queue(store, "m1")
    [first] = claim(store)
    record(store, first, Outcome.of_parts((PartOutcome(1, ACCEPTED, "S1"),
                                           PartOutcome(2, RETRY), PartOutcome(3, RETRY))))
    [again] = claim(store, NOW + 10**7)
    record(store, again, Outcome(UNCERTAIN, error="session dropped"))
    assert parts(store, "m1") == [(1, "S1", "SUBMITTED"), (2, None, "UNCERTAIN"),
                                  (3, None, "UNCERTAIN")]
    assert state(store, "m1") == ("UNCERTAIN", "session dropped")


def test_an_uncertain_answer_leaves_one_part_per_reported_part(store: Store) -> None:
    queue(store, "per-part")
    queue(store, "one-id", body="ş" * 100)
    a, b = claim(store)
    record(store, a, Outcome(UNCERTAIN, error="ReadTimeout"), per_part=True)
    record(store, b, Outcome(UNCERTAIN, error="ReadTimeout"), per_part=False)
    assert [s for _, _, s in parts(store, "per-part")] == ["UNCERTAIN"] * 3
    assert parts(store, "one-id") == [(1, None, "UNCERTAIN")]


def test_one_id_for_the_whole_message_is_one_part_and_the_billed_parts_stay_ours(
        store: Store) -> None:
    queue(store, "m1", body="Merhaba Ayşe, " + "ş" * 80)
    [first] = claim(store)
    record(store, first, Outcome(ACCEPTED, provider_msg_id="SM1"), per_part=False,
           map_ids=False)
    assert parts(store, "m1") == [(1, "SM1", "SUBMITTED")]
    row = store.readers.call(lambda c: c.execute(
        "SELECT encoding, parts, ucs2_because, provider_msg_id FROM messages").fetchone())
    assert tuple(row) == ("UCS-2", 2, "ş", "SM1")  # type: ignore[arg-type]


def test_a_crash_while_sending_the_parts_left_makes_them_uncertain(store: Store) -> None:
    queue(store, "m1")
    queue(store, "m2")
    first, _fresh = claim(store)
    record(store, first, Outcome.of_parts((PartOutcome(1, ACCEPTED, "S1"),
                                           PartOutcome(2, RETRY), PartOutcome(3, RETRY))))
    claim(store, NOW + 10**7)  # m1 SENDING again, m2 still SENDING: the process dies
    count = store.writer.call(lambda c: recover_interrupted(c, PROVIDER, NOW + 10**7,
                                                            False, True))
    assert count == 2
    assert parts(store, "m1") == [(1, "S1", "SUBMITTED"), (2, None, "UNCERTAIN"),
                                  (3, None, "UNCERTAIN")]
    assert [s for _, _, s in parts(store, "m2")] == ["UNCERTAIN"] * 3
    assert {state(store, r)[0] for r in ("m1", "m2")} == {"UNCERTAIN"}
    assert claim(store, NOW + 10**8) == []


def test_the_id_mapping_serves_each_part(store: Store) -> None:
    queue(store, "m1")
    [first] = claim(store)
    record(store, first, Outcome.of_parts(tuple(
        PartOutcome(p, ACCEPTED, f"S{p}") for p in (1, 2, 3))))
    rows = store.readers.call(lambda c: sorted(c.execute(
        "SELECT provider_msg_id, ref, part FROM provider_ids")))
    assert [tuple(r) for r in rows] == [("S1", "m1", 1), ("S2", "m1", 2), ("S3", "m1", 3)]
