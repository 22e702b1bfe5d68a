"""The set of configured providers, built by the kinds they are given.

The list of every kind is assembled above the providers and the SMPP package
(:data:`appliance.provider_kinds.KINDS`), because the SMPP kind is built on the
providers' parts: these functions and :class:`Providers` take that list as an argument,
so the providers never name a kind of their own accord.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace

from appliance.config import ConfigError, ProviderSettings, Settings

from .adapter import ProviderAdapter
from .kind import BuildContext, ProviderKind, Shape
from .transport import Provider, SessionTransport

log = logging.getLogger("appliance.providers")

Kinds = Mapping[str, ProviderKind]
"""Every provider kind, by name (:data:`appliance.provider_kinds.KINDS`)."""


def adapters(kinds: Kinds) -> Mapping[str, type[ProviderAdapter]]:
    """The wire format and report reader of each request (HTTP) kind."""
    return {k.name: k.adapter for k in kinds.values() if k.adapter is not None}


def kind_of(settings: ProviderSettings, kinds: Kinds) -> ProviderKind:
    """The declaration of the provider's kind; :class:`ConfigError` for an unknown one."""
    try:
        return kinds[settings.kind]
    except KeyError:
        raise ConfigError(f"[providers.{settings.name}] kind: {settings.kind!r} is not one"
                          f" of {', '.join(kinds)}") from None


def context(settings: ProviderSettings, kinds: Kinds, *, submit_timeout_s: float,
            now_ms: Callable[[], int] | None = None) -> BuildContext:
    """What building ``settings`` needs: the other same-shape kinds' options are
    tolerated in its table (a table copied between HTTP kinds keeps working)."""
    kind = kind_of(settings, kinds)
    others = frozenset(o.name for k in kinds.values() if k.shape is kind.shape
                       and k is not kind for o in k.options) - kind.option_names()
    tolerated = others if kind.shape is Shape.REQUEST else frozenset()
    return BuildContext(submit_timeout_s=submit_timeout_s, now_ms=now_ms, tolerated=tolerated)


def build_adapter(
    settings: ProviderSettings, kinds: Kinds, *, now_ms: Callable[[], int] | None = None
) -> ProviderAdapter:
    """The wire format and report reader of an HTTP kind; :class:`ConfigError` for a bad
    provider table.

    ``now_ms`` is the clock used for request signing, webhook timestamp checks and
    HTTP-date ``Retry-After``; by default the appliance clock (``APPLIANCE_CLOCK_FILE``
    aware).
    """
    cls = kind_of(settings, kinds).adapter
    if cls is None:
        raise ConfigError(f"[providers.{settings.name}] kind: {settings.kind!r} is not one"
                          f" of {', '.join(kinds)} with a wire format of its own")
    ctx = context(settings, kinds, submit_timeout_s=0.0, now_ms=now_ms)
    return cls(settings, now_ms=now_ms, tolerated=ctx.tolerated)


def build_provider(settings: ProviderSettings, kinds: Kinds, *, submit_timeout_s: float,
                   now_ms: Callable[[], int] | None = None) -> Provider:
    """A configured provider: its transport, its report reader and its inbound reader."""
    ctx = context(settings, kinds, submit_timeout_s=submit_timeout_s, now_ms=now_ms)
    kind = kind_of(settings, kinds)
    return replace(kind.build(settings, ctx), validity_range_s=kind.validity_range_s,
                   route_refusals=kind.route_refusals)


class Providers:
    """The configured providers, each built once; the sender and the callbacks share them.

    A provider is built when first asked for, so a misconfigured one is a
    :class:`ConfigError` at that moment (``get``), or logged and left out (``all``).
    """

    def __init__(self, settings: Settings, kinds: Kinds,
                 now_ms: Callable[[], int] | None = None) -> None:
        self._settings = settings
        self.kinds = kinds
        """Every provider kind, by name: where the metrics read a session kind's
        families."""
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
            provider = build_provider(settings, self.kinds, now_ms=self._now_ms,
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

    def sessions(self, *, build: bool = False) -> dict[str, tuple[Provider, SessionTransport]]:
        """Every provider whose transport is a session, whatever protocol it speaks, with
        that session (for ``/metrics``, ``/readyz`` and the dashboard): those built so
        far, or (``build``) every configured one, building it now."""
        providers = self.all() if build else self.built()
        return {name: (p, p.transport) for name, p in providers.items()
                if isinstance(p.transport, SessionTransport)}

    def built(self) -> Mapping[str, Provider]:
        """The providers built so far (whose transports may hold connections)."""
        return dict(self._built)

    async def close(self) -> None:
        for provider in self._built.values():
            await provider.transport.close()


def check_providers(settings: Settings, kinds: Kinds) -> None:
    """Build every provider's table as its kind reads it and ask what its provider would
    refuse (MSG-7).

    :class:`ConfigError` for a bad provider table, or naming every limit exceeded, so
    ``config check`` and ``serve`` refuse a config that the provider would refuse per
    message; so is a ``[sending] validity_s`` outside a kind's validity range (ROUTE-4).
    """
    problems: list[str] = []
    for name, provider in settings.providers.items():
        kind = kind_of(provider, kinds)
        ctx = context(provider, kinds, submit_timeout_s=settings.sending.submit_timeout_s)
        try:
            problems += kind.check(provider, settings.callback_url(name), ctx)
        except ConfigError as exc:
            if kind.shape is Shape.REQUEST:
                raise
            problems.append(str(exc))
        span, default = kind.validity_range_s, settings.sending.validity_s
        if default and span is not None and not span[0] <= default <= span[1]:
            problems.append(f"[sending] validity_s: {default} is outside provider {name}'s"
                            f" range ({kind.name}: {span[0]} to {span[1]} seconds); every"
                            " message to it without a validity_s of its own would be refused")
    if problems:
        raise ConfigError("; ".join(problems))
