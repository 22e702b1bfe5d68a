"""An inbound ``deliver_sm`` as the session hands it to the appliance (SMPP-4).

Every ``deliver_sm`` becomes one :class:`Deliver`: a receipt (``receipt`` set), an
inbound message (``receipt`` is ``None`` and ``is_receipt`` false), or a PDU that could
not be read (``error`` set; ``raw`` still holds it byte for byte). The session answers
``deliver_sm_resp`` only after the appliance's callback returned ``True`` (stored).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from appliance.message_text.alphabets import PLAIN, Tables, tables_of
from appliance.message_text.segments import gsm7_text
from appliance.smpp.encoding import ESM_CLASS_UDHI
from appliance.smpp.ids import IdReader
from appliance.smpp.pdu import (
    TLV_MESSAGE_PAYLOAD,
    PduError,
    ShortMessage,
    header,
    read_short_message,
)
from appliance.smpp.receipt import Receipt, ReceiptError, is_receipt, read_receipt

__all__ = ["Deliver", "DeliverHandler", "gsm7_text", "header_elements", "message_text",
           "read_deliver", "split_udh"]


@dataclass(frozen=True, slots=True)
class Deliver:
    provider: str
    sequence: int
    raw: bytes  # the whole PDU as received
    received_at_ms: int
    is_receipt: bool
    source_addr: str = ""  # for a receipt: the recipient of our message
    destination_addr: str = ""  # for a receipt: our source_addr
    esm_class: int = 0
    data_coding: int = 0
    short_message: bytes = b""
    text: str | None = None  # the message text when its data_coding is readable
    concat: tuple[int, int, int] | None = None  # (ref, total, seq) from a UDH
    receipt: Receipt | None = None
    error: str | None = None  # why it could not be read


DeliverHandler = Callable[[Deliver], Awaitable[bool]]
"""``on_deliver``: ``True`` once the ``deliver_sm`` is durably stored."""


def message_text(data_coding: int, payload: bytes, tables: Tables = PLAIN) -> str | None:
    if data_coding == 0:
        return gsm7_text(payload, tables)
    if data_coding == 1:
        return payload.decode("ascii", errors="replace")
    if data_coding == 3:
        return payload.decode("latin-1")
    if data_coding == 8:
        return payload.decode("utf-16-be", errors="replace")
    return None


def header_elements(esm_class: int, data: bytes) -> dict[int, bytes]:
    """The information elements of a UDH, ``{iei: value}`` (empty without a UDH)."""
    if not esm_class & ESM_CLASS_UDHI or not data:
        return {}
    udh = data[1 : 1 + data[0]]
    out: dict[int, bytes] = {}
    at = 0
    while at + 2 <= len(udh):
        iei, length = udh[at], udh[at + 1]
        out.setdefault(iei, udh[at + 2 : at + 2 + length])
        at += 2 + length
    return out


def shift_tables(esm_class: int, data: bytes) -> Tables:
    """The national language tables a UDH announces (TS 23.040 §9.2.3.24.15/16)."""
    elements = header_elements(esm_class, data)
    return tables_of({iei: v[0] for iei, v in elements.items()
                      if iei in (0x24, 0x25) and len(v) == 1})


def split_udh(esm_class: int, data: bytes) -> tuple[bytes, tuple[int, int, int] | None]:
    """The payload after a UDH and the concatenation it names, if any."""
    if not esm_class & ESM_CLASS_UDHI or not data:
        return data, None
    udh_len = data[0]
    udh, payload = data[1 : 1 + udh_len], data[1 + udh_len :]
    at = 0
    while at + 2 <= len(udh):
        iei, length = udh[at], udh[at + 1]
        value = udh[at + 2 : at + 2 + length]
        if iei == 0x00 and length == 3:
            return payload, (value[0], value[1], value[2])
        if iei == 0x08 and length == 4:
            return payload, (int.from_bytes(value[:2], "big"), value[2], value[3])
        at += 2 + length
    return payload, None


def read_deliver(provider: str, frame: bytes, ids: IdReader, now_ms: int) -> Deliver:
    """Everything a ``deliver_sm`` says; never raises (an unreadable one has ``error``)."""
    sequence = header(frame).sequence
    try:
        sm: ShortMessage = read_short_message(frame)
    except PduError as exc:
        return Deliver(provider, sequence, frame, now_ms, is_receipt=False,
                       error=f"unreadable deliver_sm: {exc}")
    content = sm.short_message or sm.tlv(TLV_MESSAGE_PAYLOAD) or b""

    def deliver(receipt_type: bool, text: str | None, *, receipt: Receipt | None = None,
                error: str | None = None,
                concat: tuple[int, int, int] | None = None) -> Deliver:
        return Deliver(provider, sequence, frame, now_ms, is_receipt=receipt_type,
                       source_addr=sm.source_addr, destination_addr=sm.destination_addr,
                       esm_class=sm.esm_class, data_coding=sm.data_coding,
                       short_message=content, text=text, concat=concat, receipt=receipt,
                       error=error)

    if is_receipt(sm.esm_class):
        try:
            receipt = read_receipt(sm, ids)
        except ReceiptError as exc:
            return deliver(True, content.decode("latin-1"), error=str(exc))
        return deliver(True, receipt.text, receipt=receipt)
    payload, concat = split_udh(sm.esm_class, content)
    tables = shift_tables(sm.esm_class, content)
    return deliver(False, message_text(sm.data_coding, payload, tables), concat=concat)
