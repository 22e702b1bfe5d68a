"""Reading delivery receipts: TLVs first, else the text (SMPP-4)."""

from __future__ import annotations

import pytest

from appliance.smpp import pdu
from appliance.smpp.deliver import read_deliver
from appliance.smpp.ids import IdReader
from appliance.smpp.receipt import parse_text, read_receipt, receipt_time_ms, state_of

STD = ("id:0123456789 sub:001 dlvrd:001 submit date:2501011200 done date:2501011201"
       " stat:DELIVRD err:000 text:Hello there")


def receipt_frame(text: str, tlvs: tuple[pdu.Tlv, ...] = (), esm_class: int = 0x04) -> bytes:
    return pdu.deliver_sm(9, source_addr="905321234567", destination_addr="ACME",
                          esm_class=esm_class, short_message=text.encode("latin-1"), tlvs=tlvs)


@pytest.mark.parametrize(("text", "expected"), [
    (STD, {"id": "0123456789", "sub": "001", "dlvrd": "001", "submit date": "2501011200",
           "done date": "2501011201", "stat": "DELIVRD", "err": "000", "text": "Hello there"}),
    # keys in any case and order; seconds in the dates; no text
    ("Stat:UNDELIV ID:abc-9 Done Date:250101120133 err:069", {
        "stat": "UNDELIV", "id": "abc-9", "done date": "250101120133", "err": "069"}),
    # the text field is the rest, even when it looks like fields
    ("id:7 stat:EXPIRED text:id:1 stat:DELIVRD", {"id": "7", "stat": "EXPIRED",
                                                  "text": "id:1 stat:DELIVRD"}),
    # empty values, extra spaces
    ("id: 55  sub:  stat:ACCEPTD", {"id": "55", "sub": "", "stat": "ACCEPTD"}),
    ("no receipt here", {}),
])
def test_parse_text(text: str, expected: dict[str, str]) -> None:
    assert parse_text(text) == expected


@pytest.mark.parametrize(("value", "ms"), [
    ("2501011201", 1735732860000),  # 2025-01-01 12:01 UTC, minute resolution
    ("250101120133", 1735732893000),  # with seconds
    ("2513011201", 0),  # month 13
    ("25010112", 0),
    ("", 0),
    (None, 0),
])
def test_receipt_dates(value: str | None, ms: int) -> None:
    assert receipt_time_ms(value) == ms


@pytest.mark.parametrize(("word", "state"), [
    ("DELIVRD", "DELIVERED"), ("EXPIRED", "EXPIRED"), ("DELETED", "FAILED"),
    ("UNDELIV", "FAILED"), ("ACCEPTD", "ACCEPTED"), ("UNKNOWN", "ENROUTE"),
    ("REJECTD", "REJECTED"), ("ENROUTE", "ENROUTE"), ("delivrd", "DELIVERED"),
    ("BLOCKED", "ENROUTE"),  # an unknown word is intermediate, never final
])
def test_stat_words(word: str, state: str) -> None:
    assert state_of(word) == state


def test_text_receipt() -> None:
    r = read_receipt(pdu.read_short_message(receipt_frame(STD)), IdReader("auto"))
    assert (r.key, r.message_id, r.tlv_id, r.text_id) == ("123456789", "0123456789", None,
                                                          "0123456789")
    assert (r.status, r.state, r.final, r.error_code) == ("DELIVRD", "DELIVERED", True, "000")
    assert r.done_at_ms == 1735732860000 and r.submitted_at_ms == 1735732800000


def test_tlvs_win_over_the_text() -> None:
    frame = receipt_frame("id:999 stat:DELIVRD", (
        pdu.Tlv(pdu.TLV_RECEIPTED_MESSAGE_ID, b"1A2B\x00"),
        pdu.Tlv(pdu.TLV_MESSAGE_STATE, bytes((5,))),
        pdu.Tlv(pdu.TLV_NETWORK_ERROR_CODE, bytes((3, 0x01, 0xF4))),
        pdu.Tlv(0x1401, b"\xff\x00vendor")))  # a binary vendor TLV does not spoil it
    r = read_receipt(pdu.read_short_message(frame), IdReader("auto"))
    assert (r.key, r.message_id, r.status, r.state) == ("6699", "1A2B", "UNDELIV", "FAILED")
    assert r.error_code == "3:500"


def test_a_tlv_only_receipt() -> None:
    frame = receipt_frame("", (pdu.Tlv(pdu.TLV_RECEIPTED_MESSAGE_ID, b"abc\x00"),
                               pdu.Tlv(pdu.TLV_MESSAGE_STATE, bytes((2,))),
                               pdu.Tlv(pdu.TLV_NETWORK_ERROR_CODE, bytes((3, 0x01, 0xF4)))))
    r = read_receipt(pdu.read_short_message(frame), IdReader("auto"))
    assert (r.key, r.status, r.final, r.error_code) == ("2748", "DELIVRD", True, "3:500")


def test_receipts_that_cannot_be_read_are_kept_raw() -> None:
    ids = IdReader("auto")
    no_id = read_deliver("smsc", receipt_frame("stat:DELIVRD"), ids, 5)
    assert no_id.is_receipt and no_id.receipt is None and "id" in (no_id.error or "")
    no_stat = read_deliver("smsc", receipt_frame("id:77"), ids, 5)
    assert no_stat.receipt is None and "stat" in (no_stat.error or "")
    broken = receipt_frame(STD)[:-3]
    broken = pdu.HEADER.pack(len(broken), pdu.DELIVER_SM, 0, 9) + broken[16:]
    unreadable = read_deliver("smsc", broken, ids, 5)
    assert unreadable.error and unreadable.raw == broken and unreadable.sequence == 9


def test_intermediate_notification_is_a_receipt_and_sme_messages_are_not() -> None:
    ids = IdReader("auto")
    assert read_deliver("smsc", receipt_frame("id:1 stat:ENROUTE", esm_class=0x20), ids,
                        0).receipt is not None
    mo = read_deliver("smsc", receipt_frame("id:1 stat:DELIVRD", esm_class=0x00), ids, 0)
    assert not mo.is_receipt and mo.text == "id:1 stat:DELIVRD"
