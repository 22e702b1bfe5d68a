"""A provider's national language: which destinations get the Turkish tables (ENC-1).

``national_language = "turkish"`` on a provider of a kind that can signal the tables
(its declaration says so: SMPP in the user-data header, the simulator as SMPP does,
an aggregator through its own switch) makes a text for a destination in
``national_language_prefixes`` (default ``["+90"]``, E.164 prefixes) go as
``"GSM-7 Turkish"`` where that saves parts
(:func:`appliance.message_text.segments.segment`). Other destinations are encoded as
before: a handset abroad may not know the tables, and some aggregators forbid the
switch there.
"""

from __future__ import annotations

from collections.abc import Sequence

LANGUAGES = ("turkish",)
DEFAULT_PREFIXES = ("+90",)


def problems(kind: str, language: str, prefixes: Sequence[str],
             able: Sequence[str]) -> list[str]:
    """What is wrong with these settings, one ``key: why`` each (empty: nothing);
    ``able``: the kinds that can send the tables."""
    out: list[str] = []
    if language and language not in LANGUAGES:
        out.append(f"national_language: {language!r} is not one of {', '.join(LANGUAGES)}")
    elif language and kind not in able:
        out.append(f"national_language: kind {kind!r} cannot send national language tables"
                   f" (kinds that can: {', '.join(able)})")
    for prefix in prefixes:
        if not (prefix.startswith("+") and prefix[1:].isdigit() and 2 <= len(prefix) <= 8):
            out.append(f"national_language_prefixes: {prefix!r} is not an E.164 prefix"
                       " such as \"+90\"")
    return out


def turkish_to(language: str, prefixes: Sequence[str], msisdn: str) -> bool:
    """True when a text to ``msisdn`` (E.164) may use the Turkish tables."""
    return language == "turkish" and any(msisdn.startswith(p) for p in prefixes)
