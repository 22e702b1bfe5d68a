"""What goes into a session (:class:`Segment`) and what comes out (:class:`SegmentOutcome`).

One ``submit_sm`` per segment. Outcomes, from the money point of view (SMPP-2):

- ``ACCEPTED``: the SMSC answered ``ESME_ROK``; ``message_id`` is its id for the part
  and ``id_key`` the canonical form a receipt will carry (:mod:`appliance.smpp.ids`).
- ``RETRY``: not taken, safe to send later: ``ESME_RTHROTTLED`` or ``ESME_RMSGQFUL``
  (the session also slows down), or the PDU was never written (not bound, session lost
  or stopping before it went out).
- ``UNCERTAIN``: written, and no answer came (session lost, response timeout). The
  SMSC may have it: never resent blindly; a receipt or a late answer settles it.
- ``REJECTED``: any other ``command_status`` (kept, with its name): final.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from appliance.message_text.alphabets import PLAIN, Tables
from appliance.providers.base import SubmitResult
from appliance.smpp.addresses import Address
from appliance.smpp.encoding import Alphabet, SeptetLayout, encode_parts

REGISTERED_DELIVERY_FINAL = 1  # a receipt on success or failure


@dataclass(frozen=True, slots=True)
class Segment:
    ref: str  # our message ref
    part: int  # 1-based
    total: int
    destination: Address
    source: Address
    data_coding: int  # 0 GSM-7 (and GSM-7 Turkish; unpacked or packed), 8 UCS-2
    esm_class: int  # 0x40 (UDHI) when short_message starts with a UDH
    short_message: bytes
    registered_delivery: int = REGISTERED_DELIVERY_FINAL
    validity_period: str = ""  # relative (ROUTE-4, :func:`relative_validity`); "": SMSC's


# ROUTE-4: the validity a submit_sm carries, as a relative time (SMPP 3.4 §7.1.1.2,
# "YYMMDDhhmmsstnnR": years, months, days, hours, minutes, seconds from the SMSC's
# receipt; tenths and the quarter-hour field 0). Counted in days, at most 30 of them, so
# no month of unknown length enters it.
VALIDITY_RANGE_S = (1, 30 * 86_400)


def relative_validity(seconds: int) -> str:
    """``seconds`` as SMPP 3.4's relative time format: ``000001020304000R`` is 1 day, 2
    hours, 3 minutes and 4 seconds."""
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    return f"0000{days:02d}{hours:02d}{minutes:02d}{secs:02d}000R"


@dataclass(frozen=True, slots=True)
class SegmentOutcome:
    ref: str
    part: int
    result: SubmitResult
    written: bool  # the PDU was handed to the connection
    message_id: str | None = None  # the SMSC's id, exactly as answered
    id_key: str | None = None  # its canonical form (what a receipt will be filed under)
    command_status: int | None = None
    status_name: str | None = None
    retry_after_s: float | None = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class LateResponse:
    """A ``submit_sm_resp`` that came after its segment was reported ``UNCERTAIN``."""

    ref: str
    part: int
    command_status: int
    status_name: str
    message_id: str | None
    id_key: str | None


def concat_reference(ref: str) -> int:
    """The 8-bit UDH reference for a message: stable for a ref, spread across refs."""
    return zlib.crc32(ref.encode("utf-8")) & 0xFF


def segments(ref: str, destination: Address, source: Address, alphabet: Alphabet,
             parts: Sequence[str], concat_ref: int | None = None,
             tables: Tables = PLAIN, septets: SeptetLayout = "unpacked") -> list[Segment]:
    """The segments of one message whose text is already split into ``parts``."""
    encoded = encode_parts(parts, alphabet,
                           concat_reference(ref) if concat_ref is None else concat_ref, tables,
                           septets)
    return [Segment(ref=ref, part=i, total=len(encoded), destination=destination,
                    source=source, data_coding=e.data_coding, esm_class=e.esm_class,
                    short_message=e.short_message)
            for i, e in enumerate(encoded, start=1)]
