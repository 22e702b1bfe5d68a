"""A token bucket per provider: submissions never go out faster than ``rate_per_s``.

Reservation style: each caller takes a token at once (the balance may go negative)
and sleeps until its token would have been there. Callers are served in arrival
order and the long-run rate is exact; the burst allowance (``burst`` tokens, at
least one) is what may go out back to back after a quiet spell. An API key's rate
(:mod:`appliance.key_quotas`) uses the same bucket the other way: :meth:`try_take`
refuses rather than waits.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, rate_per_s: float, burst: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate_per_s <= 0:
            raise ValueError("rate_per_s must be positive")
        self.rate = float(rate_per_s)
        self.burst = max(1.0, burst if burst is not None else self.rate / 10)
        self._clock = clock
        self._tokens = self.burst
        self._at = clock()

    def reserve(self, count: float = 1.0) -> float:
        """Take ``count`` tokens (a batch of messages takes one each); return how many
        seconds to wait before using them."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        self._tokens -= count
        return 0.0 if self._tokens >= 0 else -self._tokens / self.rate

    def try_take(self) -> float:
        """Take one token when there is one whole (``0.0``); else take none and return
        how many seconds until there is one (a refusal's ``Retry-After``)."""
        now = self._clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return 0.0
        return (1.0 - self._tokens) / self.rate

    async def acquire(self, count: float = 1.0) -> None:
        wait = self.reserve(count)
        if wait > 0:
            await asyncio.sleep(wait)
