"""The reconciler (DLR-4): retries matching waiting reports, with growing delays.

Each step asks a reader when the earliest waiting row is due; when rows are due it
hands the writer one unit that tries each of them once (at most ``batch`` whose
message is still not there, moved on in one statement, and ``batch`` others:
:func:`appliance.reports.apply.reconcile_due`): matched rows leave the waiting set
(applied, or kept as history), the others move on along
:data:`appliance.reports.inbox.BACKOFF_S` (1 s, 5 s, 15 s, 1 min, 5 min, 30 min,
2 h, 6 h, then every 6 h until retention removes them).
"""

from __future__ import annotations

from appliance.reports.apply import reconcile_due
from appliance.reports.inbox import next_due_at
from appliance.runtime import Runtime

LOOP = "reconciler"
# Longest sleep between looks: the clock may be moved (tests) and rows may be added.
POLL_S = 1.0


class Reconciler:
    def __init__(self, appliance: Runtime, batch: int = 500) -> None:
        self.appliance = appliance
        self.batch = batch
        self.totals: dict[str, int] = {}

    async def step(self) -> float | None:
        store = self.appliance.store
        now = self.appliance.now_ms()
        due_at = await store.readers.run(next_due_at)
        if due_at is None:
            return POLL_S
        if due_at > now:
            return min(POLL_S, (due_at - now) / 1000)
        counts = await store.writer.run(lambda c: reconcile_due(c, now, self.batch))
        for verdict, n in counts.items():
            self.totals[verdict] = self.totals.get(verdict, 0) + n
        return 0 if sum(counts.values()) >= self.batch else POLL_S
