"""The declaration of a request/response (HTTP) kind, from its adapter and its inbound
reader: how it is built and checked is the same for every HTTP kind.

An HTTP kind's module writes ``KIND = http_kind(TheAdapter, TheInbound)`` and the
registry lists it; see "Adding an HTTP provider" in ``docs/providers.md``.
"""

from __future__ import annotations

from collections.abc import Callable

from appliance.config import ProviderSettings
from appliance.message_text.segments import STANDARD, Counting

from .adapter import ProviderAdapter
from .callbacks import InboundReader, ReportReader
from .credit import credit_query_of
from .inbound_query import inbound_query_of
from .kind import BuildContext, ProviderKind, Shape
from .status_query import status_query_of
from .transport import Provider


def http_kind(adapter: type[ProviderAdapter],
              inbound: Callable[[ReportReader], InboundReader] | None, *,
              many_per_request: bool = False, status_query: bool = False,
              inbound_query: bool = False,
              counting: Counting = STANDARD,
              requests_per_s: float = 0.0,
              status_queries_per_s: float = 0.0,
              validity_range_s: tuple[int, int] | None = None,
              route_refusals: frozenset[str] = frozenset()) -> ProviderKind:
    """The declaration of the HTTP kind ``adapter.kind``."""

    def make(settings: ProviderSettings, ctx: BuildContext) -> ProviderAdapter:
        return adapter(settings, now_ms=ctx.now_ms, tolerated=ctx.tolerated)

    def build(settings: ProviderSettings, ctx: BuildContext) -> Provider:
        from .http_transport import HttpTransport  # aiohttp: only where an HTTP provider runs

        wire = make(settings, ctx)
        return Provider(
            name=settings.name,
            kind=settings.kind,
            settings=settings,
            transport=HttpTransport(wire, settings, ctx.submit_timeout_s,
                                    settings.requests_per_s or requests_per_s),
            reports=wire,
            dedupes_on_ref=wire.dedupes_on_ref,
            reports_by_provider_id_only=wire.reports_by_provider_id_only,
            reports_per_part=wire.reports_per_part,
            inbound=inbound(wire) if inbound is not None else None,
            status=status_query_of(wire),
            credit=credit_query_of(wire),
            inbound_query=inbound_query_of(wire),
        )

    def check(settings: ProviderSettings, callback_url: str, ctx: BuildContext) -> list[str]:
        return make(settings, ctx).config_problems(callback_url)

    return ProviderKind(name=adapter.kind, shape=Shape.REQUEST, build=build, check=check,
                        options=adapter.declared_options(), inbound=inbound,
                        many_per_request=many_per_request, status_query=status_query,
                        inbound_query=inbound_query,
                        counting=counting,
                        requests_per_s=requests_per_s,
                        status_queries_per_s=status_queries_per_s,
                        validity_range_s=validity_range_s,
                        route_refusals=route_refusals,
                        adapter=adapter)
