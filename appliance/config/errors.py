"""The one error a configuration problem is: one line for the operator."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping


class ConfigError(Exception):
    """A configuration problem, phrased for the operator in one line."""


def near(word: str, known: Iterable[str] | Mapping[str, str], shown: str = "{}") -> str:
    """``; did you mean X?`` for the known name nearest ``word``, or ``""`` when none is
    near: an operator who wrote ``[imports]`` is told the file wants ``[import]``.

    ``known`` is names, each shown through ``shown``, or a mapping of each name to how
    it is shown (names of several sorts compete: ``imports`` is nearer ``[import]``
    than ``port``).
    """
    display = dict(known) if isinstance(known, Mapping) else {k: shown.format(k) for k in known}
    match = difflib.get_close_matches(word, list(display), n=1, cutoff=0.6)
    return f"; did you mean {display[match[0]]}?" if match else ""
