"""From a provider's settings to its parts, and the set of configured providers."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from appliance.config import ConfigError, ProviderSettings, Settings

from .base import Provider, ProviderAdapter
from .http_json import HttpJsonAdapter
from .inbound import inbound_reader
from .infobip import InfobipAdapter
from .simulator_kind import SimulatorAdapter
from .twilio import TwilioAdapter
from .vonage import VonageAdapter

log = logging.getLogger("appliance.providers")

ADAPTERS: dict[str, type[ProviderAdapter]] = {
    cls.kind: cls
    for cls in (SimulatorAdapter, HttpJsonAdapter, VonageAdapter, TwilioAdapter, InfobipAdapter)
}
SESSION_KINDS = ("smpp",)
"""Kinds that are a session transport, not an HTTP wire format (no adapter)."""


def build_adapter(
    settings: ProviderSettings, *, now_ms: Callable[[], int] | None = None
) -> ProviderAdapter:
    """The wire format and report reader of an HTTP kind; :class:`ConfigError` for a bad
    provider table.

    ``now_ms`` is the clock used for request signing, webhook timestamp checks and
    HTTP-date ``Retry-After``; by default the appliance clock (``APPLIANCE_CLOCK_FILE``
    aware).
    """
    try:
        cls = ADAPTERS[settings.kind]
    except KeyError:
        kinds = ", ".join((*ADAPTERS, *SESSION_KINDS))
        raise ConfigError(
            f"[providers.{settings.name}] kind: {settings.kind!r} is not one of {kinds}"
        ) from None
    return cls(settings, now_ms=now_ms)


def build_provider(settings: ProviderSettings, *, submit_timeout_s: float,
                   now_ms: Callable[[], int] | None = None) -> Provider:
    """A configured provider: its transport, its report reader and its inbound reader."""
    if settings.kind == "smpp":
        from .smpp_kind import smpp_provider

        return smpp_provider(settings, now_ms=now_ms)
    from .http_transport import HttpTransport  # aiohttp: only where an HTTP provider runs

    adapter = build_adapter(settings, now_ms=now_ms)
    return Provider(
        name=settings.name,
        kind=settings.kind,
        settings=settings,
        transport=HttpTransport(adapter, settings, submit_timeout_s),
        reports=adapter,
        dedupes_on_ref=adapter.dedupes_on_ref,
        reports_by_provider_id_only=adapter.reports_by_provider_id_only,
        reports_per_part=adapter.reports_per_part,
        inbound=inbound_reader(adapter),
    )


class Providers:
    """The configured providers, each built once; the sender and the callbacks share them.

    A provider is built when first asked for, so a misconfigured one is a
    :class:`ConfigError` at that moment (``get``), or logged and left out (``all``).
    """

    def __init__(self, settings: Settings, now_ms: Callable[[], int] | None = None) -> None:
        self._settings = settings
        self._now_ms = now_ms
        self._built: dict[str, Provider] = {}

    @property
    def names(self) -> list[str]:
        return list(self._settings.providers)

    def get(self, name: str) -> Provider | None:
        """Provider ``name``, or ``None`` when none of that name is configured."""
        provider = self._built.get(name)
        if provider is None:
            settings = self._settings.providers.get(name)
            if settings is None:
                return None
            provider = build_provider(settings, now_ms=self._now_ms,
                                      submit_timeout_s=self._settings.sending.submit_timeout_s)
            self._built[name] = provider
        return provider

    def all(self) -> dict[str, Provider]:
        """Every configured provider; a misconfigured one is logged and left out."""
        out: dict[str, Provider] = {}
        for name in self._settings.providers:
            try:
                provider = self.get(name)
            except ConfigError as exc:
                log.error("provider %s: %s", name, exc)
                continue
            if provider is not None:
                out[name] = provider
        return out

    def built(self) -> Mapping[str, Provider]:
        """The providers built so far (whose transports may hold connections)."""
        return dict(self._built)

    async def close(self) -> None:
        for provider in self._built.values():
            await provider.transport.close()


def check_providers(settings: Settings) -> None:
    """Build every provider's adapter and ask it what its provider would refuse (MSG-7).

    :class:`ConfigError` for a bad provider table, or naming every limit exceeded, so
    ``config check`` and ``serve`` refuse a config that the provider would refuse per
    message.
    """
    problems: list[str] = []
    for name, provider in settings.providers.items():
        if provider.kind == "smpp":
            from .smpp_kind import smpp_settings

            try:
                smpp_settings(provider)
            except ConfigError as exc:
                problems.append(str(exc))
            continue
        adapter = build_adapter(provider)
        problems += adapter.config_problems(settings.callback_url(name))
    if problems:
        raise ConfigError("; ".join(problems))
