"""Every provider kind, one line each, and what reads settings and builds by them.

The kinds are listed here, above the providers and the SMPP package, because the SMPP
kind is built on the providers' parts (:mod:`appliance.smpp.kind`): the providers
take the list as an argument (:class:`appliance.providers.registry.Providers`) and
never import a kind's protocol. Adding a kind is its module and its line in
:data:`KINDS` (``docs/providers.md``, "Adding an HTTP provider").

:mod:`appliance.config` sits below the providers, so it cannot look the kinds up
itself: reading a ``[providers.NAME]`` table, masking ``config check``'s output and
naming the secret values the logs redact take the declarations as an argument, and
the functions here pass :data:`KINDS`, so that the CLI, the server and the tests read
settings one way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from appliance import config
from appliance.config import ProviderSettings, Settings
from appliance.providers import (
    http_json,
    iletimerkezi,
    infobip,
    netgsm,
    registry,
    simulator_kind,
    twilio,
    verimor,
    vonage,
)
from appliance.providers.adapter import ProviderAdapter
from appliance.providers.kind import ProviderKind, by_name
from appliance.providers.transport import Provider
from appliance.smpp import kind as smpp_kind

KINDS: Mapping[str, ProviderKind] = by_name((
    simulator_kind.KIND,
    http_json.KIND,
    vonage.KIND,
    twilio.KIND,
    infobip.KIND,
    verimor.KIND,
    iletimerkezi.KIND,
    netgsm.KIND,
    smpp_kind.KIND,
))
"""Every provider kind, by name, in the order the docs list them."""

ADAPTERS: Mapping[str, type[ProviderAdapter]] = registry.adapters(KINDS)
"""The wire format and report reader of each request (HTTP) kind."""


def validity_range_s(settings: Settings, provider: str) -> tuple[int, int] | None:
    """The validity (seconds) the named provider's kind carries on the wire (ROUTE-4);
    ``None``: its kind has no such field."""
    return KINDS[settings.provider(provider).kind].validity_range_s


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


def check_providers(settings: Settings) -> None:
    """What ``config check`` and ``serve`` ask of every provider table
    (:func:`appliance.providers.registry.check_providers`)."""
    registry.check_providers(settings, KINDS)


def build_provider(settings: ProviderSettings, *, submit_timeout_s: float,
                   now_ms: Callable[[], int] | None = None) -> Provider:
    """One configured provider (:func:`appliance.providers.registry.build_provider`)."""
    return registry.build_provider(settings, KINDS, submit_timeout_s=submit_timeout_s,
                                   now_ms=now_ms)


def build_adapter(settings: ProviderSettings, *,
                  now_ms: Callable[[], int] | None = None) -> ProviderAdapter:
    """The wire format and report reader of an HTTP kind's table
    (:func:`appliance.providers.registry.build_adapter`)."""
    return registry.build_adapter(settings, KINDS, now_ms=now_ms)
