"""What the sender did since start: counts for metrics, and recent rates for progress.

A rate is what went out over the last minute (a campaign's ETA is its unsent messages
at that rate). Each record is counted at the moment it was written, for work done
before it, so the rate counts what was recorded *after* the window's first record over
the time since that record (fence posts): right after the first records the time is
short, and stretching it to a whole second, as before, made the early ETA ten times
too long.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from appliance.sending.outcomes import Recorded

RATE_WINDOW_S = 60.0


@dataclass
class SendCounters:
    """What the sender did since start, for metrics and campaign progress."""

    claimed: int = 0
    attempts: int = 0
    submitted: int = 0
    retry: int = 0
    rejected: int = 0
    uncertain: int = 0
    early_reports_applied: int = 0
    recovered: int = 0
    released: int = 0
    batches: int = 0
    batch_requests: int = 0  # submissions of many messages in one request
    record_failures: int = 0
    _recent: deque[tuple[float, int]] = field(default_factory=deque)
    _by_campaign: dict[int, deque[tuple[float, int]]] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic  # seconds; tests pass their own

    def add(self, rec: Recorded) -> None:
        self.submitted += rec.submitted
        self.retry += rec.retry
        self.rejected += rec.rejected
        self.uncertain += rec.uncertain
        self.early_reports_applied += rec.applied_reports
        self.batches += 1
        now = self.clock()
        self._recent.append((now, rec.submitted))
        self._trim(self._recent, now)

    def went_out(self, campaign_id: int, count: int) -> None:
        """``count`` messages of a campaign got an answer from the provider."""
        now = self.clock()
        recent = self._by_campaign.setdefault(campaign_id, deque())
        recent.append((now, count))
        self._trim(recent, now)

    @staticmethod
    def _trim(recent: deque[tuple[float, int]], now: float) -> None:
        while recent and now - recent[0][0] > RATE_WINDOW_S:
            recent.popleft()

    def _rate(self, recent: deque[tuple[float, int]] | None) -> float:
        if not recent or len(recent) < 2:
            return 0.0
        now = self.clock()
        if now - recent[-1][0] > RATE_WINDOW_S:
            return 0.0
        span = now - recent[0][0]
        after_first = sum(n for _, n in recent) - recent[0][1]
        return after_first / span if span > 0 else 0.0

    @property
    def submitted_per_s(self) -> float:
        """Submissions recorded per second over the last minute."""
        return self._rate(self._recent)

    def campaign_per_s(self, campaign_id: int) -> float:
        """Messages of the campaign sent per second over the last minute."""
        return self._rate(self._by_campaign.get(campaign_id))

    def as_dict(self) -> dict[str, float]:
        return {
            "claimed": self.claimed, "attempts": self.attempts, "submitted": self.submitted,
            "retry": self.retry, "rejected": self.rejected, "uncertain": self.uncertain,
            "early_reports_applied": self.early_reports_applied, "recovered": self.recovered,
            "released": self.released, "batches": self.batches,
            "batch_requests": self.batch_requests,
            "record_failures": self.record_failures,
            "submitted_per_s": round(self.submitted_per_s, 1),
        }
