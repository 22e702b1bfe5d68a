"""The provider adapters that read callbacks, built once per appliance."""

from __future__ import annotations

import logging

from appliance.config import ConfigError
from appliance.providers import ProviderAdapter, build_adapter
from appliance.service import Appliance

log = logging.getLogger("appliance.reports")
EXTRAS_KEY = "callback_adapters"


def adapter_for(appliance: Appliance, name: str) -> ProviderAdapter | None:
    """The adapter of provider ``name``, or ``None`` when no such provider is configured.

    :class:`ConfigError` when the provider's table is wrong.
    """
    cache: dict[str, ProviderAdapter] = appliance.extras.setdefault(EXTRAS_KEY, {})
    adapter = cache.get(name)
    if adapter is None:
        settings = appliance.settings.providers.get(name)
        if settings is None:
            return None
        adapter = build_adapter(settings, now_ms=appliance.now_ms)
        cache[name] = adapter
    return adapter


def all_adapters(appliance: Appliance) -> dict[str, ProviderAdapter]:
    """Every configured provider's adapter; a misconfigured one is logged and left out."""
    out: dict[str, ProviderAdapter] = {}
    for name in appliance.settings.providers:
        try:
            adapter = adapter_for(appliance, name)
        except ConfigError as exc:
            log.error("provider %s: %s", name, exc)
            continue
        if adapter is not None:
            out[name] = adapter
    return out
