"""One setting's value, read strictly: its type, its finiteness, its choices, its range.

A value from the TOML file (or a flag) must already have the setting's type: a string
is not a port (``port = "8090"``), a fraction is not a count (``min_free_bytes =
1e12``), a number is not a text. A whole number is a fine float (``rate_per_s = 30``).
An ``APPLIANCE_*`` environment value is always a string, so it is parsed into the
setting's type. Either way ``nan`` and ``inf`` are refused (a timeout of ``nan`` makes
every wait end at once), and so is a number below 0 or outside its range
(:data:`RANGES`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .errors import ConfigError

CHOICES: dict[str, tuple[str, ...]] = {
    "synchronous": ("FULL", "NORMAL"),
    "log_format": ("auto", "json", "text"),
    "log_level": ("debug", "info", "warning", "error"),
    "country": ("", "TR"),
}

RANGES: dict[str, tuple[float, float]] = {
    "port": (0, 65535),
    "intake_port": (0, 65535),
    "coverage_min_pct": (0, 100),
    "batch_max": (1, 10_000),
    "pull_rate_per_s": (0.001, 10_000),
    "inbound_poll_s": (1, 86_400),
}
"""Settings whose value must lie in a range (both ends allowed), by key."""

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def _wanted(want: Any) -> str:
    if isinstance(want, tuple):
        return "a list of strings"
    if isinstance(want, Path):
        return "str"
    return type(want).__name__


def _typed(want: Any, value: Any) -> Any:
    """A TOML (or flag) value of the type of ``want``; ``ValueError`` otherwise."""
    if isinstance(want, bool):
        if isinstance(value, bool):
            return value
    elif isinstance(want, int):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif isinstance(want, float):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif isinstance(want, tuple):
        if isinstance(value, str):  # one text: a comma-separated list, as in the environment
            return _parsed(want, value)
        if isinstance(value, list | tuple) and all(isinstance(i, str) for i in value):
            return tuple(i.strip() for i in value if i.strip())
    elif isinstance(want, Path):
        if isinstance(value, str | Path):
            return Path(value)
    elif isinstance(want, str):
        if isinstance(value, str):
            return value
    else:
        return value
    raise ValueError


def _parsed(want: Any, value: str) -> Any:
    """An environment value (always a string) parsed into the type of ``want``."""
    if isinstance(want, bool):
        if value.lower() in TRUE_WORDS:
            return True
        if value.lower() in FALSE_WORDS:
            return False
        raise ValueError
    if isinstance(want, int):
        return int(value)
    if isinstance(want, float):
        return float(value)
    if isinstance(want, tuple):
        return tuple(i.strip() for i in value.split(",") if i.strip())
    if isinstance(want, Path):
        return Path(value)
    return value


def read_value(where: str, name: str, want: Any, value: Any, *, from_env: bool = False) -> Any:
    """``value`` as setting ``name`` (whose default is ``want``) takes it.

    ``from_env``: the value is an ``APPLIANCE_*`` string, parsed; otherwise it must
    have the setting's type already. :class:`ConfigError` naming ``where`` + ``name``.
    """
    try:
        parse = from_env and isinstance(value, str)
        out = _parsed(want, value) if parse else _typed(want, value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}{name}: expected {_wanted(want)}, got {value!r}") from None
    if name in CHOICES:
        choices = CHOICES[name]
        norm = out.upper() if name == "synchronous" else out
        if norm not in choices:
            raise ConfigError(f"{where}{name}: {out!r} is not one of {', '.join(choices)}")
        out = norm
    if isinstance(out, int | float) and not isinstance(out, bool):
        check_number(where, name, out)
    return out


def check_number(where: str, name: str, value: float) -> None:
    """Refuse a number that is not finite, negative, or outside the range of ``name``."""
    if not math.isfinite(value):
        raise ConfigError(f"{where}{name}: must be a finite number, got {value!r}")
    if value < 0:
        raise ConfigError(f"{where}{name}: must not be negative, got {value!r}")
    if name in RANGES:
        lo, hi = RANGES[name]
        if not lo <= value <= hi:
            if name.endswith("port"):
                raise ConfigError(f"{where}{name}: {value!r} is not a TCP port"
                                  f" ({lo:g} to {hi:g})")
            raise ConfigError(f"{where}{name}: must be between {lo:g} and {hi:g},"
                              f" got {value!r}")
