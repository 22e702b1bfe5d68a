"""Reading a delivery receipt: the TLVs when present, else the text (SMPP-4).

The text follows SMPP 3.4 appendix B, which SMSCs write loosely::

    id:0123456789 sub:001 dlvrd:001 submit date:2501011200 done date:2501011201
    stat:DELIVRD err:000 text:Hello

(one line on the wire).
Keys are read case-insensitively in any order; dates have 10 digits (``YYMMDDhhmm``)
or 12 (``...ss``) and are taken as UTC; with minute resolution two receipts of one
message often tie, and DLR-5 then lets a final state beat an intermediate one.
``receipted_message_id`` and ``message_state`` TLVs win over the text where both exist.

Status words map as the other adapters map them: ``DELIVRD`` -> DELIVERED,
``EXPIRED`` -> EXPIRED, ``UNDELIV`` and ``DELETED`` -> FAILED, ``REJECTD`` -> REJECTED
(final); ``ACCEPTD`` -> ACCEPTED, ``ENROUTE`` and ``UNKNOWN`` -> ENROUTE
(intermediate). Any other word is kept verbatim and is intermediate ENROUTE.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from appliance.smpp.ids import IdReader
from appliance.smpp.pdu import (
    TLV_MESSAGE_PAYLOAD,
    TLV_MESSAGE_STATE,
    TLV_NETWORK_ERROR_CODE,
    TLV_RECEIPTED_MESSAGE_ID,
    ShortMessage,
)
from appliance.states import REPORTED_FINAL_STATES, UNKNOWN_WORD_STATE

STAT_STATES = {
    "DELIVRD": "DELIVERED",
    "DELIVERED": "DELIVERED",
    "EXPIRED": "EXPIRED",
    "DELETED": "FAILED",
    "UNDELIV": "FAILED",
    "UNDELIVERABLE": "FAILED",
    "REJECTD": "REJECTED",
    "REJECTED": "REJECTED",
    "ACCEPTD": "ACCEPTED",
    "ACCEPTED": "ACCEPTED",
    "ENROUTE": "ENROUTE",
    "UNKNOWN": "ENROUTE",
}
# message_state TLV values (SMPP 3.4 section 5.2.28) as the text's words.
MESSAGE_STATE_WORDS = {1: "ENROUTE", 2: "DELIVRD", 3: "EXPIRED", 4: "DELETED", 5: "UNDELIV",
                       6: "ACCEPTD", 7: "UNKNOWN", 8: "REJECTD"}
RECEIPT_TYPES = frozenset({0x04, 0x20})  # esm_class bits 5-2: SMSC receipt, intermediate
ESM_TYPE_MASK = 0x3C

_KEY = re.compile(r"(?i)(?<![a-z])(id|sub|dlvrd|submit date|done date|stat|err|text)\s*:")


class ReceiptError(Exception):
    """A receipt that names no message: kept raw, never applied."""


@dataclass(frozen=True, slots=True)
class Receipt:
    key: str  # canonical SMSC id (appliance.smpp.ids): what the inbox files it under
    message_id: str  # the id as the SMSC wrote it (the TLV's, else the text's)
    tlv_id: str | None
    text_id: str | None
    status: str  # the SMSC's word (from message_state when present)
    state: str  # ours: DELIVERED, FAILED, EXPIRED, REJECTED, ACCEPTED, ENROUTE
    final: bool
    error_code: str | None  # text err:, else network_error_code
    submitted_at_ms: int  # 0 when absent or unreadable
    done_at_ms: int  # 0 when absent or unreadable; the report time
    text: str  # the receipt text as sent


def is_receipt(esm_class: int) -> bool:
    return (esm_class & ESM_TYPE_MASK) in RECEIPT_TYPES


def parse_text(text: str) -> dict[str, str]:
    """The ``key:value`` fields of a receipt text, keys lower-cased; ``text`` is the rest."""
    found = list(_KEY.finditer(text))
    fields: dict[str, str] = {}
    for i, m in enumerate(found):
        name = m.group(1).lower()
        if name == "text":  # the message's first characters: the rest, whatever it holds
            fields.setdefault(name, text[m.end():].strip())
            break
        end = found[i + 1].start() if i + 1 < len(found) else len(text)
        words = text[m.end():end].split()
        fields.setdefault(name, words[0] if words else "")
    return fields


def receipt_time_ms(value: str | None) -> int:
    """``YYMMDDhhmm`` or ``YYMMDDhhmmss`` (UTC) as epoch ms; 0 when absent or unreadable."""
    if not value or not value.isdigit() or len(value) not in (10, 12):
        return 0
    try:
        when = datetime.strptime(value, "%y%m%d%H%M%S" if len(value) == 12 else "%y%m%d%H%M")
    except ValueError:
        return 0
    return int(when.replace(tzinfo=UTC).timestamp() * 1000)


def state_of(word: str) -> str:
    return STAT_STATES.get(word.upper(), UNKNOWN_WORD_STATE)


def _tlv_text(value: bytes | None) -> str | None:
    if value is None:
        return None
    return value.split(b"\x00", 1)[0].decode("latin-1").strip() or None


def read_receipt(sm: ShortMessage, ids: IdReader) -> Receipt:
    """A receipt from a decoded ``deliver_sm``; :class:`ReceiptError` without an id."""
    text = (sm.short_message or sm.tlv(TLV_MESSAGE_PAYLOAD) or b"").decode("latin-1")
    fields = parse_text(text)
    tlv_id = _tlv_text(sm.tlv(TLV_RECEIPTED_MESSAGE_ID))
    text_id = fields.get("id") or None
    key = ids.receipt_key(tlv_id, text_id)
    if key is None:
        raise ReceiptError("receipt without receipted_message_id or id:")
    state_tlv = sm.tlv(TLV_MESSAGE_STATE)
    if state_tlv:
        value = int.from_bytes(state_tlv, "big")
        word = MESSAGE_STATE_WORDS.get(value, f"message_state {value}")
    else:
        word = fields.get("stat", "")
        if not word:
            raise ReceiptError("receipt without message_state or stat:")
    state = state_of(word)
    err = fields.get("err") or None
    if err is None:
        net = sm.tlv(TLV_NETWORK_ERROR_CODE)
        if net and len(net) == 3:
            err = f"{net[0]}:{int.from_bytes(net[1:], 'big')}"
    return Receipt(
        key=key,
        message_id=tlv_id or text_id or "",
        tlv_id=tlv_id,
        text_id=text_id,
        status=word,
        state=state,
        final=state in REPORTED_FINAL_STATES,
        error_code=err,
        submitted_at_ms=receipt_time_ms(fields.get("submit date")),
        done_at_ms=receipt_time_ms(fields.get("done date")),
        text=text,
    )
