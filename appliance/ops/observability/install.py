"""Registers the observability parts: the metrics' collector and the operations
alerts' loop."""

from __future__ import annotations

from appliance.ops.observability.alerts import ops_alerts
from appliance.ops.observability.metrics import Metrics
from appliance.ops.observability.sources import Sources
from appliance.reports.alerts import AlertWatch
from appliance.runtime import Runtime

ALERTS_LOOP = "ops-alerts"


def install(runtime: Runtime, metrics: Metrics, sources: Sources) -> AlertWatch:
    """``metrics`` (made first: the report intake observes into it) reading ``sources``
    at each scrape; and the operations alerts' watcher, which is returned."""
    metrics.collect_from(runtime, sources)
    # The report alerts' watcher, over the backup and stuck-import alerts: same state
    # keys, same log lines, same webhook payload.
    watch = AlertWatch(runtime, source=ops_alerts)
    runtime.scheduler.add(ALERTS_LOOP, runtime.singleton(ALERTS_LOOP, watch.step),
                          interval_s=runtime.settings.alerts.check_interval_s)
    return watch
