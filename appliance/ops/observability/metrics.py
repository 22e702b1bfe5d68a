"""Prometheus metrics (``GET /metrics``), with ``prometheus-client``.

A :class:`Metrics` per process holds its own ``CollectorRegistry``:

* live instruments, updated as things happen: HTTP requests by route template, method
  and status (and their duration), the writer's commit latency, and the age of each
  signed report when it arrives (by provider);
* a collector that reads the rest at scrape time: the writer's queue depth and
  counters, the import rate, and, with one read unit, jobs and messages by state,
  reports by outcome, the inbox, coverage and delivery over the alert window,
  overdue messages, suppressions by source and inbound messages (from the kept counts
  of :mod:`appliance.store.rollups`: no scan), and the status webhook outbox (events
  written, delivered, failed POSTs, waiting, oldest), the held provider lanes and the
  providers' credit; plus backup age and
  outcome, scheduler heartbeats and one ``appliance_alert_holding`` gauge per alert; and
  the edge (EDGE-1, 2, 4): open connections, what the edge refused, request bodies held,
  free disk space; and each SMPP session (:mod:`appliance.smpp.metrics`).

Scrapes run in a worker thread (the collector does blocking reads). The live
instruments are made with :class:`Metrics`; the collector reads the running parts
(:class:`~appliance.ops.observability.sources.Sources`) and is registered by
:func:`appliance.ops.observability.install.install`.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio.to_thread
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from appliance import __version__
from appliance.config import Settings
from appliance.disk import free_bytes
from appliance.ops.backup.status import read_status
from appliance.ops.observability.alerts import ops_alerts
from appliance.ops.observability.route_metrics import route_families
from appliance.ops.observability.sources import Sources
from appliance.optout.suppressions import SOURCES
from appliance.providers.registry import Providers
from appliance.providers.status_query import PullVerdict
from appliance.providers.transport import SessionTransport
from appliance.reports.alerts import Alert, alerts_from
from appliance.reports.coverage import coverage, inbox_health, overdue
from appliance.runtime import Runtime
from appliance.sending.credit import Credit, credits
from appliance.sending.provider_holds import Hold, held
from appliance.store.connection import Connection
from appliance.store.rollups import counts
from appliance.store.rows import as_int
from appliance.webhooks.health import OutboxHealth, outbox_totals

COMMIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series
# Seconds, from a minute to two days: providers retry a receipt for a day or more.
REPORT_AGE_BUCKETS = (1.0, 10.0, 60.0, 300.0, 900.0, 3600.0, 4 * 3600.0, 12 * 3600.0,
                      24 * 3600.0, 48 * 3600.0)
HTTP_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)


@dataclass
class DbSnapshot:
    """What the collector reads from the database at scrape time."""

    jobs: dict[str, int] = field(default_factory=dict)
    messages: dict[str, int] = field(default_factory=dict)
    reports: dict[str, int] = field(default_factory=dict)
    raw_reports: dict[str, int] = field(default_factory=dict)
    inbox_waiting: int = 0
    inbox_oldest_age_s: float | None = None
    coverage_pct: float | None = None
    delivered_pct: float | None = None
    window_messages: int = 0
    overdue: int = 0
    alerts: list[Alert] = field(default_factory=list)
    suppressions: dict[str, int] = field(default_factory=dict)
    inbound: dict[str, int] = field(default_factory=dict)
    webhooks: OutboxHealth = field(default_factory=OutboxHealth)
    holds: dict[str, Hold] = field(default_factory=dict)
    credits: dict[str, Credit] = field(default_factory=dict)


def _grouped(conn: Connection, sql: str) -> dict[str, int]:
    return {str(k): as_int(v) for k, v in conn.execute(sql)}


def read_snapshot(conn: Connection, settings: Settings, now_ms: int) -> DbSnapshot:
    """Every number of one scrape (a read unit: one snapshot, see ``store.readers``).

    Counts come from the kept counts (:mod:`appliance.store.rollups`), never from a
    scan, and the alerts from the figures already read."""
    a = settings.alerts
    reports = counts(conn, "report_inbox")
    raw = counts(conn, "raw_reports")
    snap = DbSnapshot(
        jobs=_grouped(conn, "SELECT state, count(*) FROM import_jobs GROUP BY state"),
        messages=counts(conn, "messages"),
        reports=reports,
        raw_reports=raw,
    )
    health = inbox_health(conn, now_ms)
    snap.inbox_waiting = health.waiting
    snap.inbox_oldest_age_s = health.oldest_age_s
    cov = coverage(conn, now_ms, a.coverage_window_hours, a.coverage_settle_hours)
    snap.coverage_pct = cov.coverage_pct
    snap.delivered_pct = cov.delivered_pct
    snap.window_messages = cov.total
    snap.overdue = overdue(conn, now_ms, settings.sending.delivery_window_hours,
                           a.coverage_window_hours)
    snap.alerts = (alerts_from(cov, health, snap.overdue, settings)
                   + ops_alerts(conn, settings, now_ms))
    snap.suppressions = counts(conn, "suppressions")
    inbound = counts(conn, "inbound_messages")
    raw_inbound = counts(conn, "raw_inbound")
    snap.inbound = {"messages": sum(inbound.values()), "stops": inbound.get("stop", 0),
                    "raw_parsed": raw_inbound.get("parsed", 0),
                    "raw_quarantined": raw_inbound.get("quarantined", 0)}
    snap.webhooks = outbox_totals(conn, now_ms)
    snap.holds = {k: v for k, v in held(conn).items() if k in settings.providers}
    snap.credits = {k: v for k, v in credits(conn).items() if k in settings.providers}
    return snap


def _provider_accounts(snap: DbSnapshot) -> Iterator[Metric]:
    """Held lanes (the providers refusing every message, and why) and the credit each
    provider's account has, where its API tells it (every process shows the same)."""
    blocked = GaugeMetricFamily(
        "appliance_provider_blocked", "1 while the provider refuses every message until"
        " its operator acts and its lane holds (the reason as a label).",
        labels=["provider", "reason"])
    for name, hold in sorted(snap.holds.items()):
        blocked.add_metric([name, hold.reason], 1.0)
    yield blocked
    credit = GaugeMetricFamily(
        "appliance_provider_credit", "The provider account's credit at its last query"
        " (in the provider's unit; absent until read).", labels=["provider"])
    for name, kept in sorted(snap.credits.items()):
        if kept.credit is not None:
            credit.add_metric([name], kept.credit)
    yield credit


def _gauge(name: str, doc: str, value: float | None) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc)
    if value is not None:
        g.add_metric([], float(value))
    return g


def _by(name: str, doc: str, label: str, values: dict[str, int],
        always: tuple[str, ...] = ()) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc, labels=[label])
    for key in sorted(set(values) | set(always)):
        g.add_metric([key], float(values.get(key, 0)))
    return g


def _unreached(sources: Sources) -> Iterator[Metric]:
    """Providers the sender cannot reach now (their messages wait, none is given up)."""
    lanes = sources.sender.lanes
    tries = GaugeMetricFamily(
        "appliance_provider_unreached_tries",
        "Submissions in a row that could not reach the provider (0: reached).",
        labels=["provider"])
    for name, lane in sorted(lanes.items()):
        tries.add_metric([name], float(lane.unreached))
    yield tries


class ApplianceCollector(Collector):
    """Numbers read at scrape time."""

    def __init__(self, appliance: Runtime, sources: Sources) -> None:
        self.appliance = appliance
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        appliance = self.appliance
        sources = self.sources
        writer = appliance.store.writer
        stats = writer.stats
        yield _gauge("appliance_writer_queue_depth", "Write units waiting for the writer.",
                     writer.queue_depth)
        for name, doc, value in (
            ("appliance_writer_commits", "Group commits.", stats.commits),
            ("appliance_writer_units", "Write units committed.", stats.units),
            ("appliance_writer_failed_units", "Write units rolled back.", stats.failed_units),
            ("appliance_writer_failed_commits", "Commits that failed.", stats.failed_commits),
        ):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], float(value))
            yield c
        rate = sources.import_worker.rate
        yield _gauge("appliance_import_rows_per_second",
                     "Import rows parsed and written per second, recent chunks.",
                     rate.per_second)
        rows = CounterMetricFamily("appliance_import_rows", "Import rows processed.")
        rows.add_metric([], float(rate.total_rows))
        yield rows
        intake = sources.report_intake
        if intake is not None:
            yield _gauge("appliance_report_intake_up",
                         "1 while the report intake's process is running.",
                         1.0 if intake.up else 0.0)
            restarts = CounterMetricFamily("appliance_report_intake_restarts",
                                           "Times the report intake's process was started"
                                           " again after it exited.")
            restarts.add_metric([], float(intake.restarts))
            yield restarts

        now = appliance.now_ms()
        snap = appliance.store.readers.call(lambda c: read_snapshot(c, appliance.settings, now))
        yield _by("appliance_import_jobs", "Import jobs by state.", "state", snap.jobs,
                  ("DRAFT", "RUNNING", "DONE", "FAILED", "CANCELLED"))
        yield _by("appliance_messages", "Messages by state.", "state", snap.messages)
        yield _by("appliance_reports", "Stored reports by outcome (APPLIED, STALE,"
                  " WAITING = unmatched, in the inbox).", "outcome", snap.reports,
                  ("APPLIED", "STALE", "WAITING"))
        yield _by("appliance_raw_callbacks", "Stored callback bodies (parsed or"
                  " quarantined).", "result", snap.raw_reports, ("parsed", "quarantined"))
        yield _gauge("appliance_inbox_waiting", "Reports waiting for their message.",
                     snap.inbox_waiting)
        yield _gauge("appliance_inbox_oldest_age_seconds",
                     "Age of the oldest unmatched report (0 when none).",
                     snap.inbox_oldest_age_s or 0.0)
        yield _gauge("appliance_coverage_ratio", "Share of messages in the alert window with a"
                     " final report (absent when the window is empty).",
                     None if snap.coverage_pct is None else snap.coverage_pct / 100)
        yield _gauge("appliance_delivered_ratio", "Share of messages in the alert window"
                     " delivered (absent when the window is empty).",
                     None if snap.delivered_pct is None else snap.delivered_pct / 100)
        yield _gauge("appliance_window_messages", "Messages in the alert window.",
                     snap.window_messages)
        yield _gauge("appliance_overdue_messages", "Messages past the delivery window"
                     " without a final report.", snap.overdue)
        yield _by("appliance_suppressions", "Numbers on suppression lists (every account),"
                  " by how they got there.", "source", snap.suppressions, SOURCES)
        yield _gauge("appliance_inbound_messages", "Inbound messages stored.",
                     snap.inbound.get("messages", 0))
        yield _gauge("appliance_inbound_stops", "Inbound messages that were a STOP keyword.",
                     snap.inbound.get("stops", 0))
        yield _by("appliance_raw_inbound", "Stored inbound request bodies (parsed or"
                  " quarantined).", "result",
                  {"parsed": snap.inbound.get("raw_parsed", 0),
                   "quarantined": snap.inbound.get("raw_quarantined", 0)})
        yield from _webhooks(snap.webhooks)
        yield from _provider_accounts(snap)
        holding = GaugeMetricFamily("appliance_alert_holding",
                                    "1 while the alert holds, else 0.", labels=["alert"])
        for alert in snap.alerts:
            holding.add_metric([alert.name], 1.0 if alert.firing else 0.0)
        yield holding

        status = read_status(appliance.settings.data_dir)
        yield _gauge("appliance_backup_age_seconds", "Seconds since the last good backup"
                     " (absent before the first).", status.age_s(now))
        yield _gauge("appliance_backup_last_success_timestamp_seconds",
                     "When the last good backup was taken.",
                     None if status.last_ok_at is None else status.last_ok_at / 1000)
        yield _gauge("appliance_backup_last_failed", "1 when the last backup attempt failed.",
                     1.0 if status.last_error else 0.0)
        failures = CounterMetricFamily("appliance_backup_failures", "Failed backups.")
        failures.add_metric([], float(status.failures))
        yield failures

        beats = GaugeMetricFamily("appliance_loop_heartbeat_age_seconds",
                                  "Seconds since each scheduler loop finished a step.",
                                  labels=["loop"])
        for name, age in sorted(appliance.scheduler.heartbeats().items()):
            beats.add_metric([name], age)
        yield beats
        yield from _edge(appliance, sources)
        yield from _sessions(sources.providers)
        yield from _unreached(sources)
        yield from route_families(sources.sender)
        yield from _pulls(sources)
        info = GaugeMetricFamily("appliance_build_info", "The running version.",
                                 labels=["version"])
        info.add_metric([__version__], 1.0)
        yield info


PULL_OUTCOMES = tuple(v.value for v in PullVerdict)


def _pulls(sources: Sources) -> Iterator[Metric]:
    """Messages asked about, by provider and what the answer said of each (ROUTE-2)."""
    puller = sources.puller
    if puller is None or not puller.lanes:
        return
    family = CounterMetricFamily(
        "appliance_report_pulls", "Messages asked about in status requests, by what the"
        " answer said: final, pending, unknown_id or error.", labels=["provider", "outcome"])
    for name in sorted(puller.lanes):
        for outcome in PULL_OUTCOMES:
            family.add_metric([name, outcome], float(puller.counts[(name, outcome)]))
    yield family


def _sessions(providers: Providers) -> Iterator[Metric]:
    """Each session kind's families over its sessions, whatever protocol they speak."""
    by_kind: dict[str, dict[str, SessionTransport]] = {}
    for name, (provider, transport) in providers.sessions().items():
        by_kind.setdefault(provider.kind, {})[name] = transport
    for kind, transports in sorted(by_kind.items()):
        families = providers.kinds[kind].metrics
        if families is not None:
            yield from families(transports)


def _webhooks(health: OutboxHealth) -> Iterator[Metric]:
    """The status webhook outbox (OPS-5), every receiver's events together (TEAM-2):
    counters kept in the database, so they hold across restarts (written = delivered +
    waiting)."""
    for name, doc, value in (
        ("appliance_webhook_events_written", "Status events written to the outbox.",
         health.written),
        ("appliance_webhook_events_delivered", "Status events the receiver took (2xx).",
         health.delivered),
        ("appliance_webhook_failed_attempts", "Status event POSTs that got no 2xx.",
         health.failed_attempts),
    ):
        c = CounterMetricFamily(name, doc)
        c.add_metric([], float(value))
        yield c
    yield _gauge("appliance_webhook_events_waiting", "Status events not taken yet.",
                 health.waiting)
    yield _gauge("appliance_webhook_oldest_waiting_age_seconds",
                 "Age of the oldest status event not taken yet (0 when none).",
                 health.oldest_waiting_age_s or 0.0)
    yield _gauge("appliance_webhook_enabled",
                 "1 while events are written: [webhooks] configured or an account's receiver.",
                 1.0 if health.enabled else 0.0)
    yield _gauge("appliance_webhook_last_success_timestamp_seconds",
                 "When a receiver last took an event (absent before the first).",
                 None if health.last_success_at is None else health.last_success_at / 1000)


def _edge(appliance: Runtime, sources: Sources) -> Iterator[Metric]:
    edge = sources.edge
    intake = sources.report_intake.edge if sources.report_intake is not None else None
    yield _gauge("appliance_http_connections_open", "Open HTTP connections.",
                 edge.open_connections + (intake.open_connections if intake else 0))
    refused = CounterMetricFamily("appliance_http_edge_refusals",
                                  "Requests and connections the edge refused or closed, by"
                                  " reason.", labels=["reason"])
    counts = edge.refused + (intake.refused if intake else collections.Counter())
    for reason in sorted({"idle_timeout", "request_timeout", "headers_too_large",
                          "bad_request", *counts}):
        refused.add_metric([reason], float(counts[reason]))
    yield refused
    budget = sources.body_budget
    yield _gauge("appliance_http_body_bytes_held", "Bytes of request bodies held in memory.",
                 budget.held + (intake.body_bytes_held if intake else 0))
    busy = CounterMetricFamily("appliance_http_body_budget_refusals",
                               "Requests refused 503 because bodies in flight filled"
                               " [http] max_inflight_body_bytes.")
    busy.add_metric([], float(budget.refused + (intake.budget_refused if intake else 0)))
    yield busy
    try:
        free: int | None = free_bytes(appliance.settings.data_dir)
    except OSError:
        free = None
    yield _gauge("appliance_storage_free_bytes", "Free bytes on the data dir's disk.", free)


class Metrics:
    """This process's registry and its live instruments (made once, by the composition
    root); :meth:`collect_from` adds the collector that reads the parts."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.http_requests = Counter(
            "appliance_http_requests", "HTTP requests by route template, method and status.",
            ["route", "method", "status"], registry=self.registry)
        self.http_seconds = Histogram(
            "appliance_http_request_duration_seconds", "HTTP request duration by route.",
            ["route"], buckets=HTTP_BUCKETS, registry=self.registry)
        self.commit_seconds = Histogram(
            "appliance_writer_commit_seconds", "Group commit latency (BEGIN to COMMIT).",
            buckets=COMMIT_BUCKETS, registry=self.registry)
        self.signed_report_age = Histogram(
            "appliance_signed_report_age_seconds",
            "Age of each authenticated report at arrival, from the time the provider signed"
            " into it (0 when that time is ahead of our clock).",
            ["provider"], buckets=REPORT_AGE_BUCKETS, registry=self.registry)
        self._by_request: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self._age_by_provider: dict[str, Any] = {}

    def collect_from(self, runtime: Runtime, sources: Sources) -> None:
        """Read the parts at each scrape, and time the writer's commits."""
        self.registry.register(ApplianceCollector(runtime, sources))
        runtime.store.writer.commit_listeners.append(
            lambda seconds, units: self.commit_seconds.observe(seconds))

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        key = (route, method, status)
        found = self._by_request.get(key)
        if found is None:  # labels() looks the child up under a lock: once per key
            found = self._by_request[key] = (
                self.http_requests.labels(route, method, str(status)),
                self.http_seconds.labels(route))
        found[0].inc()
        found[1].observe(seconds)

    def observe_signed_report_age(self, provider: str, seconds: float) -> None:
        found = self._age_by_provider.get(provider)
        if found is None:  # as above: the child looked up once per provider
            found = self._age_by_provider[provider] = self.signed_report_age.labels(provider)
        found.observe(max(0.0, seconds))

    async def exposition(self) -> bytes:
        return await anyio.to_thread.run_sync(generate_latest, self.registry)

