"""The settings as every declared provider kind reads them.

:mod:`appliance.config` sits below the providers (each kind module reads its
:class:`~appliance.config.ProviderSettings`), so it cannot look the kinds up itself:
reading a ``[providers.NAME]`` table, masking ``config check``'s output and naming the
secret values the logs redact all take the declarations as an argument. These three
pass :data:`appliance.providers.registry.KINDS`, so that the CLI, the server and the
tests read settings one way, and a new kind is known to all of them by its one
registry line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from appliance import config
from appliance.config import Settings

from .registry import KINDS


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults < the TOML file < ``APPLIANCE_*`` environment < ``overrides`` (flags),
    every provider table read by its declared kind (:func:`appliance.config.load.load_settings`)."""
    return config.load_settings(config_file, env, overrides, kinds=KINDS)


def masked(settings: Settings) -> dict[str, Any]:
    """The effective settings as plain data, every declared secret shown as ``***``."""
    return config.masked(settings, KINDS)


def secret_values(settings: Settings) -> list[str]:
    """Every configured secret value, for the logs to redact."""
    return config.secret_values(settings, KINDS)
