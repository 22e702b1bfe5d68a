"""Reading the settings: defaults, then the TOML file, then the environment, then flags.

Top-level keys map to ``APPLIANCE_<KEY>`` (``APPLIANCE_PORT``), section keys to
``APPLIANCE_<SECTION>_<KEY>`` (``APPLIANCE_IMPORT_MAX_ROWS``). Every key is read
strictly (:mod:`appliance.config.values`); an unknown section or setting is named as
the file names it, with the nearest known name when one is near (``[imports]``: did
you mean ``[import]``?).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import fields, replace
from typing import Any

from appliance.message_text.language import problems as language_problems

from .checks import validate
from .errors import ConfigError, near
from .options import DeclaresOptions
from .routes import ROUTES, check_routes, read_routes
from .settings import SECTIONS, SHARED_PROVIDER_SETTINGS, ProviderSettings, Settings, section_attr
from .values import read_value

PROVIDERS = "providers"
_NOT_KEYS = frozenset({*(section_attr(s) for s in SECTIONS), PROVIDERS, ROUTES})
TOP_KEYS = tuple(f.name for f in fields(Settings) if f.name not in _NOT_KEYS)
"""The top-level settings (not sections)."""
_CONTROL_VARS = ("APPLIANCE_CONFIG", "APPLIANCE_CLOCK_FILE")


def _apply(obj: Any, values: Mapping[str, Any], where: str, from_env: bool,
           skip: frozenset[str] = frozenset()) -> Any:
    known = {f.name: getattr(obj, f.name) for f in fields(obj) if f.name not in skip}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise ConfigError(f"{where}{key}: unknown setting{near(key, list(known))}")
        changes[key] = read_value(where, key, known[key], value, from_env=from_env)
    return replace(obj, **changes)


def _provider(name: str, table: Any, declared: Mapping[str, DeclaresOptions]) -> ProviderSettings:
    where = f"[{PROVIDERS}.{name}] "
    if not isinstance(table, dict):
        raise ConfigError(f"{where}must be a table")
    kinds = list(declared)
    if "kind" not in table:
        raise ConfigError(f"{where}kind: missing (one of {', '.join(kinds)})")
    kind = table["kind"]
    if kind not in kinds:
        raise ConfigError(f"{where}kind: {kind!r} is not one of {', '.join(kinds)}"
                          + (near(kind, kinds, '"{}"') if isinstance(kind, str) else ""))
    # The kind's own keys are read by the kind, when the provider is built.
    options = {k: v for k, v in table.items()
               if k not in SHARED_PROVIDER_SETTINGS and k != "kind"}
    base = ProviderSettings(name=name, kind=kind, options=options)
    common = {k: v for k, v in table.items() if k in SHARED_PROVIDER_SETTINGS}
    out: ProviderSettings = _apply(base, common, where, from_env=False,
                                   skip=frozenset({"name", "options", "kind"}))
    able = [k.name for k in declared.values() if k.national_language]
    wrong = language_problems(out.kind, out.national_language, out.national_language_prefixes,
                              able)
    if wrong:
        raise ConfigError("; ".join(f"{where}{w}" for w in wrong))
    _check_pull(where, out, declared[kind].status_query)
    return replace(out, counting=declared[kind].counting)


def _check_pull(where: str, out: ProviderSettings, can_ask: bool) -> None:
    """``pull`` is a bool when given (unset: the kind's default), and ``true`` only for
    a kind whose provider can be asked about a message (ROUTE-2)."""
    if out.pull is None:
        return
    if not isinstance(out.pull, bool):
        raise ConfigError(f"{where}pull: expected bool, got {out.pull!r}")
    if out.pull and not can_ask:
        raise ConfigError(f"{where}pull: kind {out.kind!r} has no status API to ask;"
                          " leave pull unset or false")


def _from_mapping(settings: Settings, data: Mapping[str, Any], where: str,
                  declared: Mapping[str, DeclaresOptions], from_env: bool = False) -> Settings:
    top: dict[str, Any] = {}
    out = settings
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}[{key}]: must be a table")
            attr = section_attr(key)
            section = _apply(getattr(out, attr), value, f"{where}[{key}] ", from_env)
            out = replace(out, **{attr: section})
        elif key == PROVIDERS:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}[{PROVIDERS}]: must be a table of tables")
            out = replace(out, providers={n: _provider(n, t, declared)
                                             for n, t in value.items()})
        elif key == ROUTES and not from_env:
            out = replace(out, routes=read_routes(where, value))
        elif isinstance(value, dict):
            raise ConfigError(f"{where}[{key}]: unknown section"
                              + near(key, (*SECTIONS, PROVIDERS), "[{}]"))
        else:
            top[key] = value
    for key in top:
        if key not in TOP_KEYS:
            hint = near(key, {**{k: k for k in TOP_KEYS},
                              **{s: f"[{s}]" for s in (*SECTIONS, PROVIDERS)}})
            raise ConfigError(f"{where}{key}: unknown setting{hint}")
    if top:
        out = _apply(out, top, where, from_env)
    return out


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for var, value in env.items():
        if not var.startswith("APPLIANCE_") or var in _CONTROL_VARS:
            continue
        rest = var[len("APPLIANCE_"):].lower()
        if rest in TOP_KEYS:
            data[rest] = value
            continue
        for section in SECTIONS:
            if rest.startswith(section + "_"):
                data.setdefault(section, {})[rest[len(section) + 1:]] = value
                break
        else:
            names = [f"APPLIANCE_{k.upper()}" for k in TOP_KEYS]
            raise ConfigError(f"environment {var}: unknown setting{near(var, names)}")
    return data


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    kinds: Mapping[str, DeclaresOptions],
) -> Settings:
    """Defaults, then the TOML file, then the environment, then ``overrides`` (flags).

    ``kinds`` are the provider kinds a ``[providers.NAME]`` table may name, by name: the
    settings sit below the providers, so the layer above passes them in
    (:func:`appliance.provider_kinds.load_settings`)."""
    env = os.environ if env is None else env
    settings = Settings()
    path = config_file or env.get("APPLIANCE_CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {path}: not found") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: not valid TOML ({exc})") from None
        settings = _from_mapping(settings, data, f"{path}: ", kinds)
    settings = _from_mapping(settings, _from_env(env), "", kinds, from_env=True)
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    settings = _from_mapping(settings, flags, "flag ", kinds)
    validate(settings)
    check_routes(settings.routes, settings.providers)
    return settings
