"""Words as the STOP keywords compare them (OPS-4): folded and split the same way on
both sides, so the config check (:func:`keyword_problem`) and the match
(:class:`appliance.optout.keywords.Keywords`) read a keyword alike.

Pure text functions below the settings: :mod:`appliance.config` checks
``[optout] keywords`` with them without importing the opt-out package.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final

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
