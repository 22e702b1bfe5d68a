"""What stands between the sign-in form and password guessing (EDGE-6).

* **Exponential delay.** Failed sign-ins are counted per user name and per client
  address. Past :data:`FREE_FAILURES_PER_USER` failures for a name (or
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
  (HMAC) and the same value in a cookie; a token is good for one attempt within
  :data:`TOKEN_TTL_S`, so guesses cannot reuse one form.

The counts (table ``sign_in_failures``), the used tokens (``sign_in_tokens_used``) and
the tokens' key (``appliance_state``, :data:`FORM_KEY_STATE`) are in the database
(their units are :mod:`appliance.sign_in_attempts`, below the web layer), so
with several processes on one PostgreSQL database (behind a load balancer) a form one
process gave is good at another, once, and a guess counts at all of them. Only the
hashing bound is each process's own: it guards that process's memory and CPU. Rows
past their time are deleted by the units that write the tables, so they stay small: a
failure is only counted after its password was checked, which the hashing bound
paces.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import math
import secrets
from collections.abc import AsyncIterator

from appliance.runtime import Runtime
from appliance.sign_in_attempts import (
    FREE_FAILURES_PER_ADDRESS,
    FREE_FAILURES_PER_USER,
    TOKEN_TTL_S,
    address_key,
    blocked_s,
    form_key,
    record_failure,
    stored_form_key,
    use_token,
    user_key,
)

MAX_HASHING = 2
MAX_WAITING = 16

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

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, nonce: str, stamp: str) -> str:
        return hmac.new(self._key, f"{nonce}.{stamp}".encode(), hashlib.sha256).hexdigest()[:32]

    def issue(self, now_ms: int) -> str:
        nonce, stamp = secrets.token_urlsafe(16), str(now_ms)
        return f"{nonce}.{stamp}.{self._mac(nonce, stamp)}"

    def check(self, cookie: str, presented: str, now_ms: int) -> tuple[str, int] | None:
        """``(nonce, issued at)`` of the form's token when it is one we issued, fresh
        and the cookie's; whether it is still unused is :func:`use_token`'s to say."""
        if not presented or len(presented) > 100 or not hmac.compare_digest(
                cookie.encode(), presented.encode()):
            return None
        parts = presented.split(".")
        if len(parts) != 3 or not parts[1].isascii() or not parts[1].isdigit():
            return None
        nonce, stamp, mac = parts
        if not hmac.compare_digest(mac.encode(), self._mac(nonce, stamp).encode()):
            return None
        if not 0 <= now_ms - int(stamp) <= TOKEN_TTL_S * 1000:
            return None
        return nonce, int(stamp)


class SignInGuard:
    """The guard as one process sees it: its own hashing bound, the shared rest.

    Made with the other parts at the start; the tokens' key is read at the first
    sign-in form (or made, once per database: two processes making it at once both get
    the one stored first), so a start writes nothing for a console nobody opens."""

    def __init__(self, appliance: Runtime) -> None:
        self.appliance = appliance
        self.hashing = HashingGate()
        self._tokens: SignInTokens | None = None

    async def tokens(self) -> SignInTokens:
        """The form tokens, under the database's key."""
        if self._tokens is None:
            key = await self.appliance.store.readers.run(stored_form_key)
            if key is None:  # the first sign-in form on this database
                now = self.appliance.now_ms()
                key = await self.appliance.store.writer.run(lambda c: form_key(c, now))
            if self._tokens is None:
                self._tokens = SignInTokens(key)
        return self._tokens

    async def redeem(self, cookie: str, presented: str) -> bool:
        """Whether the form's token is one we issued, fresh, unused, and the cookie's."""
        now = self.appliance.now_ms()
        found = (await self.tokens()).check(cookie, presented, now)
        if found is None:
            return False
        nonce, issued = found
        return await self.appliance.store.writer.run(
            lambda c: use_token(c, nonce, issued, now))

    async def retry_after_s(self, name: str, address: str) -> int:
        """Whole seconds until this name and address may try again (0: now)."""
        now = self.appliance.now_ms()
        keys = [user_key(name), address_key(address)]
        wait = await self.appliance.store.readers.run(lambda c: blocked_s(c, keys, now))
        return math.ceil(wait)

    async def failed(self, name: str, address: str) -> None:
        now = self.appliance.now_ms()
        keys = [(user_key(name), FREE_FAILURES_PER_USER),
                (address_key(address), FREE_FAILURES_PER_ADDRESS)]
        await self.appliance.store.writer.run(lambda c: record_failure(c, keys, now))

