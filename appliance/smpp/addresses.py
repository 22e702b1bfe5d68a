"""TON/NPI of an address from its shape (SMPP 3.4 section 5.2.5 and 5.2.6).

- letters in it: alphanumeric sender, TON 5, NPI 0 (at most 11 characters on the air);
- ``+`` and digits, or more than 8 digits: international, TON 1, NPI 1 (E.164), written
  without the ``+``;
- up to 8 digits: a short code, TON 3 (network specific), NPI 0.
"""

from __future__ import annotations

from dataclasses import dataclass

TON_UNKNOWN, TON_INTERNATIONAL, TON_NETWORK, TON_ALPHANUMERIC = 0, 1, 3, 5
NPI_UNKNOWN, NPI_E164 = 0, 1
SHORT_CODE_MAX_DIGITS = 8
ALPHANUMERIC_MAX = 11
ADDRESS_MAX = 20  # source_addr and destination_addr are C-octet strings of 21


@dataclass(frozen=True, slots=True)
class Address:
    addr: str
    ton: int
    npi: int


def from_shape(raw: str) -> Address:
    """The address as written in a PDU with its TON/NPI; ``ValueError`` if unusable."""
    text = raw.strip()
    if not text:
        raise ValueError("empty address")
    if not text.isascii() or not text.isprintable():
        raise ValueError(f"{raw!r}: printable ASCII only")
    digits = text[1:] if text.startswith("+") else text
    if digits.isdigit():
        if len(digits) > ADDRESS_MAX:
            raise ValueError(f"{raw!r}: more than {ADDRESS_MAX} digits")
        if text.startswith("+") or len(digits) > SHORT_CODE_MAX_DIGITS:
            return Address(digits, TON_INTERNATIONAL, NPI_E164)
        return Address(digits, TON_NETWORK, NPI_UNKNOWN)
    if len(text) > ALPHANUMERIC_MAX:
        raise ValueError(f"{raw!r}: an alphanumeric sender has at most {ALPHANUMERIC_MAX}"
                         " characters")
    return Address(text, TON_ALPHANUMERIC, NPI_UNKNOWN)


def destination(msisdn: str) -> Address:
    """A recipient in E.164 (``+905321234567``) as an international address."""
    digits = msisdn.strip().removeprefix("+")
    if not digits.isdigit() or len(digits) > ADDRESS_MAX:
        raise ValueError(f"{msisdn!r}: not an E.164 number")
    return Address(digits, TON_INTERNATIONAL, NPI_E164)
