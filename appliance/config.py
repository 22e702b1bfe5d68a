"""Settings: one TOML file, then environment variables, then command-line flags.

Precedence (later wins): built-in defaults < config file < ``APPLIANCE_*`` environment
variables < flags. Every key is validated at start; an unknown key or a bad value is a
:class:`ConfigError` with one clear line naming the key.

Top-level keys map to ``APPLIANCE_<KEY>`` (``APPLIANCE_PORT``), section keys to
``APPLIANCE_<SECTION>_<KEY>`` (``APPLIANCE_IMPORT_MAX_ROWS``).
"""

from __future__ import annotations

import os
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from appliance.message_text.language import problems as language_problems
from appliance.message_text.language import turkish_to

PROVIDER_KINDS = ("simulator", "http", "vonage", "twilio", "infobip", "smpp")
# A concatenated SMS numbers its parts in one octet.
MAX_PARTS_LIMIT = 255
SECRET_KEYS = ("api_key", "api_secret", "signature_secret", "auth_token", "secret", "password")


class ConfigError(Exception):
    """A configuration problem, phrased for the operator in one line."""


@dataclass(frozen=True)
class ImportSettings:
    max_rows: int = 1_000_000
    max_bytes: int = 64 * 1024 * 1024
    chunk_lines: int = 2000
    default_region: str = "TR"
    payload_retention_days: float = 7.0
    job_retention_days: float = 90.0
    stuck_after_s: float = 600.0


@dataclass(frozen=True)
class SendingSettings:
    batch_size: int = 500
    submit_timeout_s: float = 10.0
    delivery_window_hours: float = 72.0
    max_attempts: int = 8
    max_body_chars: int = 1600
    default_provider: str = ""


@dataclass(frozen=True)
class ReportSettings:
    max_callback_bytes: int = 256 * 1024
    # A port of its own for /callbacks/*, served by a second process (the report
    # intake, docs/reports.md); 0: callbacks are served on `port` only.
    intake_port: int = 0
    inbox_retention_days: float = 30.0
    raw_retention_days: float = 30.0


@dataclass(frozen=True)
class AlertSettings:
    coverage_min_pct: float = 95.0
    coverage_window_hours: float = 48.0
    coverage_settle_hours: float = 6.0
    inbox_oldest_max_s: float = 3600.0
    overdue_max: int = 0
    webhooks_oldest_max_s: float = 900.0  # OPS-5: the oldest undelivered status event
    webhook_url: str = ""
    check_interval_s: float = 30.0


@dataclass(frozen=True)
class WebhookSettings:
    """Status webhooks out (OPS-5): where every message state change is POSTed."""

    url: str = ""  # with secret; both empty: no events are written
    secret: str = ""  # the HMAC-SHA256 key of X-Appliance-Signature
    timeout_s: float = 10.0  # one POST, connecting included
    concurrency: int = 4  # POSTs in flight at once (different messages)
    retention_days: float = 7.0  # delivered events are kept this long; undelivered ones always

    @property
    def configured(self) -> bool:
        return bool(self.url and self.secret)


@dataclass(frozen=True)
class OptoutSettings:
    # An inbound message that is one of these (see appliance/optout/keywords.py) adds
    # its sender to the suppression list. Empty: no keyword opts anyone out.
    keywords: tuple[str, ...] = ("STOP", "DUR", "IPTAL", "RET")


@dataclass(frozen=True)
class BackupSettings:
    interval_hours: float = 0.0  # 0 = no scheduled backups
    keep: int = 7
    dir: str = ""  # default: <data_dir>/backups


@dataclass(frozen=True)
class HttpSettings:
    """The public edge (EDGE-1, EDGE-2): how long and how much a client may send."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_header_bytes: int = 16384
    max_inflight_body_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class StorageSettings:
    """Free space kept for the small writes that must not fail (EDGE-4)."""

    min_free_bytes: int = 256 * 1024 * 1024


@dataclass(frozen=True)
class ProviderSettings:
    name: str
    kind: str
    base_url: str = ""
    sender: str = "APPLIANCE"
    rate_per_s: float = 30.0
    concurrency: int = 8
    api_key: str = ""
    api_secret: str = ""
    signature_secret: str = ""
    signature_method: str = "sha256"
    account_sid: str = ""
    auth_token: str = ""
    secret: str = ""
    dedupes_on_ref: bool = False
    max_parts: int = 10  # longest text accepted, in SMS parts (MSG-1)
    # ENC-1: "turkish" sends the Turkish shift tables to these destinations.
    national_language: str = ""
    national_language_prefixes: tuple[str, ...] = ("+90",)
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def turkish_prefixes(self) -> tuple[str, ...]:
        """The destinations that get the Turkish tables (empty: none)."""
        return self.national_language_prefixes if self.national_language == "turkish" else ()

    def turkish_to(self, msisdn: str) -> bool:
        """May a text to ``msisdn`` go with the Turkish tables through this provider?"""
        return turkish_to(self.national_language, self.national_language_prefixes, msisdn)


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
    providers: Mapping[str, ProviderSettings] = field(default_factory=dict)

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
}
SECTION_ATTR = {"import": "imports"}
CHOICES: dict[str, tuple[str, ...]] = {
    "synchronous": ("FULL", "NORMAL"),
    "log_format": ("auto", "json", "text"),
    "log_level": ("debug", "info", "warning", "error"),
    "kind": PROVIDER_KINDS,
    "signature_method": ("md5hash", "md5", "sha1", "sha256", "sha512"),
}


def _coerce(where: str, name: str, want: Any, value: Any) -> Any:
    """Turn a TOML or environment value into the type of the default ``want``."""
    try:
        if isinstance(want, bool):
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on"):
                return True
            if isinstance(value, str) and value.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError
        if isinstance(want, int):
            if isinstance(value, bool):
                raise ValueError
            out: Any = int(value)
            if isinstance(value, float) and value != out:
                raise ValueError
        elif isinstance(want, float):
            if isinstance(value, bool):
                raise ValueError
            out = float(value)
        elif isinstance(want, tuple):
            # A list of words: a TOML array, or comma-separated in the environment.
            items = value.split(",") if isinstance(value, str) else value
            if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
                raise ValueError
            out = tuple(i.strip() for i in items if i.strip())
        elif isinstance(want, Path):
            out = Path(str(value))
        elif isinstance(want, str):
            if not isinstance(value, str | int | float):
                raise ValueError
            out = str(value)
        else:
            out = value
    except (TypeError, ValueError):
        wanted = "a list of strings" if isinstance(want, tuple) else type(want).__name__
        raise ConfigError(f"{where}{name}: expected {wanted}, got {value!r}") from None
    if name in CHOICES:
        choices = CHOICES[name]
        norm = out.upper() if name == "synchronous" else out
        if norm not in choices:
            raise ConfigError(f"{where}{name}: {out!r} is not one of {', '.join(choices)}")
        out = norm
    if isinstance(out, int | float) and not isinstance(out, bool) and out < 0:
        raise ConfigError(f"{where}{name}: must not be negative, got {out!r}")
    return out


def _apply(obj: Any, values: Mapping[str, Any], where: str) -> Any:
    known = {f.name: getattr(obj, f.name) for f in fields(obj)}
    changes: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known or key in ("name", "options"):
            raise ConfigError(f"{where}{key}: unknown setting")
        changes[key] = _coerce(where, key, known[key], value)
    return replace(obj, **changes)


def _provider(name: str, table: Any) -> ProviderSettings:
    where = f"[providers.{name}] "
    if not isinstance(table, dict):
        raise ConfigError(f"{where}must be a table")
    if "kind" not in table:
        raise ConfigError(f"{where}kind: missing (one of {', '.join(PROVIDER_KINDS)})")
    known = {f.name for f in fields(ProviderSettings)}
    options = {k: v for k, v in table.items() if k not in known}
    base = ProviderSettings(name=name, kind="simulator", options=options)
    out: ProviderSettings = _apply(base, {k: v for k, v in table.items() if k in known}, where)
    wrong = language_problems(out.kind, out.national_language, out.national_language_prefixes)
    if wrong:
        raise ConfigError("; ".join(f"{where}{w}" for w in wrong))
    return out


def _from_mapping(settings: Settings, data: Mapping[str, Any], where: str) -> Settings:
    top: dict[str, Any] = {}
    out = settings
    for key, value in data.items():
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise ConfigError(f"{where}[{key}]: must be a table")
            attr = SECTION_ATTR.get(key, key)
            out = replace(out, **{attr: _apply(getattr(out, attr), value, f"{where}[{key}] ")})
        elif key == "providers":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}[providers]: must be a table of tables")
            out = replace(out, providers={n: _provider(n, t) for n, t in value.items()})
        else:
            top[key] = value
    if top:
        blocked = {"imports", "sending", "reports", "alerts", "backup", "http", "storage",
                   "optout", "webhooks", "providers"}
        for key in top:
            if key in blocked:
                raise ConfigError(f"{where}{key}: unknown setting")
        out = _apply(out, top, where)
    return out


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    top = {f.name for f in fields(Settings)} - {"imports", "sending", "reports", "alerts",
                                                 "backup", "http", "storage", "optout",
                                                 "webhooks", "providers"}
    for var, value in env.items():
        if not var.startswith("APPLIANCE_") or var in ("APPLIANCE_CONFIG", "APPLIANCE_CLOCK_FILE"):
            continue
        rest = var[len("APPLIANCE_"):].lower()
        if rest in top:
            data[rest] = value
            continue
        for section in SECTIONS:
            if rest.startswith(section + "_"):
                data.setdefault(section, {})[rest[len(section) + 1:]] = value
                break
        else:
            raise ConfigError(f"environment {var}: unknown setting")
    return data


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Settings:
    """Defaults, then the TOML file, then the environment, then ``overrides`` (flags)."""
    env = os.environ if env is None else env
    settings = Settings()
    path = config_file or env.get("APPLIANCE_CONFIG")
    if path:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {path}: not found") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: not valid TOML ({exc})") from None
        settings = _from_mapping(settings, data, f"{path}: ")
    settings = _from_mapping(settings, _from_env(env), "")
    flags = {k: v for k, v in (overrides or {}).items() if v is not None}
    settings = _from_mapping(settings, flags, "flag ")
    _validate(settings)
    return settings


def _validate(s: Settings) -> None:
    if s.port > 65535:
        raise ConfigError(f"port: {s.port} is not a TCP port")
    if not 0 <= s.reports.intake_port <= 65535:
        raise ConfigError(f"[reports] intake_port: {s.reports.intake_port} is not a TCP port")
    if s.reports.intake_port and s.reports.intake_port == s.port:
        raise ConfigError(f"[reports] intake_port: {s.port} is the server's own port; choose"
                          " another, or 0 to serve callbacks on the server's port only")
    if s.imports.chunk_lines < 1:
        raise ConfigError("[import] chunk_lines: must be at least 1")
    if s.read_connections < 1:
        raise ConfigError("read_connections: must be at least 1")
    if s.sending.default_provider and s.sending.default_provider not in s.providers:
        raise ConfigError(
            f"[sending] default_provider: no provider named {s.sending.default_provider!r}"
        )
    for p in s.providers.values():
        if not 1 <= p.max_parts <= MAX_PARTS_LIMIT:
            raise ConfigError(f"[providers.{p.name}] max_parts: must be between 1 and"
                              f" {MAX_PARTS_LIMIT} (a concatenated SMS has at most"
                              f" {MAX_PARTS_LIMIT} parts), got {p.max_parts}")
    if s.data_dir.exists() and not s.data_dir.is_dir():
        raise ConfigError(f"data_dir: {s.data_dir} exists and is not a directory")
    urls = (("public_url", s.public_url), ("[alerts] webhook_url", s.alerts.webhook_url),
            ("[webhooks] url", s.webhooks.url))
    for where, url in urls:
        if url and not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: {url!r} is not an http:// or https:// URL")
    _validate_webhooks(s.webhooks)
    if s.database_url:
        problem = database_url_problem(s.database_url)
        if problem:
            raise ConfigError(f"database_url: {mask_database_url(s.database_url)!r} {problem}")
    if s.alerts.check_interval_s <= 0:
        raise ConfigError("[alerts] check_interval_s: must be more than 0")
    from appliance.optout.keywords import keyword_problem

    for word in s.optout.keywords:
        problem = keyword_problem(word)
        if problem:
            raise ConfigError(f"[optout] keywords: {word!r} {problem}")
    if s.shutdown_timeout_s <= 0:
        raise ConfigError("shutdown_timeout_s: must be more than 0")
    for name in ("header_timeout_s", "body_timeout_s"):
        if getattr(s.http, name) <= 0:
            raise ConfigError(f"[http] {name}: must be more than 0")
    if s.http.max_header_bytes < 1024:
        raise ConfigError("[http] max_header_bytes: must be at least 1024")
    largest = max(s.imports.max_bytes, s.reports.max_callback_bytes)
    if s.http.max_inflight_body_bytes < largest:
        raise ConfigError("[http] max_inflight_body_bytes: must be at least the largest body"
                          f" one request may send ([import] max_bytes, {largest})")
    if s.backup.dir:
        data, chosen = s.data_dir.absolute().resolve(), Path(s.backup.dir).absolute().resolve()
        backups = data / "backups"
        if (chosen == data or data in chosen.parents) and not (
                chosen == backups or backups in chosen.parents):
            raise ConfigError(f"[backup] dir: {s.backup.dir} is inside the data dir beside the"
                              " live files; use its backups/ folder or a place outside it")
    if s.backup.dir and s.backup.interval_hours > 0 and Path(s.backup.dir).exists() \
            and not Path(s.backup.dir).is_dir():
        raise ConfigError(f"[backup] dir: {s.backup.dir} exists and is not a directory")


MAX_WEBHOOK_CONCURRENCY = 64


def _validate_webhooks(w: WebhookSettings) -> None:
    if bool(w.url) != bool(w.secret):
        missing, given = ("secret", "url") if w.url else ("url", "secret")
        raise ConfigError(f"[webhooks] {missing}: missing; {given} and {missing} go together"
                          " (the secret signs every event the url receives)")
    if w.timeout_s <= 0:
        raise ConfigError("[webhooks] timeout_s: must be more than 0")
    if not 1 <= w.concurrency <= MAX_WEBHOOK_CONCURRENCY:
        raise ConfigError(f"[webhooks] concurrency: must be between 1 and"
                          f" {MAX_WEBHOOK_CONCURRENCY}, got {w.concurrency}")


DATABASE_SCHEMES = ("postgresql", "postgres")


def database_url_problem(url: str) -> str | None:
    """Why ``url`` is not a PostgreSQL URL the appliance can use, or None."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"is not a valid URL ({exc})"
    if parts.scheme not in DATABASE_SCHEMES:
        return "is not a postgresql:// URL (postgresql://user:password@host:5432/database)"
    if any(c.isspace() for c in url):
        return "has white space in it"
    query = urllib.parse.parse_qs(parts.query)
    if not parts.hostname and "host" not in query:
        return "names no host (postgresql://user:password@host:5432/database)"
    if not parts.path.strip("/") and "dbname" not in query:
        return "names no database (postgresql://user:password@host:5432/database)"
    if port is not None and not 0 < port < 65536:
        return "has a port that is not a TCP port"
    return None


def mask_database_url(url: str) -> str:
    """``url`` with its password (in the user part or ``?password=``) as ``***``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        if ":" in user:
            user = user.split(":", 1)[0] + ":***"
        netloc = f"{user}@{host}"
    query = "&".join(f"{pair.partition('=')[0]}=***" if pair.startswith("password=") else pair
                     for pair in parts.query.split("&") if pair)
    return (f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
            + (f"#{parts.fragment}" if parts.fragment else ""))


def ensure_data_dir(s: Settings) -> None:
    """Create the data directory, or say clearly why it cannot be used."""
    try:
        s.data_dir.mkdir(parents=True, exist_ok=True)
        probe = s.data_dir / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"data_dir: {s.data_dir} is not writable ({exc.strerror})") from None


def masked(s: Settings) -> dict[str, Any]:
    """The effective settings as plain data, secrets replaced by ``***``."""

    def walk(obj: Any) -> Any:
        if hasattr(obj, "__dataclass_fields__"):
            return {f.name: mask(f.name, walk(getattr(obj, f.name))) for f in fields(obj)}
        if isinstance(obj, Mapping):
            return {k: mask(k, walk(v)) for k, v in obj.items()}
        if isinstance(obj, Path):
            return str(obj)
        return obj

    def mask(key: str, value: Any) -> Any:
        if key in SECRET_KEYS and value:
            return "***"
        if key == "database_url" and value:
            return mask_database_url(str(value))
        return value

    return walk(s)  # type: ignore[no-any-return]
