"""STOP keywords (OPS-4): is this inbound message a request to stop?

``[optout] keywords`` (default ``STOP``, ``DUR``, ``IPTAL``, ``RET``) are compared with
the message folded the same way on both sides:

1. Unicode compatibility decomposition (NFKD), and every combining mark dropped: accents
   go (``İPTAL`` → ``IPTAL``, ``İptal`` → ``Iptal``), full-width letters become plain
   ones (``ＳＴＯＰ`` → ``STOP``);
2. case folded, with the Turkish dotless ``ı`` read as ``i`` (``ıptal`` → ``iptal``): so
   ``İPTAL``, ``IPTAL``, ``iptal``, ``İptal`` and ``ıptal`` are all the keyword ``IPTAL``;
3. split into words: runs of letters and digits. Everything else (spaces, punctuation,
   symbols, emoji, line breaks) only separates words.

The message is a STOP when it has **one or two words and one of them is a keyword**: the
keyword alone with any punctuation around it (``STOP``, ``Stop.``, ``dur!``, ``"RET"``),
or the keyword with one other word before or after it, as opt-out instructions are
usually written with a brand or a scope (``RET ACME``, ``ACME RET``, ``STOP ALL``,
``İPTAL'e``). A longer message is not a STOP even when it contains a keyword (``Dur bir
dakika``, ``please stop sending these``), and a keyword inside a longer word is no
keyword (``STOPPED``, ``DURUM``, ``RETURN``). Two words catch the usual instructions
without reading conversation as an opt-out; where in doubt the number can always be
added to the suppression list by hand.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from typing import Final

DEFAULT_KEYWORDS: Final = ("STOP", "DUR", "IPTAL", "RET")
MAX_WORDS: Final = 2
_WORD: Final = re.compile(r"[^\W_]+")
_DOTLESS: Final = str.maketrans({"ı": "i"})


def fold(text: str) -> str:
    """``text`` without accents or case, the dotless ``ı`` as ``i``."""
    decomposed = unicodedata.normalize("NFKD", text)
    bare = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return bare.casefold().translate(_DOTLESS)


def words(text: str) -> list[str]:
    """The folded words of ``text``: runs of letters and digits."""
    return _WORD.findall(fold(text))


def keyword_problem(word: str) -> str | None:
    """Why ``word`` cannot be a keyword (for the config check), or None."""
    found = words(word)
    if not found:
        return "has no letters or digits"
    if len(found) > 1 or found[0] != fold(word.strip()):
        return "must be one word of letters and digits"
    return None


class Keywords:
    """The configured keywords, folded once."""

    def __init__(self, keywords: Iterable[str]) -> None:
        self.by_folded: dict[str, str] = {}
        for word in keywords:
            folded = words(word)
            if len(folded) == 1:
                self.by_folded.setdefault(folded[0], word.strip().upper())

    def match(self, text: str) -> str | None:
        """The keyword (as configured) that ``text`` is, or None when it is no STOP."""
        found = words(text)
        if not 1 <= len(found) <= MAX_WORDS:
            return None
        for word in found:
            keyword = self.by_folded.get(word)
            if keyword is not None:
                return keyword
        return None
