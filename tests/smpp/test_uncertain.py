"""Receipts filed first and UNCERTAIN parts settled later, on a real store (SMPP-4, SMPP-5).

Messages are put in the state the sender leaves them (accepted, claimed, outcomes
recorded by its own unit), and receipts are real ``deliver_sm`` PDUs read by the
session's reader.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.inbound.store import InboundRules
from appliance.message_text.segments import segment
from appliance.optout.keywords import Keywords
from appliance.providers.base import Outcome, PartOutcome, SubmitResult
from appliance.sending.accept import NewMessage, insert_message
from appliance.sending.claims import claim_due, mark_sending
from appliance.sending.outcomes import record_outcomes
from appliance.smpp import pdu
from appliance.smpp.deliver import Deliver, read_deliver
from appliance.smpp.encoding import payload
from appliance.smpp.id_memory import load_evidence, rekey, save_evidence
from appliance.smpp.ids import IdEvidence, IdReader
from appliance.smpp.intake import store_inbound, store_receipt
from appliance.smpp.submission import LateResponse
from appliance.smpp.uncertain import match_orphans, record_late_id
from appliance.store import Store

P = "smsc"
NOW = 1_800_000_000_000
TO = "+905321234567"
LONG = "Değerli müşterimiz, kampanyamız başladı: tüm ürünlerde indirim! " * 2


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(str(tmp_path / "appliance.db"))
    try:
        s.writer.call(lambda c: c.execute(
            "INSERT INTO accounts (name, created_at) VALUES ('acme', 0)"))
        yield s
    finally:
        s.close()


def queue(store: Store, ref: str, body: str = "hello", to: str = TO) -> None:
    store.writer.call(lambda c: insert_message(c, NewMessage(1, P, to, body), ref, NOW))


def claim(store: Store) -> list[Any]:
    # The sender's two steps: reserve a batch, then make each SENDING as it goes.
    return store.writer.call(lambda c: mark_sending(c, claim_due(c, P, NOW, 100), NOW))


def record(store: Store, claimed: Any, *parts: PartOutcome) -> None:
    outcome = Outcome.of_parts(tuple(parts))
    store.writer.call(lambda c: record_outcomes(
        c, P, [(claimed, outcome)], NOW, max_attempts=8, dedupes_on_ref=False,
        map_provider_ids=True, reports_per_part=True))


def receipt(smsc_id: str, word: str = "DELIVRD", to: str = TO, excerpt: bytes = b"",
            tlv: bool = False, seq: int = 1) -> Deliver:
    text = (f"id:{smsc_id} sub:001 dlvrd:001 submit date:2701011200 done date:2701011201"
            f" stat:{word} err:000 text:").encode() + excerpt
    tlvs = (pdu.Tlv(pdu.TLV_RECEIPTED_MESSAGE_ID, smsc_id.encode() + b"\x00"),) if tlv else ()
    frame = pdu.deliver_sm(seq, source_addr=to.removeprefix("+"), destination_addr="ACME",
                           esm_class=0x04, short_message=text, tlvs=tlvs)
    return read_deliver(P, frame, IdReader("auto", IdEvidence(submit_hex=True)), NOW)


def file(store: Store, d: Deliver) -> str:
    return store.writer.call(lambda c: store_receipt(c, P, d, NOW))


def row(store: Store, sql: str, args: tuple[Any, ...] = ()) -> Any:
    return store.readers.call(lambda c: c.execute(sql, args).fetchone())


def part_state(store: Store, ref: str, part: int) -> tuple[Any, ...]:
    return tuple(row(store, "SELECT p.provider_msg_id, p.state FROM message_parts p"
                            " JOIN messages m ON m.id = p.message_id WHERE m.ref = ?"
                            " AND p.part = ?", (ref, part)))


def state(store: Store, ref: str) -> str:
    return str(row(store, "SELECT state FROM messages WHERE ref = ?", (ref,))[0])


def test_a_receipt_before_its_outcome_waits_then_the_outcome_unit_applies_it(
        store: Store) -> None:
    queue(store, "r1")
    [m] = claim(store)
    d = receipt("1A2B")  # the SMSC's receipt beats our record of its submit_sm_resp
    assert d.receipt is not None and d.receipt.key == "6699"
    assert file(store, d) == "waiting"
    assert file(store, d) == "repeat"  # the SMSC sent it twice: one fact
    record(store, m, PartOutcome(1, SubmitResult.ACCEPTED, "6699"))
    assert state(store, "r1") == "DELIVERED"
    raw = row(store, "SELECT method, content_type, body FROM raw_reports")
    assert raw == ("SMPP", "application/vnd.smpp.deliver-sm", d.raw)


def test_an_unreadable_receipt_is_stored_unparsed(store: Store) -> None:
    frame = pdu.deliver_sm(3, source_addr="905321234567", destination_addr="ACME",
                           esm_class=0x04, short_message=b"garbage without fields")
    d = read_deliver(P, frame, IdReader("auto"), NOW)
    assert file(store, d) == "unreadable"
    assert row(store, "SELECT parsed, body FROM raw_reports") == (0, frame)


def test_a_late_answer_settles_its_uncertain_part_and_applies_what_waits(store: Store) -> None:
    queue(store, "r2", LONG)
    [m] = claim(store)
    late = LateResponse("r2", 2, 0, "ESME_ROK", "00FF", "255")
    assert store.writer.call(lambda c: record_late_id(c, P, late, NOW)) == "later"
    record(store, m, PartOutcome(1, SubmitResult.ACCEPTED, "10"),
           PartOutcome(2, SubmitResult.UNCERTAIN, None, "no submit_sm_resp within 1 s"))
    assert state(store, "r2") == "UNCERTAIN"
    assert file(store, receipt("00FF")) == "waiting"  # its id is not known yet
    assert store.writer.call(lambda c: record_late_id(c, P, late, NOW)) == "recorded"
    assert part_state(store, "r2", 2) == ("255", "DELIVERED")
    assert state(store, "r2") == "SUBMITTED"  # part 1 still waits for its receipt
    assert store.writer.call(lambda c: record_late_id(c, P, late, NOW)) == "known"


def test_a_late_answer_without_a_receipt_yet_makes_the_part_submitted(store: Store) -> None:
    queue(store, "r3")
    [m] = claim(store)
    record(store, m, PartOutcome(1, SubmitResult.UNCERTAIN, None, "lost"))
    late = LateResponse("r3", 1, 0, "ESME_ROK", "ABC", "2748")
    assert store.writer.call(lambda c: record_late_id(c, P, late, NOW)) == "recorded"
    assert part_state(store, "r3", 1) == ("2748", "SUBMITTED")
    assert row(store, "SELECT state, error FROM messages") == ("SUBMITTED", None)
    assert row(store, "SELECT ref, part FROM provider_ids WHERE provider_msg_id = '2748'"
               ) == ("r3", 1)


def uncertain_message(store: Store, ref: str, body: str, to: str = TO) -> None:
    queue(store, ref, body, to)
    for m in claim(store):
        record(store, m, *(PartOutcome(p, SubmitResult.UNCERTAIN, None, "session lost")
                           for p in range(1, segment(m.body).count + 1)))


def orphans_swept(store: Store) -> Any:
    return store.writer.call(lambda c: match_orphans(c, P, "TR", NOW, NOW + 1, 0))


def test_a_receipt_whose_id_was_never_answered_binds_to_the_one_part_it_fits(
        store: Store) -> None:
    uncertain_message(store, "a", "first text, to this number")
    uncertain_message(store, "b", LONG)
    parts = segment(LONG).parts
    # A receipt for part 2 of b: same number as a, its excerpt (as octets) part 2's.
    excerpt = payload(parts[1], "UCS-2")[:20]
    assert file(store, receipt("0AAA", excerpt=excerpt)) == "waiting"
    swept = orphans_swept(store)
    assert (swept.matched, swept.ambiguous) == (1, 0)
    assert part_state(store, "b", 2) == ("2730", "DELIVERED")
    assert part_state(store, "a", 1) == (None, "UNCERTAIN")
    # A repeat of that receipt now matches by its id at once.
    assert file(store, receipt("0AAA", word="ENROUTE", excerpt=excerpt)) == "applied"


def test_a_receipt_two_parts_fit_keeps_waiting(store: Store) -> None:
    uncertain_message(store, "a", "same words")
    uncertain_message(store, "b", "same words, to the same number")
    assert file(store, receipt("0BBB")) == "waiting"  # no text: both fit
    swept = orphans_swept(store)
    assert (swept.matched, swept.ambiguous) == (0, 1)
    assert row(store, "SELECT count(*) FROM report_inbox WHERE applied_at IS NULL") == (1,)


def test_nothing_is_bound_while_a_message_to_that_number_is_being_sent(store: Store) -> None:
    uncertain_message(store, "a", "an old uncertain message")
    queue(store, "b", "the one being sent now")
    [m] = claim(store)  # SENDING: its own answer may still come
    assert file(store, receipt("0CCC")) == "waiting"
    assert orphans_swept(store).busy == 1
    record(store, m, PartOutcome(1, SubmitResult.ACCEPTED, "3276"))  # it was b's
    assert part_state(store, "b", 1) == ("3276", "DELIVERED")
    assert part_state(store, "a", 1) == (None, "UNCERTAIN")


def test_ids_read_as_decimal_before_the_smsc_showed_hex_are_refiled(store: Store) -> None:
    reader = IdReader("auto")
    early = reader.submit_key("12345678")  # all digits, nothing known: read as decimal
    queue(store, "r4")
    [m] = claim(store)
    record(store, m, PartOutcome(1, SubmitResult.ACCEPTED, early))
    reader.submit_key("0A0B0C0D")  # now the SMSC has shown hex ids
    d = receipt("12345678", tlv=True)  # its receipt, read with what is known now
    assert d.receipt is not None and d.receipt.key == "305419896" != early
    assert file(store, d) == "waiting"
    pairs = reader.corrections()
    assert pairs == [("12345678", "305419896")] and reader.corrections() == []
    assert store.writer.call(lambda c: rekey(c, P, pairs, NOW)) == 1
    assert part_state(store, "r4", 1) == ("305419896", "DELIVERED")
    assert store.writer.call(lambda c: rekey(c, P, pairs, NOW)) == 0  # done once


def test_a_receipt_refiled_onto_its_duplicate_merges_with_it(store: Store) -> None:
    # The first session: "10000001" read as decimal before the SMSC showed a letter;
    # its early receipt waits under that reading, its answer and its duplicate come
    # after the switch and are filed under the hexadecimal value (applied there).
    reader = IdReader("auto")
    d_early = read_deliver(P, pdu.deliver_sm(
        1, source_addr=TO.removeprefix("+"), destination_addr="ACME", esm_class=0x04,
        short_message=b"id:10000001 sub:001 dlvrd:001 submit date:2701011200"
                      b" done date:2701011201 stat:DELIVRD err:000 text:",
        tlvs=(pdu.Tlv(pdu.TLV_RECEIPTED_MESSAGE_ID, b"10000001\x00"),)), reader, NOW)
    assert d_early.receipt is not None and d_early.receipt.key == "10000001"
    queue(store, "r6")
    [m] = claim(store)
    assert file(store, d_early) == "waiting"
    assert reader.submit_key("1000000A") == "268435466"  # the switch
    record(store, m, PartOutcome(1, SubmitResult.ACCEPTED, reader.submit_key("10000001")))
    assert file(store, receipt("10000001", tlv=True)) == "applied"  # the duplicate, as hex
    pairs = reader.corrections()
    assert ("10000001", "268435457") in pairs
    assert store.writer.call(lambda c: rekey(c, P, pairs, NOW)) == 1
    rows = store.readers.call(lambda c: c.execute(
        "SELECT provider_msg_id, outcome, repeats FROM report_inbox").fetchall())
    assert rows == [("268435457", "APPLIED", 1)]  # one fact, its repeat counted
    assert part_state(store, "r6", 1) == ("268435457", "DELIVERED")
    assert store.writer.call(lambda c: rekey(c, P, pairs, NOW)) == 0
    counted = row(store, "SELECT n FROM row_counts WHERE name = 'report_inbox'"
                         " AND key = 'WAITING'")
    assert counted in (None, (0,))


def test_what_auto_learnt_is_kept(store: Store) -> None:
    assert store.readers.call(lambda c: load_evidence(c, P)) == IdEvidence()
    store.writer.call(lambda c: save_evidence(c, P, IdEvidence(submit_hex=True), NOW))
    assert store.readers.call(lambda c: load_evidence(c, P)) == IdEvidence(submit_hex=True)


def test_an_inbound_deliver_sm_is_filed_with_its_parts(store: Store) -> None:
    rules = InboundRules(Keywords(("STOP",)), "TR")

    def mo(seq: int, part: int, text: str) -> str:
        udh = bytes((5, 0, 3, 7, 2, part))  # reference 7, two parts
        frame = pdu.deliver_sm(seq, source_addr="905321234567", destination_addr="ACME",
                               esm_class=0x40, data_coding=8,
                               short_message=udh + text.encode("utf-16-be"))
        d = read_deliver(P, frame, IdReader("auto"), NOW)
        return str(store.writer.call(functools.partial(store_inbound, rules=rules,
                                                       provider=P, d=d, now_ms=NOW)))

    # Part 2 comes twice (the SMSC delivered it again): one part, one repeat.
    assert [mo(1, 1, "Merhaba, "), mo(2, 2, "STOP"), mo(3, 2, "STOP")] == ["inbound"] * 3
    # The same sender's next long message reuses UDH reference 7: a new message.
    assert [mo(4, 2, "ikinci"), mo(5, 1, "Bu "), mo(6, 1, "Bu ")] == ["inbound"] * 3
    got = store.readers.call(lambda c: c.execute(
        "SELECT msisdn, text, parts_received, repeats, keyword FROM inbound_messages"
        " ORDER BY id").fetchall())
    assert got == [("+905321234567", "Merhaba, STOP", 2, 1, "STOP"),
                   ("+905321234567", "Bu ikinci", 2, 1, None)]


def test_minute_resolution_receipts_a_final_state_beats_an_intermediate_one(
        store: Store) -> None:
    queue(store, "r5")
    [m] = claim(store)
    record(store, m, PartOutcome(1, SubmitResult.ACCEPTED, "255"))
    # Same minute (10-digit dates): the final wins whichever comes first (DLR-5).
    assert file(store, receipt("FF", "DELIVRD")) == "applied"
    assert file(store, receipt("FF", "ENROUTE")) == "applied"  # kept, as history only
    assert part_state(store, "r5", 1) == ("255", "DELIVERED")
    outcomes = store.readers.call(lambda c: c.execute(
        "SELECT status, outcome FROM report_inbox ORDER BY id").fetchall())
    assert outcomes == [("DELIVRD", "APPLIED"), ("ENROUTE", "STALE")]
