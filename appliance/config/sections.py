"""The sections of the config file, one frozen dataclass each, with their defaults.

The defaults here are what ``packaging/appliance.toml`` lists; a field's type is the
type a value must have (:mod:`appliance.config.values`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final


@dataclass(frozen=True)
class ImportSettings:
    max_rows: int = 1_000_000
    max_bytes: int = 64 * 1024 * 1024
    chunk_lines: int = 2000
    default_region: str = "TR"
    payload_retention_days: float = 7.0
    job_retention_days: float = 90.0
    stuck_after_s: float = 600.0
    # Parser processes for a large import; 0: one a core beside the server's, two at
    # most. Either way no more than the memory allows (appliance.imports.parser_budget).
    parser_processes: int = 0
    # The memory the appliance may use, in MB; 0: the cgroup's limit, if it has one.
    memory_limit_mb: int = 0


@dataclass(frozen=True)
class SendingSettings:
    batch_size: int = 500
    submit_timeout_s: float = 10.0
    delivery_window_hours: float = 72.0
    max_attempts: int = 8
    max_body_chars: int = 1600
    default_provider: str = ""
    # A provider that refuses every message until its operator acts (no credit, a
    # header not registered): its lane holds and tries again this often (at most).
    blocked_retry_s: float = 60.0
    # How often the providers whose API tells it are asked for their credit.
    credit_interval_s: float = 300.0
    # ROUTE-4: how long a message stays worth sending when the request names no
    # validity_s; 0: none of our own (the provider's default, never cancelled for age).
    validity_s: int = 0
    # ROUTE-3: a provider of a route is lowered (tried after the others) when more than
    # health_undelivered_above of its messages submitted over the last health_window_s
    # were not delivered within health_deliver_within_s (GOV.UK Notify's rule: 15% of
    # the last 15 minutes' messages not delivered within 5 minutes), judged once it has
    # health_min_messages; a lowered provider keeps 1 in health_trickle of its routes'
    # messages so that its recovery is seen. health_undelivered_above = 1: never lowered.
    health_window_s: float = 900.0
    health_deliver_within_s: float = 300.0
    health_undelivered_above: float = 0.15
    health_min_messages: int = 20
    health_trickle: int = 100


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
    """Status webhooks out (OPS-5): where every message state change is POSTed, for the
    accounts without a receiver of their own (TEAM-2); timeout, concurrency and retention
    are every receiver's."""

    url: str = ""  # with secret; both empty: none written but for accounts with their own
    secret: str = ""  # the HMAC-SHA256 key of X-Appliance-Signature
    timeout_s: float = 10.0  # one POST, connecting included
    concurrency: int = 4  # POSTs in flight at once to each receiver (different messages)
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


# IYS-3: what a commercial text must hold (Law 6563 art. 6, its regulation art. 8-9): how
# to refuse for free ("RET yazıp ... gönderin") and who sends it (the trade name or the
# MERSİS number). Case-insensitive; Python's matching takes MERSİS, MERSIS and mersis alike.
DEFAULT_OPTOUT_PATTERN: Final = r"(?i)\bRET\b"
DEFAULT_IDENTITY_PATTERN: Final = r"(?i)\bmersis\b"
DEFAULT_COMMERCIAL_WINDOW: Final = {"from": "08:00", "to": "21:00", "tz": "Europe/Istanbul"}


@dataclass(frozen=True)
class ComplianceSettings:
    """Commercial messages (IYS-1..4), appliance-wide: with ``country = "TR"`` every send
    and campaign says its ``type``, a commercial one needs consent, its text the two
    patterns, and the same text is not sent twice a day (``docs/sending.md``)."""

    country: str = ""  # "TR": the İYS rules; "": none
    iys_brand_code: str = ""  # the brand's İYS code, for the providers that take it
    optout_pattern: str = DEFAULT_OPTOUT_PATTERN
    identity_pattern: str = DEFAULT_IDENTITY_PATTERN
    # A commercial campaign without a window of its own sends only in this one.
    commercial_window: Mapping[str, str] = field(
        default_factory=lambda: dict(DEFAULT_COMMERCIAL_WINDOW))

    @property
    def turkey(self) -> bool:
        return self.country == "TR"
