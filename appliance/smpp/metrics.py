"""The SMPP sessions in ``/metrics`` (Prometheus families, read at scrape time).

Per provider (label ``provider``): ``appliance_smpp_bound`` (1 while every link is
bound), ``appliance_smpp_bound_since_timestamp_seconds``, ``appliance_smpp_window`` and
``appliance_smpp_window_in_use`` (``submit_sm`` written and unanswered),
``appliance_smpp_rate_per_second`` (in force: lower than configured after throttling),
and counters since start: ``appliance_smpp_throttled``, ``appliance_smpp_reconnects``,
``appliance_smpp_submit_sm`` by ``outcome`` (``written``, ``accepted``, ``rejected``,
``retried``, ``uncertain``), ``appliance_smpp_deliver_sm`` by ``result`` (``received``,
``receipt``, ``receipt_waiting``, ``inbound``, ``unreadable``, ``temp_error``: answered
``ESME_RX_T_APPN``), ``appliance_smpp_late_ids_recorded`` and
``appliance_smpp_orphan_receipts_matched``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from appliance.providers.transport import SessionTransport
from appliance.smpp.transport import SmppTransport


def smpp_metrics(transports: Mapping[str, SessionTransport]) -> Iterator[Metric]:
    """The families of every SMPP session among ``transports`` (none: nothing)."""
    sessions = {n: t for n, t in transports.items() if isinstance(t, SmppTransport)}
    if not sessions:
        return
    label = ["provider"]
    bound = GaugeMetricFamily("appliance_smpp_bound", "1 while the SMPP session is bound.",
                              labels=label)
    since = GaugeMetricFamily("appliance_smpp_bound_since_timestamp_seconds",
                              "When the SMPP session was bound (absent while it is not).",
                              labels=label)
    window = GaugeMetricFamily("appliance_smpp_window", "Outstanding submit_sm allowed.",
                               labels=label)
    in_use = GaugeMetricFamily("appliance_smpp_window_in_use",
                               "submit_sm written and not yet answered.", labels=label)
    rate = GaugeMetricFamily("appliance_smpp_rate_per_second",
                             "submit_sm rate in force (lower after throttling).", labels=label)
    throttled = CounterMetricFamily("appliance_smpp_throttled",
                                    "ESME_RTHROTTLED and ESME_RMSGQFUL answers.", labels=label)
    reconnects = CounterMetricFamily("appliance_smpp_reconnects",
                                     "Bound links lost and opened again.", labels=label)
    submits = CounterMetricFamily("appliance_smpp_submit_sm", "submit_sm by outcome.",
                                  labels=[*label, "outcome"])
    delivers = CounterMetricFamily("appliance_smpp_deliver_sm", "deliver_sm by what came of"
                                   " it (temp_error: answered ESME_RX_T_APPN, not stored).",
                                   labels=[*label, "result"])
    late = CounterMetricFamily("appliance_smpp_late_ids_recorded",
                               "Late submit_sm_resp ids recorded for UNCERTAIN parts.",
                               labels=label)
    orphans = CounterMetricFamily("appliance_smpp_orphan_receipts_matched",
                                  "Receipts whose id was never answered, matched to their"
                                  " UNCERTAIN part.", labels=label)
    for name, s in sorted(sessions.items()):
        st = s.state()
        c = s.intake_counts
        bound.add_metric([name], 1.0 if st.bound else 0.0)
        if st.bound_since_ms is not None:
            since.add_metric([name], st.bound_since_ms / 1000)
        window.add_metric([name], float(st.window))
        in_use.add_metric([name], float(st.window_in_use))
        rate.add_metric([name], st.rate_per_s)
        throttled.add_metric([name], float(st.throttled))
        reconnects.add_metric([name], float(st.reconnects))
        for outcome, value in (("written", st.submitted), ("accepted", st.accepted),
                               ("rejected", st.rejected), ("retried", st.retried),
                               ("uncertain", st.uncertain)):
            submits.add_metric([name, outcome], float(value))
        for result, value in (("received", st.delivers), ("receipt", c.receipts),
                              ("receipt_waiting", c.receipts_waiting),
                              ("inbound", c.inbound), ("unreadable", c.unreadable),
                              ("temp_error", st.deliver_temp_errors)):
            delivers.add_metric([name, result], float(value))
        late.add_metric([name], float(s.totals.late_recorded))
        orphans.add_metric([name], float(s.totals.orphans_matched))
    yield from (bound, since, window, in_use, rate, throttled, reconnects, submits, delivers,
                late, orphans)
