"""``kind = "smpp"``: a provider reached over an SMPP 3.4 session (SMPP-1..6).

The declaration lives with the protocol: the SMPP package builds on the providers'
shapes (:class:`appliance.providers.kind.ProviderKind`), and the providers never name
it; :data:`appliance.provider_kinds.KINDS` lists it beside the other kinds.

The provider is its transport alone (:class:`appliance.smpp.transport.SmppTransport`):
it has no callback URL and no report reader, because receipts and inbound messages
come over the session itself and are stored by :mod:`appliance.smpp.intake`. It
reports on every segment separately, and only by the SMSC's own id (the id of each
``submit_sm_resp``), so the sender records each part's id and the id -> (ref, part)
mapping in the unit that records the outcome.

The table is read by :meth:`appliance.smpp.settings.SmppSettings.from_table`; of the
settings every kind shares, ``rate_per_s``, ``max_parts``, the national language and
the pulls' ``pull``, ``pull_after_s`` and ``pull_rate_per_s`` apply, and the others are
refused by name, so a ``sender`` or ``base_url`` copied from another provider's table
does not pass silently. It can be asked about a message (``query_sm``,
:mod:`appliance.smpp.pull`), but only with ``pull = true``: off by default, since many
SMSCs do not answer it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import fields
from typing import Any

from appliance.clock import Clock
from appliance.config import ConfigError, Option, ProviderSettings
from appliance.message_text.segments import TURKISH_TABLES
from appliance.providers.kind import BuildContext, ProviderKind, Shape
from appliance.providers.transport import Provider, SessionTransport
from appliance.smpp.settings import SmppSettings
from appliance.smpp.submission import VALIDITY_RANGE_S

NAME = "smpp"
# The shared settings that mean something for an SMPP provider.
SETTINGS = frozenset({"rate_per_s", "max_parts", "national_language",
                      "national_language_prefixes", "pull", "pull_after_s",
                      "pull_rate_per_s"})
INSTEAD = {"sender": "source_addr", "concurrency": "window"}
OPTIONS = (
    Option("host", ""),
    Option("port", 0),
    Option("system_id", ""),
    Option("password", "", secret=True),
    Option("system_type", ""),
    Option("bind", "transceiver", choices=("transceiver", "transmitter+receiver")),
    Option("source_addr", ""),
    Option("source_ton", 0, doc="from the shape of source_addr unless set"),
    Option("source_npi", 0, doc="from the shape of source_addr unless set"),
    Option("window", 10),
    Option("enquire_link_s", 30.0),
    Option("receipt_id_format", "auto", choices=("auto", "hex", "decimal", "as-is")),
    Option("response_timeout_s", 30.0),
    Option("septets", "unpacked", choices=("unpacked", "packed")),
)


def smpp_settings(settings: ProviderSettings) -> SmppSettings:
    """The SMPP settings of a provider table; :class:`ConfigError` naming every mistake."""
    where = f"[providers.{settings.name}]"
    problems: list[str] = []
    defaults = ProviderSettings(name=settings.name, kind=NAME)
    for f in fields(ProviderSettings):
        if f.name in SETTINGS or f.name in ("name", "kind", "options") \
                or getattr(settings, f.name) == getattr(defaults, f.name):
            continue
        if f.name == "dedupes_on_ref":
            problems.append(f"{where} dedupes_on_ref: an SMSC takes a repeated submit_sm as"
                            f" a new message; it must stay false for kind \"{NAME}\"")
            continue
        hint = f" (use {INSTEAD[f.name]})" if f.name in INSTEAD else ""
        problems.append(f"{where} {f.name}: not a setting of kind \"{NAME}\"{hint}")
    try:
        smpp = SmppSettings.from_table(settings.name, settings.options,
                                       rate_per_s=settings.rate_per_s, ignore=())
    except ConfigError as exc:
        problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(problems))
    return smpp


def smpp_provider(settings: ProviderSettings, ctx: BuildContext) -> Provider:
    """The provider of an SMPP table: a session transport, reports over the session,
    ``query_sm`` over it too. The protocol's modules (the session, the PDUs, smpp34)
    are imported here, where an SMPP provider is built: a configuration without one
    never loads them."""
    from appliance.smpp.pull import SmppStatusQuery
    from appliance.smpp.transport import SmppTransport

    transport = SmppTransport(smpp_settings(settings), now_ms=ctx.now_ms)
    return Provider(
        name=settings.name,
        kind=NAME,
        settings=settings,
        transport=transport,
        reports=None,
        dedupes_on_ref=False,
        reports_by_provider_id_only=True,
        reports_per_part=True,
        inbound=None,
        status=SmppStatusQuery(settings, transport, ctx.now_ms or Clock.from_env().now_ms),
    )


def _metrics(transports: Mapping[str, SessionTransport]) -> Iterator[Any]:
    from appliance.smpp.metrics import smpp_metrics  # prometheus_client: at scrape time

    return smpp_metrics(transports)


def _check(settings: ProviderSettings, callback_url: str, ctx: BuildContext) -> list[str]:
    smpp_settings(settings)
    return []


KIND = ProviderKind(name=NAME, shape=Shape.SESSION, build=smpp_provider, check=_check,
                    options=OPTIONS, settings=SETTINGS, metrics=_metrics,
                    counting=TURKISH_TABLES, status_query=True, pull_by_default=False,
                    validity_range_s=VALIDITY_RANGE_S)
