"""``/metrics`` for routes and failover (ROUTE-3).

``appliance_route_failovers_total{from,to,reason}``: messages this process moved from a
provider to the next of their route (``reason``: ``unreached``, the provider not reached
``failover_after`` tries in a row; ``route_refused``, a refusal its kind declares as
"this route cannot"). ``appliance_provider_lowered{provider}``: 1 while a provider of a
route is lowered for its live delivery (:mod:`appliance.sending.provider_health`), 0
otherwise; every process reads the same verdict from the database.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from appliance.sending.sender import Sender


def route_families(sender: Sender) -> Iterator[Metric]:
    moved = CounterMetricFamily(
        "appliance_route_failovers", "Messages moved to the next provider of their route"
        " (reason: unreached, route_refused), by this process.",
        labels=["from", "to", "reason"])
    if sender.router is not None:
        for (source, target, reason), count in sorted(sender.router.failovers.items()):
            moved.add_metric([source, target, reason], float(count))
    yield moved
    lowered = GaugeMetricFamily(
        "appliance_provider_lowered", "1 while the provider is lowered for its live"
        " delivery (its routes try it after the others), else 0.", labels=["provider"])
    for name in sorted(sender.health.names):
        lowered.add_metric([name], 1.0 if name in sender.health.lowered else 0.0)
    yield lowered
