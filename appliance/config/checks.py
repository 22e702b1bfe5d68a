"""Checks across settings: each value has its type already; here, what it means.

Ranges that need more than one number (the intake port is not the server's port, the
in-flight budget holds the largest body), URLs, the data and backup directories, the
status webhook's pair of url and secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from appliance.message_text.words import keyword_problem

from .database_url import database_url_problem, mask_database_url
from .errors import ConfigError
from .sections import ComplianceSettings, WebhookSettings
from .settings import Settings

# A concatenated SMS numbers its parts in one octet.
MAX_PARTS_LIMIT = 255


def validate(s: Settings) -> None:
    """Refuse values that are each of the right type but wrong here, or together."""
    if s.reports.intake_port and s.reports.intake_port == s.port:
        raise ConfigError(f"[reports] intake_port: {s.port} is the server's own port; choose"
                          " another, or 0 to serve callbacks on the server's port only")
    if s.imports.chunk_lines < 1:
        raise ConfigError("[import] chunk_lines: must be at least 1")
    for name in ("parser_processes", "memory_limit_mb"):
        if getattr(s.imports, name) < 0:
            raise ConfigError(f"[import] {name}: must be 0 (automatic) or more")
    if s.read_connections < 1:
        raise ConfigError("read_connections: must be at least 1")
    if s.sending.default_provider and s.sending.default_provider not in s.providers:
        raise ConfigError(
            f"[sending] default_provider: no provider named {s.sending.default_provider!r}"
        )
    for name in ("submit_timeout_s", "blocked_retry_s", "credit_interval_s"):
        if getattr(s.sending, name) <= 0:
            raise ConfigError(f"[sending] {name}: must be more than 0")
    for p in s.providers.values():
        if p.base_url and not p.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"[providers.{p.name}] base_url: {p.base_url!r} is not an"
                              " http:// or https:// URL")
        if not 1 <= p.max_parts <= MAX_PARTS_LIMIT:
            raise ConfigError(f"[providers.{p.name}] max_parts: must be between 1 and"
                              f" {MAX_PARTS_LIMIT} (a concatenated SMS has at most"
                              f" {MAX_PARTS_LIMIT} parts), got {p.max_parts}")
        if p.requests_per_s < 0:
            raise ConfigError(f"[providers.{p.name}] requests_per_s: must be 0 (the kind's"
                              f" published limit) or more, got {p.requests_per_s:g}")
        if p.failover_after < 1:
            raise ConfigError(f"[providers.{p.name}] failover_after: must be at least 1,"
                              f" got {p.failover_after}")
        if p.batch_max < 1:
            raise ConfigError(f"[providers.{p.name}] batch_max: must be at least 1,"
                              f" got {p.batch_max}")
    _validate_health(s)
    if s.data_dir.exists() and not s.data_dir.is_dir():
        raise ConfigError(f"data_dir: {s.data_dir} exists and is not a directory")
    urls = (("public_url", s.public_url), ("[alerts] webhook_url", s.alerts.webhook_url),
            ("[webhooks] url", s.webhooks.url))
    for where, url in urls:
        if url and not url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}: {url!r} is not an http:// or https:// URL")
    _validate_webhooks(s.webhooks)
    _validate_compliance(s.compliance)
    if s.database_url:
        problem = database_url_problem(s.database_url)
        if problem:
            raise ConfigError(f"database_url: {mask_database_url(s.database_url)!r} {problem}")
    if s.alerts.check_interval_s <= 0:
        raise ConfigError("[alerts] check_interval_s: must be more than 0")
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


def _validate_health(s: Settings) -> None:
    """ROUTE-3's health settings: windows more than 0, a share from 0 to 1."""
    h = s.sending
    for name in ("health_window_s", "health_deliver_within_s"):
        if getattr(h, name) <= 0:
            raise ConfigError(f"[sending] {name}: must be more than 0")
    if not 0 <= h.health_undelivered_above <= 1:
        raise ConfigError("[sending] health_undelivered_above: a share from 0 to 1 (1: never"
                          f" lowered), got {h.health_undelivered_above:g}")
    for name in ("health_min_messages", "health_trickle"):
        if getattr(h, name) < 1:
            raise ConfigError(f"[sending] {name}: must be at least 1")


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


_HH_MM = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")


def _window_problem(window: Any) -> str | None:
    if not isinstance(window, Mapping) or set(window) != {"from", "to", "tz"}:
        return "must be a table {from = \"HH:MM\", to = \"HH:MM\", tz = \"Area/City\"}"
    for key in ("from", "to"):
        if not isinstance(window[key], str) or not _HH_MM.match(window[key]):
            return f"{key} must be a time of day as HH:MM, got {window[key]!r}"
    if window["from"] == window["to"]:
        return "from and to are the same time: the window would be empty"
    try:
        ZoneInfo(str(window["tz"]))
    except (ZoneInfoNotFoundError, ValueError):
        return f"tz {window['tz']!r} is not a time zone we know"
    return None


def _validate_compliance(c: ComplianceSettings) -> None:
    for name in ("optout_pattern", "identity_pattern"):
        try:
            re.compile(getattr(c, name))
        except re.error as exc:
            raise ConfigError(f"[compliance] {name}: not a regular expression ({exc})"
                              ) from None
    problem = _window_problem(c.commercial_window)
    if problem:
        raise ConfigError(f"[compliance] commercial_window: {problem}")


def ensure_data_dir(s: Settings) -> None:
    """Create the data directory, or say clearly why it cannot be used."""
    try:
        s.data_dir.mkdir(parents=True, exist_ok=True)
        probe = s.data_dir / ".write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(f"data_dir: {s.data_dir} is not writable ({exc.strerror})") from None
