"""The effective settings as ``config check`` prints them, every secret as ``***``.

Sections are named as the file names them (``import``, not the attribute ``imports``),
so what ``config check`` shows can be pasted back into the file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from .database_url import mask_database_url
from .settings import Settings, section_name

SECRET_KEYS = ("api_key", "api_secret", "signature_secret", "auth_token", "secret", "password")


def masked(s: Settings) -> dict[str, Any]:
    """The effective settings as plain data, secrets replaced by ``***``."""

    def walk(obj: Any) -> Any:
        if hasattr(obj, "__dataclass_fields__"):
            return {f.name: mask(f.name, walk(getattr(obj, f.name))) for f in fields(obj)}
        if isinstance(obj, Mapping):
            return {k: mask(k, walk(v)) for k, v in obj.items()}
        if isinstance(obj, Path):
            return str(obj)
        return obj

    def mask(key: str, value: Any) -> Any:
        if key in SECRET_KEYS and value:
            return "***"
        if key == "database_url" and value:
            return mask_database_url(str(value))
        return value

    return {section_name(f.name): mask(f.name, walk(getattr(s, f.name))) for f in fields(s)}
