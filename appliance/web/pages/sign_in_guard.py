"""What stands between the sign-in form and password guessing (EDGE-6).

* **Exponential delay.** Failed sign-ins are counted per user name and per client
  address (in memory). Past :data:`FREE_FAILURES_PER_USER` failures for a name (or
  :data:`FREE_FAILURES_PER_ADDRESS` from an address), each further failure blocks
  that name (address) for twice as long as the one before: 1 s, 2 s, 4 s ... up to
  :data:`MAX_DELAY_S`. While blocked, an attempt is answered ``429`` with
  ``Retry-After`` and its password is not even checked. A correct password clears the
  name's count (not the address's); a count is forgotten after
  :data:`FORGET_AFTER_S` without failures. Behind a proxy on the same host the
  address is the one in ``X-Forwarded-For`` (uvicorn trusts it from 127.0.0.1 only).
* **Bounded hashing.** scrypt takes ~16 MB and tens of milliseconds per check; at most
  :data:`MAX_HASHING` run at once and :data:`MAX_WAITING` more may wait; past that an
  attempt is ``429`` with ``Retry-After: 1``, so a flood of sign-ins cannot take the
  memory or the CPU from everything else.
* **A fresh token per form.** Each sign-in form carries a new token the server signed
  (HMAC with a key made at start) and the same value in a cookie; a token is good for
  one attempt within :data:`TOKEN_TTL_S`, so guesses cannot reuse one form.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import math
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass

from appliance.service import Appliance

FREE_FAILURES_PER_USER = 3
FREE_FAILURES_PER_ADDRESS = 10
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 900.0
FORGET_AFTER_S = 3600.0
MAX_TRACKED = 50_000
MAX_HASHING = 2
MAX_WAITING = 16
TOKEN_TTL_S = 3600
MAX_REDEEMED = 100_000


@dataclass
class _Failures:
    count: int = 0
    blocked_until_ms: int = 0
    last_ms: int = 0


class FailureDelay:
    """Failed attempts per key, and how long the key must wait before the next."""

    def __init__(self, free_failures: int) -> None:
        self.free_failures = free_failures
        self._keys: OrderedDict[str, _Failures] = OrderedDict()

    def wait_s(self, key: str, now_ms: int) -> float:
        found = self._keys.get(key)
        if found is None:
            return 0.0
        if now_ms - found.last_ms > FORGET_AFTER_S * 1000:
            del self._keys[key]
            return 0.0
        return max(0.0, (found.blocked_until_ms - now_ms) / 1000)

    def failed(self, key: str, now_ms: int) -> None:
        found = self._keys.pop(key, None) or _Failures()
        if now_ms - found.last_ms > FORGET_AFTER_S * 1000:
            found = _Failures()
        found.count += 1
        found.last_ms = now_ms
        beyond = found.count - self.free_failures
        if beyond > 0:
            delay_s = min(FIRST_DELAY_S * 2 ** min(beyond - 1, 30), MAX_DELAY_S)
            found.blocked_until_ms = now_ms + int(delay_s * 1000)
        self._keys[key] = found
        while len(self._keys) > MAX_TRACKED:
            self._keys.popitem(last=False)

    def succeeded(self, key: str) -> None:
        self._keys.pop(key, None)


class HashingGate:
    """At most ``slots`` password checks at once, and a bounded queue behind them."""

    def __init__(self, slots: int = MAX_HASHING, queue: int = MAX_WAITING) -> None:
        self._slots = asyncio.Semaphore(slots)
        self.limit = slots + queue
        self.admitted = 0  # checking or waiting to

    @contextlib.asynccontextmanager
    async def turn(self) -> AsyncIterator[bool]:
        """Wait for a slot and yield True, or yield False at once when the queue is full.

        Admission is decided before the first ``await``, so it cannot race.
        """
        if self.admitted >= self.limit:
            yield False
            return
        self.admitted += 1
        try:
            async with self._slots:
                yield True
        finally:
            self.admitted -= 1


class SignInTokens:
    """Server-signed, single-use tokens for the sign-in form (double-submitted)."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._redeemed: OrderedDict[str, int] = OrderedDict()

    def _mac(self, nonce: str, stamp: str) -> str:
        return hmac.new(self._key, f"{nonce}.{stamp}".encode(), hashlib.sha256).hexdigest()[:32]

    def issue(self, now_ms: int) -> str:
        nonce, stamp = secrets.token_urlsafe(16), str(now_ms)
        return f"{nonce}.{stamp}.{self._mac(nonce, stamp)}"

    def redeem(self, cookie: str, presented: str, now_ms: int) -> bool:
        """Whether the form's token is one we issued, fresh, unused, and the cookie's."""
        if not presented or len(presented) > 100 or not hmac.compare_digest(
                cookie.encode(), presented.encode()):
            return False
        parts = presented.split(".")
        if len(parts) != 3 or not parts[1].isascii() or not parts[1].isdigit():
            return False
        nonce, stamp, mac = parts
        if not hmac.compare_digest(mac.encode(), self._mac(nonce, stamp).encode()):
            return False
        if not 0 <= now_ms - int(stamp) <= TOKEN_TTL_S * 1000 or nonce in self._redeemed:
            return False
        self._redeemed[nonce] = int(stamp)
        while self._redeemed:
            oldest_nonce, issued = next(iter(self._redeemed.items()))
            if len(self._redeemed) <= MAX_REDEEMED and now_ms - issued <= TOKEN_TTL_S * 1000:
                break
            del self._redeemed[oldest_nonce]
        return True


class SignInGuard:
    def __init__(self) -> None:
        self.users = FailureDelay(FREE_FAILURES_PER_USER)
        self.addresses = FailureDelay(FREE_FAILURES_PER_ADDRESS)
        self.hashing = HashingGate()
        self.tokens = SignInTokens()

    def retry_after_s(self, user_key: str, address: str, now_ms: int) -> int:
        """Whole seconds until this name and address may try again (0: now)."""
        wait = max(self.users.wait_s(user_key, now_ms), self.addresses.wait_s(address, now_ms))
        return math.ceil(wait)

    def failed(self, user_key: str, address: str, now_ms: int) -> None:
        self.users.failed(user_key, now_ms)
        self.addresses.failed(address, now_ms)

    def succeeded(self, user_key: str) -> None:
        self.users.succeeded(user_key)


def sign_in_guard(appliance: Appliance) -> SignInGuard:
    if appliance.sign_in_guard is None:
        appliance.sign_in_guard = SignInGuard()
    return appliance.sign_in_guard
