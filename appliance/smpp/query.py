"""``query_sm`` and ``query_sm_resp`` on the wire, and what an answer says (ROUTE-2).

SMPP 3.4 (issue 12-Oct-1999):

- section 4.8.1, ``query_sm`` (``command_id`` 0x00000003): ``message_id`` (C-octet
  string, at most 65 octets with its NUL: the id the SMSC gave in the
  ``submit_sm_resp``), ``source_addr_ton``, ``source_addr_npi`` (one octet each) and
  ``source_addr`` (at most 21 octets): the address the message was submitted from. One
  message a request; SMPP 3.4 has no batch form.
- section 4.8.2, ``query_sm_resp`` (0x80000003): ``message_id``, ``final_date`` (an
  absolute time, section 7.1.1, or a single NUL while the message is not final),
  ``message_state`` (one octet, section 5.2.28) and ``error_code`` (one octet, the
  network's error, section 5.2.31). An error ``command_status`` comes with no body
  (section 3.3: the header alone), or as a ``generic_nack``.
- section 5.2.28, ``message_state``: 1 ENROUTE, 2 DELIVERED, 3 EXPIRED, 4 DELETED,
  5 UNDELIVERABLE, 6 ACCEPTED, 7 UNKNOWN, 8 REJECTED.
- section 7.1.1, absolute time: ``YYMMDDhhmmsstnnp``, 16 characters; ``t`` tenths of a
  second, ``nn`` the offset from UTC in quarter hours (00-48), ``p`` ``+`` (ahead of
  UTC) or ``-``. A relative time (``p`` ``R``) is not a date a message ended at.

What an answer says (:func:`read_answer`), per part asked about:

- ``ESME_ROK`` and a final ``message_state`` (DELIVERED, EXPIRED, DELETED,
  UNDELIVERABLE, REJECTED): a report, in the words a receipt uses
  (:data:`appliance.smpp.receipt.MESSAGE_STATE_WORDS`), so a pulled state and a pushed
  receipt map the same way (:func:`appliance.smpp.receipt.state_of`): DELIVERED,
  EXPIRED, FAILED, FAILED, REJECTED; the report time is ``final_date``;
- ``ESME_ROK`` and ENROUTE, ACCEPTED or UNKNOWN: still pending, an attempt (SMPP 3.4
  calls ACCEPTED final, "read on behalf of the subscriber by customer service", but
  the receipts here keep ``ACCEPTD`` open, and a pull says no more than a receipt);
- ``ESME_RQUERYFAIL`` (0x67) or ``ESME_RINVMSGID`` (0x0C), in a ``query_sm_resp`` or a
  ``generic_nack``: the SMSC does not know the id, an attempt;
- anything else (another status, a ``message_state`` outside section 5.2.28, a final
  state whose ``final_date`` is missing or not an absolute time, a PDU that cannot be
  read): nothing readable, an attempt; the message stays as it is (DLR-8).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from appliance.smpp.pdu import (
    GENERIC_NACK,
    HEADER_LEN,
    RESP,
    PduError,
    c_string,
    frame,
    header,
    read_c_strings,
)
from appliance.smpp.receipt import MESSAGE_STATE_WORDS, state_of
from appliance.smpp.status import ESME_ROK, status_name
from appliance.states import REPORTED_FINAL_STATES

QUERY_SM = 0x00000003
QUERY_SM_RESP = QUERY_SM | RESP
ESME_RINVMSGID = 0x0000000C
ESME_RQUERYFAIL = 0x00000067
UNKNOWN_ID_STATUSES = frozenset({ESME_RQUERYFAIL, ESME_RINVMSGID})
CONTENT_TYPE = "application/vnd.smpp.query-sm-resp"  # raw_reports.content_type of an answer
PENDING_STATES = frozenset({1, 6, 7})  # ENROUTE, ACCEPTED, UNKNOWN (section 5.2.28)


def query_sm(sequence: int, *, message_id: str, source_ton: int, source_npi: int,
             source_addr: str) -> bytes:
    """A ``query_sm`` (section 4.8.1); ``ValueError`` for an id or address too long."""
    body = (c_string(message_id, 64) + bytes((source_ton & 0xFF, source_npi & 0xFF))
            + c_string(source_addr, 20))
    return frame(QUERY_SM, sequence, body)


@dataclass(frozen=True, slots=True)
class Query:
    """A ``query_sm`` as an SMSC reads it."""

    sequence: int
    message_id: str
    source_ton: int
    source_npi: int
    source_addr: str


def read_query_sm(frame_: bytes) -> Query:
    body = frame_[HEADER_LEN:]
    (message_id,), at = read_c_strings(body, 1)
    if len(body) < at + 2:
        raise PduError("query_sm too short")
    (source,), _ = read_c_strings(body[at + 2:], 1)
    return Query(header(frame_).sequence, message_id, body[at], body[at + 1], source)


def query_sm_resp(sequence: int, status: int, *, message_id: str = "", final_date: str = "",
                  message_state: int = 0, error_code: int = 0) -> bytes:
    """A ``query_sm_resp`` (section 4.8.2); an error status carries no body."""
    if status != ESME_ROK:
        return frame(QUERY_SM_RESP, sequence, b"", status)
    body = (c_string(message_id, 64) + c_string(final_date, 16)
            + bytes((message_state & 0xFF, error_code & 0xFF)))
    return frame(QUERY_SM_RESP, sequence, body)


def absolute_time(when: datetime) -> str:
    """``when`` as a section 7.1.1 absolute time, in UTC (``...t00+``)."""
    at = when.astimezone(UTC)
    return at.strftime("%y%m%d%H%M%S") + f"{at.microsecond // 100_000}00+"


def absolute_time_ms(text: str) -> int:
    """A section 7.1.1 absolute time as epoch ms; ``ValueError`` when it is not one."""
    if len(text) != 16 or not text[:15].isdigit() or text[15] not in "+-":
        raise ValueError(f"final_date {text!r} is not an absolute time (YYMMDDhhmmsstnnp)")
    quarters = int(text[13:15])
    if quarters > 48:
        raise ValueError(f"final_date {text!r}: offset over 48 quarter hours")
    local = datetime.strptime(text[:12], "%y%m%d%H%M%S").replace(tzinfo=UTC)
    offset = timedelta(minutes=15 * quarters) * (1 if text[15] == "+" else -1)
    return int((local - offset).timestamp() * 1000) + int(text[12]) * 100


class Said(StrEnum):
    """What one answer said about one part."""

    FINAL = "final"
    PENDING = "pending"
    UNKNOWN_ID = "unknown_id"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class PartAnswer:
    """One ``query_sm_resp`` (or ``generic_nack``) read."""

    said: Said
    status: str = ""  # the SMSC's word: DELIVRD..., or the message_state number
    state: str = ""  # ours, for a report
    reported_at_ms: int = 0  # final_date
    error_code: str | None = None  # error_code, when not 0
    why: str = ""  # for an error: what could not be read


_FIXED = struct.Struct("!BB")


def read_answer(frame_: bytes) -> PartAnswer:
    """What a ``query_sm_resp`` or ``generic_nack`` says; never raises."""
    try:
        return _read(frame_)
    except (PduError, ValueError, struct.error) as exc:
        return PartAnswer(Said.ERROR, why=f"query_sm_resp not readable: {exc}")


def _read(frame_: bytes) -> PartAnswer:
    head = header(frame_)
    if head.command_id not in (QUERY_SM_RESP, GENERIC_NACK):
        return PartAnswer(Said.ERROR, why=f"answered with command 0x{head.command_id:08X}")
    if head.status in UNKNOWN_ID_STATUSES:
        return PartAnswer(Said.UNKNOWN_ID, why=f"smpp {status_name(head.status)}")
    if head.status != ESME_ROK or head.command_id == GENERIC_NACK:
        return PartAnswer(Said.ERROR, why=f"smpp {status_name(head.status)}")
    body = frame_[HEADER_LEN:]
    (_, final_date), at = read_c_strings(body, 2)
    message_state, error = _FIXED.unpack_from(body, at)
    word = MESSAGE_STATE_WORDS.get(message_state)
    if word is None:
        return PartAnswer(Said.ERROR, why=f"message_state {message_state} is not in SMPP 3.4")
    if message_state in PENDING_STATES:
        return PartAnswer(Said.PENDING, status=word, state=state_of(word))
    state = state_of(word)
    assert state in REPORTED_FINAL_STATES
    return PartAnswer(Said.FINAL, status=word, state=state,
                      reported_at_ms=absolute_time_ms(final_date),
                      error_code=None if error == 0 else str(error))
