"""``kind = "smpp"``: a provider reached over an SMPP 3.4 session (SMPP-1..6).

The provider is its transport alone (:class:`appliance.smpp.transport.SmppTransport`):
it has no callback URL and no report reader, because receipts and inbound messages
come over the session itself and are stored by :mod:`appliance.smpp.intake`. It
reports on every segment separately, and only by the SMSC's own id (the id of each
``submit_sm_resp``), so the sender records each part's id and the id -> (ref, part)
mapping in the unit that records the outcome.

The table is read by :meth:`appliance.smpp.settings.SmppSettings.from_table`; the
settings every kind shares apply too (``rate_per_s``, ``max_parts``), and the HTTP
kinds' settings are refused by name, so a ``sender`` or ``base_url`` copied from another
provider's table does not pass silently.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields

from appliance.config import ConfigError, ProviderSettings
from appliance.smpp.settings import SmppSettings
from appliance.smpp.transport import SmppTransport

from .base import Provider

KIND = "smpp"
# ProviderSettings fields that mean something for an SMPP provider.
SHARED = frozenset({"name", "kind", "rate_per_s", "max_parts", "options", "national_language",
                    "national_language_prefixes"})
INSTEAD = {"sender": "source_addr", "concurrency": "window"}


def smpp_settings(settings: ProviderSettings) -> SmppSettings:
    """The SMPP settings of a provider table; :class:`ConfigError` naming every mistake."""
    where = f"[providers.{settings.name}]"
    problems: list[str] = []
    defaults = ProviderSettings(name=settings.name, kind=KIND)
    for f in fields(ProviderSettings):
        if f.name in SHARED or getattr(settings, f.name) == getattr(defaults, f.name):
            continue
        if f.name == "dedupes_on_ref":
            problems.append(f"{where} dedupes_on_ref: an SMSC takes a repeated submit_sm as"
                            " a new message; it must stay false for kind \"smpp\"")
            continue
        hint = f" (use {INSTEAD[f.name]})" if f.name in INSTEAD else ""
        problems.append(f"{where} {f.name}: not a setting of kind \"smpp\"{hint}")
    try:
        smpp = SmppSettings.from_table(settings.name, settings.options,
                                       rate_per_s=settings.rate_per_s, ignore=())
    except ConfigError as exc:
        problems.append(str(exc))
    if problems:
        raise ConfigError("; ".join(problems))
    return smpp


def smpp_provider(settings: ProviderSettings, *,
                  now_ms: Callable[[], int] | None = None) -> Provider:
    """The provider of an SMPP table: a session transport, reports over the session."""
    return Provider(
        name=settings.name,
        kind=KIND,
        settings=settings,
        transport=SmppTransport(smpp_settings(settings), now_ms=now_ms),
        reports=None,
        dedupes_on_ref=False,
        reports_by_provider_id_only=True,
        reports_per_part=True,
        inbound=None,
    )
