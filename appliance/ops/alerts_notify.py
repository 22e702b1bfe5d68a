"""The ``ops-alerts`` loop: evaluates the operations alerts and announces changes.

Like the report alerts' loop (:class:`appliance.reports.alerts.AlertWatch`, whose
state keys and webhook payload it shares), it remembers each alert's state in
``appliance_state`` and, when one starts or stops holding, logs it and POSTs it as
JSON to ``[alerts] webhook_url``; a POST that fails is tried again next time.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import apsw

from appliance.ops.alerts import ops_alerts
from appliance.reports.alerts import Alert, AlertWatch, store_state, stored_states
from appliance.service import Appliance

log = logging.getLogger("appliance.alerts")
LOOP = "ops-alerts"


class OpsAlertWatch:
    def __init__(self, appliance: Appliance) -> None:
        self.appliance = appliance
        self.current: list[Alert] = []
        self._webhook = AlertWatch(appliance)

    @property
    def sent(self) -> int:
        return self._webhook.sent

    async def step(self) -> float | None:
        store = self.appliance.store
        settings = self.appliance.settings
        now = self.appliance.now_ms()
        alerts = await store.readers.run(lambda c: ops_alerts(c, settings, now))
        self.current = alerts
        before = await store.readers.run(stored_states)
        for alert in alerts:
            if before.get(alert.name, False) == alert.firing:
                continue
            if alert.firing:
                log.warning("alert %s: %s", alert.name, alert.message)
            else:
                log.info("alert %s cleared: %s", alert.name, alert.message)
            if await self._webhook.notify(alert, now):
                await store.writer.run(_storing(alert, now))
        return settings.alerts.check_interval_s


def _storing(alert: Alert, now_ms: int) -> Callable[[apsw.Connection], None]:
    return lambda conn: store_state(conn, alert, now_ms)
