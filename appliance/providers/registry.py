"""From a provider's settings to its adapter."""

from __future__ import annotations

from collections.abc import Callable

from appliance.config import ConfigError, ProviderSettings, Settings

from .base import ProviderAdapter
from .http_json import HttpJsonAdapter
from .infobip import InfobipAdapter
from .simulator_kind import SimulatorAdapter
from .twilio import TwilioAdapter
from .vonage import VonageAdapter

ADAPTERS: dict[str, type[ProviderAdapter]] = {
    cls.kind: cls
    for cls in (SimulatorAdapter, HttpJsonAdapter, VonageAdapter, TwilioAdapter, InfobipAdapter)
}


def build_adapter(
    settings: ProviderSettings, *, now_ms: Callable[[], int] | None = None
) -> ProviderAdapter:
    """The adapter for ``settings.kind``; :class:`ConfigError` for a bad provider table.

    ``now_ms`` is the clock used for request signing, webhook timestamp checks and
    HTTP-date ``Retry-After``; by default the appliance clock (``APPLIANCE_CLOCK_FILE``
    aware).
    """
    try:
        cls = ADAPTERS[settings.kind]
    except KeyError:
        kinds = ", ".join(ADAPTERS)
        raise ConfigError(
            f"[providers.{settings.name}] kind: {settings.kind!r} is not one of {kinds}"
        ) from None
    return cls(settings, now_ms=now_ms)


def check_providers(settings: Settings) -> None:
    """Build every provider's adapter and ask it what its provider would refuse (MSG-7).

    :class:`ConfigError` for a bad provider table, or naming every limit exceeded, so
    ``config check`` and ``serve`` refuse a config that the provider would refuse per
    message.
    """
    problems: list[str] = []
    for name, provider in settings.providers.items():
        adapter = build_adapter(provider)
        problems += adapter.config_problems(settings.callback_url(name))
    if problems:
        raise ConfigError("; ".join(problems))
