"""A provider kind's own settings, declared once: name, type, default, secret or not.

Every kind (:data:`appliance.provider_kinds.KINDS`) declares the keys of its provider
table beyond the settings every kind shares, as :class:`Option` values. From those
declarations alone the appliance reads a table strictly (:func:`read_options`), masks
it in ``config check`` and redacts its secrets from every log line
(:mod:`appliance.config.masking`): no module lists a kind's keys or its secrets again.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from appliance.message_text.segments import Counting

from .errors import ConfigError, near

OptionValue = bool | int | float | str
"""What an option holds once read (its type is its default's)."""


@dataclass(frozen=True)
class Option:
    """One key of a kind's provider table.

    ``default`` also gives the type a value must have (a whole number is a fine
    float). ``secret``: never shown (``config check``: ``***``) and never logged.
    ``choices``: the only values a text may take (empty: any).
    """

    name: str
    default: OptionValue
    secret: bool = False
    choices: tuple[str, ...] = ()
    doc: str = ""


class DeclaresOptions(Protocol):
    """What the settings need of a kind's declaration: its name, its options,
    whether it can send national language tables (``national_language``), how it
    counts parts (``counting``) and whether its provider can be asked about a message
    (``status_query``: ``pull``)."""

    @property
    def name(self) -> str: ...

    @property
    def options(self) -> tuple[Option, ...]: ...

    @property
    def national_language(self) -> bool: ...

    @property
    def counting(self) -> Counting: ...

    @property
    def status_query(self) -> bool: ...


def secret_names(kinds: Iterable[DeclaresOptions]) -> frozenset[str]:
    """Every option any kind declares secret: a key copied into another kind's table
    stays secret there."""
    return frozenset(o.name for k in kinds for o in k.options if o.secret)


def read_option(where: str, option: Option, raw: object) -> OptionValue:
    """``raw`` from the TOML table as ``option`` takes it; :class:`ConfigError` when it
    has another type, is not finite, is negative or is not one of the choices."""
    want = option.default
    value: OptionValue
    if isinstance(want, bool):
        ok = isinstance(raw, bool)
        value = bool(raw)
    elif isinstance(want, int):
        ok = isinstance(raw, int) and not isinstance(raw, bool)
        value = raw if isinstance(raw, int) else 0
    elif isinstance(want, float):
        ok = isinstance(raw, int | float) and not isinstance(raw, bool)
        value = float(raw) if isinstance(raw, int | float) else 0.0
    else:
        ok = isinstance(raw, str)
        value = raw if isinstance(raw, str) else ""
    if not ok:
        raise ConfigError(f"{where}{option.name}: expected {type(want).__name__}, got {raw!r}")
    if isinstance(value, int | float) and not isinstance(value, bool) and (
            not math.isfinite(value) or value < 0):
        raise ConfigError(f"{where}{option.name}: must be a finite number of at least 0,"
                          f" got {raw!r}")
    if option.choices and value not in option.choices:
        raise ConfigError(f"{where}{option.name}: {value!r} is not one of"
                          f" {', '.join(option.choices)}")
    return value


def read_options(where: str, kind: str, options: tuple[Option, ...],
                 table: Mapping[str, object],
                 tolerated: Iterable[str] = ()) -> dict[str, OptionValue]:
    """The kind's options from ``table``: each declared one read strictly (its default
    when absent). A key the kind does not declare is refused, naming the near one,
    unless it is ``tolerated`` (then it is left out)."""
    declared = {o.name: o for o in options}
    spared = frozenset(tolerated)
    values: dict[str, OptionValue] = {o.name: o.default for o in options}
    for key, raw in table.items():
        option = declared.get(key)
        if option is None:
            if key in spared:
                continue
            known = ", ".join(sorted(declared)) or "none"
            raise ConfigError(f"{where}{key}: unknown setting for kind {kind!r}"
                              f" (options: {known}){near(key, declared)}")
        values[key] = read_option(where, option, raw)
    return values
