"""The İYS fields a message carries to a Turkish aggregator (IYS-2), per message.

With ``[compliance] country = "TR"`` the sender hands each message of a stated ``type``
to its transport with an :class:`Iys`: whether it is commercial (the provider then checks
İYS at send time and refuses a number without consent), the recipient type of the
number's consent record in force (``BIREYSEL`` or ``TACIR``; ``BIREYSEL`` when it has
none, as a number without a record is treated) and the brand's İYS code from
``[compliance] iys_brand_code``. A transactional message carries İYS off. Without
compliance (another country, or a message with no ``type``) a message carries ``None``
and each kind sends what its table's options say, as before.

Each kind writes these fields in its own words, from its own documentation:

* İletimerkezi ``order.iys`` ``"1"``/``"0"`` and ``order.iysList`` (:mod:`.iletimerkezi`);
* Netgsm ``<filter>``: ``0`` not commercial, ``11`` commercial to individuals, ``12`` to
  traders (:mod:`.netgsm_wire`);
* Verimor ``is_commercial`` and ``iys_recipient_type`` (:mod:`.verimor_wire`);
* Infobip ``messages[].regional.turkeyIys {brandCode, recipientType}`` (:mod:`.infobip`).

A provider's İYS refusal ends the message ``REJECTED`` with ``error_kind`` ``"iys"``: at
the send (:attr:`~.outcome.Outcome.error_kind`, set by each kind from its codes) or by
a report whose error code carries :data:`IYS_REPORT_MARK`.

Only Infobip takes the brand code in the request; the others tie it to the account or
the sender header in their panel. A request that carries many messages carries one set
of these fields: the sender batches only messages of the same type and recipient type.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

BIREYSEL: Final = "BIREYSEL"
TACIR: Final = "TACIR"
RECIPIENT_TYPES: Final = (BIREYSEL, TACIR)

IYS_ERROR: Final = "iys"
"""``error_kind`` of a message a provider refused for İYS (null otherwise)."""

IYS_REPORT_MARK: Final = "İYS: "
"""How a report's error code says the provider refused the message for İYS (Netgsm's
states 16 and 17, Verimor's ``NOT_ALLOWED_BY_IYS``): the report inbox keeps the code as
written, so the mark travels with it to the message it is applied to."""


def iys_report_error(text: str) -> str:
    """A report's error code marked as İYS's refusal."""
    return text if text.startswith(IYS_REPORT_MARK) else IYS_REPORT_MARK + text


def refused_for_iys(error_code: str | None) -> bool:
    """Whether a report's error code says İYS refused the message."""
    return bool(error_code) and str(error_code).startswith(IYS_REPORT_MARK)


@dataclass(frozen=True)
class Iys:
    """What one message says to the provider about İYS."""

    commercial: bool
    recipient_type: str = BIREYSEL
    brand_code: str = ""

    def __post_init__(self) -> None:
        if self.recipient_type not in RECIPIENT_TYPES:
            raise ValueError(f"not an İYS recipient type: {self.recipient_type!r}")


def one_iys(values: Iterable[Iys | None]) -> Iys | None:
    """What a request of many messages says about İYS: theirs, the same for all
    (``ValueError`` when they differ: the sender never batches them so)."""
    found = set(values)
    if len(found) != 1:
        raise ValueError("a request carries messages of one type and one recipient type")
    return found.pop()
