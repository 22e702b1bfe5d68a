"""SMPP 3.4 PDUs on the wire: framing, the control PDUs, and the message PDUs.

``submit_sm`` and ``deliver_sm`` (the PDUs with content, data coding and optional
parameters) are encoded and decoded by the ``smpp34`` codec. Its Python binding has no
encoder for the fixed-layout control PDUs (``bind_*`` and their responses,
``submit_sm_resp``, ``deliver_sm_resp``, ``enquire_link``, ``unbind``,
``generic_nack``): each is the 16-octet header and at most four C-octet strings and
three integers, built here. Every PDU starts with the same header:
``command_length, command_id, command_status, sequence_number``, four big-endian
unsigned 32-bit integers.
"""

from __future__ import annotations

import asyncio
import struct
from dataclasses import dataclass

import smpp34

from appliance.smpp.status import ESME_ROK

HEADER = struct.Struct("!IIII")
HEADER_LEN = HEADER.size
# SMPP 3.4 puts no limit on command_length; a submit_sm with a full message_payload
# is ~64 KiB, so anything larger is a broken peer, not a message.
MAX_PDU_LEN = 70_000

GENERIC_NACK = 0x80000000
BIND_RECEIVER = 0x00000001
BIND_TRANSMITTER = 0x00000002
SUBMIT_SM = 0x00000004
DELIVER_SM = 0x00000005
UNBIND = 0x00000006
BIND_TRANSCEIVER = 0x00000009
OUTBIND = 0x0000000B
ENQUIRE_LINK = 0x00000015
DATA_SM = 0x00000103
RESP = 0x80000000

BIND_COMMANDS = {"receiver": BIND_RECEIVER, "transmitter": BIND_TRANSMITTER,
                 "transceiver": BIND_TRANSCEIVER}
INTERFACE_VERSION = 0x34

# Optional parameter tags used here (SMPP 3.4 section 5.3.2).
TLV_RECEIPTED_MESSAGE_ID = 0x001E
TLV_MESSAGE_STATE = 0x0427
TLV_NETWORK_ERROR_CODE = 0x0423
TLV_SAR_MSG_REF_NUM = 0x020C
TLV_SAR_TOTAL_SEGMENTS = 0x020E
TLV_SAR_SEGMENT_SEQNUM = 0x020F
TLV_MESSAGE_PAYLOAD = 0x0424


class PduError(Exception):
    """A frame that is not a readable PDU; the link that sent it cannot be trusted."""


@dataclass(frozen=True, slots=True)
class Header:
    length: int
    command_id: int
    status: int
    sequence: int

    @property
    def is_response(self) -> bool:
        return bool(self.command_id & RESP)


def header(frame: bytes) -> Header:
    return Header(*HEADER.unpack_from(frame))


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    """One whole PDU; ``asyncio.IncompleteReadError`` at end of stream."""
    head = await reader.readexactly(HEADER_LEN)
    (length,) = struct.unpack_from("!I", head)
    if not HEADER_LEN <= length <= MAX_PDU_LEN:
        raise PduError(f"command_length {length} out of range")
    if length == HEADER_LEN:
        return head
    return head + await reader.readexactly(length - HEADER_LEN)


def frame(command_id: int, sequence: int, body: bytes = b"", status: int = ESME_ROK) -> bytes:
    return HEADER.pack(HEADER_LEN + len(body), command_id, status, sequence) + body


def c_string(text: str, max_len: int) -> bytes:
    """A C-octet string of at most ``max_len`` characters (ASCII) plus the NUL."""
    data = text.encode("ascii")
    if len(data) > max_len or b"\x00" in data:
        raise ValueError(f"{text!r}: at most {max_len} ASCII characters")
    return data + b"\x00"


def read_c_strings(body: bytes, count: int) -> tuple[list[str], int]:
    """``count`` C-octet strings from the start of ``body`` and the offset after them.

    Bytes are read as Latin-1 so that a peer's odd byte never makes a PDU unreadable.
    """
    out: list[str] = []
    at = 0
    for _ in range(count):
        end = body.find(b"\x00", at)
        if end < 0:
            raise PduError("C-octet string without its NUL")
        out.append(body[at:end].decode("latin-1"))
        at = end + 1
    return out, at


# -- control PDUs ------------------------------------------------------------------------


def bind(command_id: int, sequence: int, *, system_id: str, password: str,
         system_type: str = "", addr_ton: int = 0, addr_npi: int = 0,
         address_range: str = "") -> bytes:
    body = (c_string(system_id, 15) + c_string(password, 8) + c_string(system_type, 12)
            + bytes((INTERFACE_VERSION, addr_ton, addr_npi)) + c_string(address_range, 40))
    return frame(command_id, sequence, body)


@dataclass(frozen=True, slots=True)
class BindRequest:
    system_id: str
    password: str
    system_type: str
    interface_version: int


def read_bind(frame_: bytes) -> BindRequest:
    body = frame_[HEADER_LEN:]
    (system_id, password, system_type), at = read_c_strings(body, 3)
    if len(body) < at + 3:
        raise PduError("bind too short")
    return BindRequest(system_id, password, system_type, body[at])


def bind_resp(command_id: int, sequence: int, status: int, system_id: str) -> bytes:
    body = c_string(system_id, 15)
    return frame(command_id | RESP, sequence, body, status)


def submit_sm_resp(sequence: int, status: int, message_id: str = "") -> bytes:
    # An error response carries no body (SMPP 3.4 section 4.4.2).
    body = c_string(message_id, 64) if status == ESME_ROK else b""
    return frame(SUBMIT_SM | RESP, sequence, body, status)


def deliver_sm_resp(sequence: int, status: int = ESME_ROK) -> bytes:
    return frame(DELIVER_SM | RESP, sequence, b"\x00", status)


def enquire_link(sequence: int) -> bytes:
    return frame(ENQUIRE_LINK, sequence)


def enquire_link_resp(sequence: int) -> bytes:
    return frame(ENQUIRE_LINK | RESP, sequence)


def unbind(sequence: int) -> bytes:
    return frame(UNBIND, sequence)


def unbind_resp(sequence: int) -> bytes:
    return frame(UNBIND | RESP, sequence)


def generic_nack(sequence: int, status: int) -> bytes:
    return frame(GENERIC_NACK, sequence, b"", status)


def read_message_id(frame_: bytes) -> str:
    """The ``message_id`` of a ``submit_sm_resp`` (or ``system_id`` of a bind_resp)."""
    body = frame_[HEADER_LEN:]
    if not body:
        return ""
    end = body.find(b"\x00")
    return body[: end if end >= 0 else len(body)].decode("latin-1")


# -- message PDUs (smpp34) ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tlv:
    tag: int
    value: bytes


@dataclass(frozen=True, slots=True)
class ShortMessage:
    """The fields of a ``submit_sm`` or ``deliver_sm`` that matter here."""

    sequence: int
    source_addr: str
    source_ton: int
    source_npi: int
    destination_addr: str
    dest_ton: int
    dest_npi: int
    esm_class: int
    registered_delivery: int
    data_coding: int
    short_message: bytes
    tlvs: tuple[Tlv, ...]
    validity_period: str = ""  # SMPP 3.4 §7.1.1 time format; "": the SMSC's default

    def tlv(self, tag: int) -> bytes | None:
        for item in self.tlvs:
            if item.tag == tag:
                return item.value
        return None


def submit_sm(sequence: int, *, source_addr: str, source_ton: int, source_npi: int,
              destination_addr: str, dest_ton: int, dest_npi: int, esm_class: int,
              registered_delivery: int, data_coding: int, short_message: bytes,
              service_type: str = "", validity_period: str = "") -> bytes:
    pdu = smpp34.SubmitSm(
        source_addr, destination_addr, short_message,
        service_type=service_type, validity_period=validity_period,
        source_addr_ton=source_ton, source_addr_npi=source_npi,
        dest_addr_ton=dest_ton, dest_addr_npi=dest_npi, esm_class=esm_class,
        registered_delivery=registered_delivery, data_coding=data_coding,
        sequence_number=sequence)
    try:
        return pdu.encode()
    except smpp34.SmppError as exc:
        raise ValueError(str(exc)) from None


def deliver_sm(sequence: int, *, source_addr: str, destination_addr: str, esm_class: int,
               short_message: bytes, data_coding: int = 0, source_ton: int = 1,
               source_npi: int = 1, dest_ton: int = 0, dest_npi: int = 0,
               tlvs: tuple[Tlv, ...] = ()) -> bytes:
    pdu = smpp34.DeliverSm(
        source_addr, destination_addr, short_message,
        source_addr_ton=source_ton, source_addr_npi=source_npi, dest_addr_ton=dest_ton,
        dest_addr_npi=dest_npi, esm_class=esm_class, data_coding=data_coding,
        tlvs=[smpp34.Tlv(t.tag, t.value) for t in tlvs], sequence_number=sequence)
    return pdu.encode()


def read_short_message(frame_: bytes) -> ShortMessage:
    """A ``submit_sm`` or ``deliver_sm`` frame; :class:`PduError` when unreadable."""
    try:
        pdu = smpp34.decode(frame_)
    except smpp34.SmppError as exc:
        raise PduError(str(exc)) from None
    if not isinstance(pdu, smpp34.SubmitSm | smpp34.DeliverSm):
        raise PduError(f"command_id 0x{header(frame_).command_id:08X} is not a short message")
    return ShortMessage(
        sequence=pdu.sequence_number,
        source_addr=pdu.source_addr,
        source_ton=pdu.source_addr_ton,
        source_npi=pdu.source_addr_npi,
        destination_addr=pdu.destination_addr,
        dest_ton=pdu.dest_addr_ton,
        dest_npi=pdu.dest_addr_npi,
        esm_class=pdu.esm_class,
        registered_delivery=pdu.registered_delivery,
        data_coding=pdu.data_coding,
        short_message=pdu.short_message,
        tlvs=tuple(Tlv(t.tag, t.value) for t in pdu.tlvs),
        validity_period=pdu.validity_period if isinstance(pdu, smpp34.SubmitSm) else "",
    )
