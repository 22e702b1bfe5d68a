"""What may be shown of the settings: ``config check``'s output, and the values the
logs must never carry.

Secrets are known from their declarations only: a provider option is secret when its
kind declares it so (:class:`~appliance.config.options.Option`, any kind: a key copied
into another kind's table stays secret there), a setting of the file's own sections
when :data:`SECRET_SETTINGS` names it, and the password in ``database_url``.

Sections are named as the file names them (``import``, not the attribute ``imports``),
and a provider shows its kind's keys beside the shared ones, as its table is written,
so what ``config check`` prints can be pasted back into the file; keys no kind
declares stay under ``options``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from .database_url import mask_database_url
from .options import DeclaresOptions, secret_names
from .settings import ProviderSettings, Settings, section_name

SECRET_SETTINGS = (("webhooks", "secret"),)
"""Settings of the file's own sections that are secret, as ``(section, key)``."""
HIDDEN = "***"


def _plain(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value


def _provider(p: ProviderSettings, secret: frozenset[str],
              declared: Mapping[str, Any]) -> dict[str, Any]:
    out = {f.name: _plain(getattr(p, f.name)) for f in fields(p)
           if f.name not in ("options", "counting")}
    own = declared.get(p.kind)
    if own is not None:
        out.update({o.name: o.default for o in own.options})
    known = {o.name for k in declared.values() for o in k.options}
    out.update({k: v for k, v in p.options.items() if k in known})
    for key in secret & set(out):
        if out[key]:
            out[key] = HIDDEN
    out["options"] = {k: v for k, v in p.options.items() if k not in known}
    return out


def masked(s: Settings, declared: Mapping[str, DeclaresOptions]) -> dict[str, Any]:
    """The effective settings as plain data, secrets replaced by ``***``; ``declared``
    are the provider kinds by name (their options say which are secret)."""
    secret = secret_names(declared.values())
    out: dict[str, Any] = {}
    for f in fields(s):
        value = getattr(s, f.name)
        name = section_name(f.name)
        if f.name == "providers":
            out[name] = {n: _provider(p, secret, declared) for n, p in value.items()}
        elif f.name == "routes":
            out[name] = [route.as_table() for route in value]
        elif hasattr(value, "__dataclass_fields__"):
            out[name] = {k.name: _plain(getattr(value, k.name)) for k in fields(value)}
            for section, key in SECRET_SETTINGS:
                if section == name and out[name].get(key):
                    out[name][key] = HIDDEN
        elif f.name == "database_url" and value:
            out[name] = mask_database_url(str(value))
        else:
            out[name] = _plain(value)
    return out


def secret_values(s: Settings, declared: Mapping[str, DeclaresOptions]) -> list[str]:
    """Every configured secret value, for the logs to redact: the providers' secret
    options (as their kinds declare them), the secret settings, and none empty."""
    secret = secret_names(declared.values())
    found = [str(v) for p in s.providers.values() for k, v in p.options.items()
             if k in secret and isinstance(v, str) and v]
    for section, key in SECRET_SETTINGS:
        value = getattr(getattr(s, section), key, "")
        if value:
            found.append(str(value))
    return found
