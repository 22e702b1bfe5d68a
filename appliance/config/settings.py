"""The effective settings: the top-level keys, one field per section, the providers.

``SECTIONS`` names each section as the file does (``[import]``) beside the attribute
that holds it (``imports``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from appliance.message_text.language import turkish_to
from appliance.message_text.segments import TURKISH_TABLES, Counting

from .errors import ConfigError
from .routes import RouteSettings
from .sections import (
    AlertSettings,
    BackupSettings,
    ComplianceSettings,
    HttpSettings,
    ImportSettings,
    OptoutSettings,
    ReportSettings,
    SendingSettings,
    StorageSettings,
    WebhookSettings,
)


@dataclass(frozen=True, init=False)
class ProviderSettings:
    """One ``[providers.NAME]`` table: the settings every kind shares, and ``options``,
    the keys of its kind (credentials included: ``api_key``, ``auth_token``, SMPP's
    ``host``...), as the kind declares them (:mod:`appliance.config.options`).

    Built as the table reads: ``ProviderSettings(name=..., kind=..., api_key=...)``
    puts every key that is not a shared setting into ``options``.
    """

    name: str
    kind: str
    base_url: str = ""
    sender: str = "APPLIANCE"
    rate_per_s: float = 30.0
    concurrency: int = 8
    dedupes_on_ref: bool = False
    max_parts: int = 10  # longest text accepted, in SMS parts (MSG-1)
    # ENC-1: "turkish" sends the Turkish shift tables to these destinations.
    national_language: str = ""
    national_language_prefixes: tuple[str, ...] = ("+90",)
    # ROUTE-2: asking the provider about messages it has not reported. ``pull``: None
    # is the kind's default (true where it can be asked), set only as a bool.
    pull: bool | None = None
    pull_after_s: float = 900.0  # first ask this long after SUBMITTED, then x3 each time
    pull_rate_per_s: float = 1.0  # status requests a second (the pulls' share)
    # Requests a second, sends and pulls together; 0: the kind's published limit.
    requests_per_s: float = 0.0
    batch_max: int = 100  # messages in one request, for kinds that take many
    # How often a provider that keeps inbound messages until asked (Netgsm) is asked.
    inbound_poll_s: float = 60.0
    # ROUTE-3: unreached tries in a row after which its routes' messages move on.
    failover_after: int = 3
    options: Mapping[str, Any] = field(default_factory=dict)
    # ENC-1: how its kind sends the Turkish tables and counts parts (not a key of the
    # table: the kind's declaration, set when the table is read; built directly, the
    # header-signalled tables of SMPP and the simulator).
    counting: Counting = TURKISH_TABLES

    def __init__(self, name: str, kind: str, *, base_url: str = "",
                 sender: str = "APPLIANCE", rate_per_s: float = 30.0, concurrency: int = 8,
                 dedupes_on_ref: bool = False, max_parts: int = 10,
                 national_language: str = "",
                 national_language_prefixes: tuple[str, ...] = ("+90",),
                 pull: bool | None = None, pull_after_s: float = 900.0,
                 pull_rate_per_s: float = 1.0, requests_per_s: float = 0.0,
                 batch_max: int = 100, inbound_poll_s: float = 60.0,
                 failover_after: int = 3,
                 options: Mapping[str, Any] | None = None,
                 counting: Counting = TURKISH_TABLES, **kind_keys: Any) -> None:
        values = {"name": name, "kind": kind, "base_url": base_url, "sender": sender,
                  "rate_per_s": rate_per_s, "concurrency": concurrency,
                  "dedupes_on_ref": dedupes_on_ref, "max_parts": max_parts,
                  "national_language": national_language,
                  "national_language_prefixes": national_language_prefixes,
                  "pull": pull, "pull_after_s": pull_after_s,
                  "pull_rate_per_s": pull_rate_per_s, "requests_per_s": requests_per_s,
                  "batch_max": batch_max, "inbound_poll_s": inbound_poll_s,
                  "failover_after": failover_after,
                  "options": {**(options or {}), **kind_keys}, "counting": counting}
        for key, value in values.items():
            object.__setattr__(self, key, value)

    def with_keys(self, **keys: Any) -> ProviderSettings:
        """A copy with ``keys`` changed as the table would change them: shared settings
        replaced, the kind's keys (and those in ``options=``) added over its own."""
        options = keys.pop("options", None) or {}
        shared = {k: v for k, v in keys.items() if k in SHARED_PROVIDER_SETTINGS
                  or k in ("name", "kind")}
        kind_keys = {**self.options, **options,
                     **{k: v for k, v in keys.items() if k not in shared}}
        return replace(self, **shared, options=kind_keys)

    def option(self, key: str, default: Any = "") -> Any:
        """The table's value of kind option ``key``, ``default`` when it has none."""
        return self.options.get(key, default)

    @property
    def turkish_prefixes(self) -> tuple[str, ...]:
        """The destinations that get the Turkish tables (empty: none)."""
        return self.national_language_prefixes if self.national_language == "turkish" else ()

    def turkish_to(self, msisdn: str) -> bool:
        """May a text to ``msisdn`` go with the Turkish tables through this provider?"""
        return turkish_to(self.national_language, self.national_language_prefixes, msisdn)

    def counting_to(self, msisdn: str | None = None) -> Counting:
        """How this provider sends a text to ``msisdn`` and counts its parts: with the
        Turkish tables its kind signals where they apply (ENC-1). ``None``: no number
        yet (a campaign's template), as it sends to its own country."""
        turkish = self.turkish_to(msisdn) if msisdn else self.national_language == "turkish"
        return self.counting if turkish else self.counting.plain


SHARED_PROVIDER_SETTINGS = ("base_url", "sender", "rate_per_s", "concurrency",
                            "dedupes_on_ref", "max_parts", "national_language",
                            "national_language_prefixes", "pull", "pull_after_s",
                            "pull_rate_per_s", "requests_per_s", "batch_max",
                            "inbound_poll_s", "failover_after")
"""The keys of a provider table every kind may read (each kind says which it does)."""


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path("./data")
    # SCALE-1: "postgresql://user:pass@host/db" keeps the data in PostgreSQL instead of
    # the SQLite file in the data dir; several processes may share one database.
    database_url: str = ""
    host: str = "127.0.0.1"
    port: int = 8080
    public_url: str = ""
    synchronous: str = "FULL"
    busy_timeout_ms: int = 5000
    read_connections: int = 4
    log_format: str = "auto"
    log_level: str = "info"
    log_full_numbers: bool = False
    shutdown_timeout_s: float = 20.0
    imports: ImportSettings = field(default_factory=ImportSettings)
    sending: SendingSettings = field(default_factory=SendingSettings)
    reports: ReportSettings = field(default_factory=ReportSettings)
    alerts: AlertSettings = field(default_factory=AlertSettings)
    backup: BackupSettings = field(default_factory=BackupSettings)
    http: HttpSettings = field(default_factory=HttpSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    optout: OptoutSettings = field(default_factory=OptoutSettings)
    webhooks: WebhookSettings = field(default_factory=WebhookSettings)
    compliance: ComplianceSettings = field(default_factory=ComplianceSettings)
    providers: Mapping[str, ProviderSettings] = field(default_factory=dict)
    # ROUTE-3: [[routes]], first match wins; none: the request's provider or the default.
    routes: tuple[RouteSettings, ...] = ()

    @property
    def db_path(self) -> Path:
        return self.data_dir / "appliance.db"

    @property
    def callback_base(self) -> str:
        base = self.public_url or f"http://{self.host}:{self.port}"
        return base.rstrip("/")

    @property
    def report_callback_base(self) -> str:
        """Where providers send their reports: ``public_url``; without one, the report
        intake's port when it has one (``[reports] intake_port``), else ``port``."""
        if self.public_url or not self.reports.intake_port:
            return self.callback_base
        return f"http://{self.host}:{self.reports.intake_port}"

    def callback_url(self, provider: str) -> str:
        """Where provider ``provider`` sends its reports, as handed to it per message."""
        return f"{self.report_callback_base}/callbacks/{provider}"

    def provider(self, name: str) -> ProviderSettings:
        try:
            return self.providers[name]
        except KeyError:
            raise ConfigError(f"no provider named {name!r} in the config") from None

    @property
    def default_provider(self) -> str:
        if self.sending.default_provider:
            return self.sending.default_provider
        return next(iter(self.providers), "")


SECTIONS: dict[str, type] = {
    "import": ImportSettings,
    "sending": SendingSettings,
    "reports": ReportSettings,
    "alerts": AlertSettings,
    "backup": BackupSettings,
    "http": HttpSettings,
    "storage": StorageSettings,
    "optout": OptoutSettings,
    "webhooks": WebhookSettings,
    "compliance": ComplianceSettings,
}
"""Each section as the file names it, and its settings' shape."""

SECTION_ATTR = {"import": "imports"}
"""Where the name in the file is not the attribute's (``import`` is a Python word)."""


def section_attr(name: str) -> str:
    """The :class:`Settings` attribute of section ``name`` as the file names it."""
    return SECTION_ATTR.get(name, name)


def section_name(attr: str) -> str:
    """The file's name of the section held by :class:`Settings` attribute ``attr``."""
    return next((name for name, a in SECTION_ATTR.items() if a == attr), attr)
