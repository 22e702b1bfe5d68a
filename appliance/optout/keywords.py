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

The folding and the test of a configured keyword are :mod:`appliance.message_text.words`,
below the settings, so the config check reads a keyword the way the match does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from appliance.message_text.words import words

DEFAULT_KEYWORDS: Final = ("STOP", "DUR", "IPTAL", "RET")
MAX_WORDS: Final = 2

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
