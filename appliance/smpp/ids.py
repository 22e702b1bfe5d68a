"""SMSC message ids in one canonical form, so a receipt finds its part (SMPP-4).

A ``deliver_sm`` receipt names its message only by the SMSC's id: in the
``receipted_message_id`` TLV (by the specification, the id of the ``submit_sm_resp``)
and in the receipt text (``id:...``), where many SMSCs write a hexadecimal id in
decimal. Both sides are turned into a *key*; a receipt belongs to the part whose
``submit_sm_resp`` id has the same key.

The key of a numeric id is its value written in decimal without leading zeros
(``"00001A2b"`` read as hex and ``"6699"`` read as decimal are both ``"6699"``); the
key of any other id is the id in lower case. ``receipt_id_format`` says how to read:

- ``as-is``: the id exactly as sent (only surrounding blanks and NULs dropped).
- ``decimal``: every id is a decimal number.
- ``hex``: every id is a hexadecimal number, in the response and the receipt alike.
- ``auto``: from the ids themselves. An id with a letter ``a``-``f`` is hexadecimal, and
  then so is the provider's side it came from: once one ``submit_sm_resp`` id had a
  letter, an all-digit response id is read as hex too (``"1234"`` is 4660); once one
  receipt text id had a letter (or equalled its hex TLV id), all-digit text ids are
  read as hex. Before that, all-digit ids are decimal. So an SMSC that answers hex and
  writes decimal, one that writes hex on both sides, and a decimal one all match;
  what :class:`IdEvidence` holds is the only state and is kept by the caller.

A key is not always the id as the SMSC wrote it (``"00001A2b"`` is ``"6699"``), and
``query_sm`` must name the message as the SMSC did: :meth:`IdReader.spelling` gives
the id of a key as its ``submit_sm_resp`` wrote it, remembered for the last
:data:`SPELLINGS_KEPT` ids this process read; an older key is written back in the
shape its ids have (:class:`IdShape`: their case, their fixed width, kept across
starts by the caller), which for the common shapes is the id itself.
"""

from __future__ import annotations

import string
from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

IdFormat = Literal["auto", "hex", "decimal", "as-is"]
ID_FORMATS: tuple[IdFormat, ...] = ("auto", "hex", "decimal", "as-is")

_HEX = frozenset(string.hexdigits)
_DIGITS = frozenset(string.digits)
_LETTERS = frozenset("abcdefABCDEF")


def trimmed(raw: str) -> str:
    return raw.strip().strip("\x00").strip()


def is_hex(text: str) -> bool:
    return bool(text) and all(ch in _HEX for ch in text)


def is_decimal(text: str) -> bool:
    return bool(text) and all(ch in _DIGITS for ch in text)


def has_hex_letter(text: str) -> bool:
    return is_hex(text) and any(ch in _LETTERS for ch in text)


def as_hex(text: str) -> str:
    return str(int(text, 16)) if is_hex(text) else text.lower()


def as_decimal(text: str) -> str:
    return str(int(text, 10)) if is_decimal(text) else text.lower()


def key(raw: str, fmt: IdFormat, *, hex_side: bool = False) -> str:
    """The canonical key of one id; ``hex_side`` is ``auto``'s evidence for its side."""
    text = trimmed(raw)
    if fmt == "as-is":
        return text
    if fmt == "hex":
        return as_hex(text)
    if fmt == "decimal":
        return as_decimal(text)
    if has_hex_letter(text) or (hex_side and is_hex(text)):
        return as_hex(text)
    return as_decimal(text)


UNDECIDED_KEPT = 1000  # all-digit ids read as decimal remembered per side, at most
SPELLINGS_KEPT = 100_000  # submit_sm_resp ids remembered as written, for query_sm


@dataclass
class IdEvidence:
    """What ``auto`` has learnt about one provider's ids (persist it to keep it)."""

    submit_hex: bool = False  # a submit_sm_resp id (or TLV id) had a letter a-f
    text_hex: bool = False  # a receipt text id had one, or equalled a hex TLV id


@dataclass
class IdShape:
    """How the SMSC writes its ids (``submit_sm_resp``), to write back an id this
    process did not see (persist it to keep it): capitals, and a fixed width (zero
    padding) when every id has had the same length."""

    upper: bool = False  # the latest id's letters were capitals
    width: int = 0  # the length every id has had (0: none seen, -1: lengths differ)


class IdReader:
    """Keys for one provider's ids under its ``receipt_id_format``."""

    def __init__(self, fmt: IdFormat, evidence: IdEvidence | None = None,
                 shape: IdShape | None = None) -> None:
        self.fmt = fmt
        self.evidence = evidence or IdEvidence()
        # All-digit ids read as decimal while their side had shown no letter yet:
        # "submit" (responses and receipted_message_id TLVs) and "text" (receipt texts).
        self.undecided: dict[str, set[str]] = {"submit": set(), "text": set()}
        self._spelled: OrderedDict[str, str] = OrderedDict()  # key -> id as written
        self.shape = shape or IdShape()

    def _remember(self, text: str, key_: str) -> None:
        self._spelled[key_] = text
        self._spelled.move_to_end(key_)
        while len(self._spelled) > SPELLINGS_KEPT:
            self._spelled.popitem(last=False)
        letters = [ch for ch in text if ch.isalpha()]
        if letters:
            self.shape.upper = all(ch.isupper() for ch in letters)
        if self.shape.width == 0:
            self.shape.width = len(text)
        elif self.shape.width != len(text):
            self.shape.width = -1

    def spelling(self, key_: str) -> str:
        """The id whose key is ``key_``, as the SMSC wrote it (for ``query_sm``)."""
        known = self._spelled.get(key_)
        if known is not None:
            return known
        if self.fmt == "as-is":
            return key_
        hex_side = self.fmt == "hex" or (self.fmt == "auto" and self.evidence.submit_hex)
        numeric = is_decimal(key_)
        text = format(int(key_), "x") if hex_side and numeric else key_
        text = text.upper() if self.shape.upper else text
        return text.zfill(max(self.shape.width, 0)) if numeric else text

    def _note(self, side: str, text: str) -> None:
        kept = self.undecided[side]
        if len(kept) < UNDECIDED_KEPT and is_decimal(text):
            kept.add(text)

    def corrections(self) -> list[tuple[str, str]]:
        """``(old key, new key)`` for every remembered id of a side that has since shown
        itself hexadecimal (each pair once: the memory of that side is then cleared)."""
        out: list[tuple[str, str]] = []
        for side, hex_now in (("submit", self.evidence.submit_hex),
                              ("text", self.evidence.text_hex)):
            if hex_now and self.undecided[side]:
                out += sorted({(as_decimal(t), as_hex(t)) for t in self.undecided[side]
                               if as_decimal(t) != as_hex(t)})
                self.undecided[side].clear()
        return out

    def submit_key(self, message_id: str) -> str:
        """The key of a ``submit_sm_resp`` id (learning from it under ``auto``)."""
        text = trimmed(message_id)
        if self.fmt == "auto":
            if has_hex_letter(text):
                self.evidence.submit_hex = True
            elif not self.evidence.submit_hex:
                self._note("submit", text)
        out = key(message_id, self.fmt, hex_side=self.evidence.submit_hex)
        self._remember(text, out)
        return out

    def receipt_key(self, tlv_id: str | None, text_id: str | None) -> str | None:
        """The key of a receipt: from ``receipted_message_id`` when present, else from
        the text's ``id:``; ``None`` when it has neither."""
        tlv = trimmed(tlv_id) if tlv_id else ""
        text = trimmed(text_id) if text_id else ""
        if self.fmt == "auto":
            self._learn(tlv, text)
        if tlv:
            if self.fmt == "auto" and not self.evidence.submit_hex:
                self._note("submit", tlv)
            return key(tlv, self.fmt, hex_side=self.evidence.submit_hex)
        if text:
            if self.fmt == "auto" and not self.evidence.text_hex:
                self._note("text", text)
            return key(text, self.fmt, hex_side=self.evidence.text_hex)
        return None

    def _learn(self, tlv: str, text: str) -> None:
        ev = self.evidence
        if has_hex_letter(tlv):
            ev.submit_hex = True
        if has_hex_letter(text):
            ev.text_hex = True
        elif (tlv and text and ev.submit_hex and is_hex(text)
              and as_hex(tlv) == as_hex(text) and as_hex(tlv) != as_decimal(text)):
            # The text repeats the hex TLV id digit for digit: text ids are hex too.
            ev.text_hex = True
