"""What the sender did since start: counts for metrics, and recent rates for progress."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from appliance.sending.outcomes import Recorded

RATE_WINDOW_S = 10.0


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
    record_failures: int = 0
    _recent: deque[tuple[float, int]] = field(default_factory=deque)
    _by_campaign: dict[int, deque[tuple[float, int]]] = field(default_factory=dict)

    def add(self, rec: Recorded) -> None:
        self.submitted += rec.submitted
        self.retry += rec.retry
        self.rejected += rec.rejected
        self.uncertain += rec.uncertain
        self.early_reports_applied += rec.applied_reports
        self.batches += 1
        now = time.monotonic()
        self._recent.append((now, rec.submitted))
        self._trim(self._recent, now)

    def went_out(self, campaign_id: int, count: int) -> None:
        """``count`` messages of a campaign got an answer from the provider."""
        now = time.monotonic()
        recent = self._by_campaign.setdefault(campaign_id, deque())
        recent.append((now, count))
        self._trim(recent, now)

    @staticmethod
    def _trim(recent: deque[tuple[float, int]], now: float) -> None:
        while recent and now - recent[0][0] > RATE_WINDOW_S:
            recent.popleft()

    @staticmethod
    def _rate(recent: deque[tuple[float, int]] | None) -> float:
        if not recent:
            return 0.0
        now = time.monotonic()
        span = max(1.0, now - recent[0][0]) if now - recent[-1][0] <= RATE_WINDOW_S else 0.0
        return sum(n for _, n in recent) / span if span else 0.0

    @property
    def submitted_per_s(self) -> float:
        """Submissions recorded per second over the last ten seconds."""
        return self._rate(self._recent)

    def campaign_per_s(self, campaign_id: int) -> float:
        """Messages of the campaign sent per second over the last ten seconds."""
        return self._rate(self._by_campaign.get(campaign_id))

    def as_dict(self) -> dict[str, float]:
        return {
            "claimed": self.claimed, "attempts": self.attempts, "submitted": self.submitted,
            "retry": self.retry, "rejected": self.rejected, "uncertain": self.uncertain,
            "early_reports_applied": self.early_reports_applied, "recovered": self.recovered,
            "released": self.released, "batches": self.batches,
            "record_failures": self.record_failures,
            "submitted_per_s": round(self.submitted_per_s, 1),
        }
