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
the tokens' key (``appliance_state``, :data:`FORM_KEY_STATE`) are in the database, so
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
from typing import Any, Final

from appliance.runtime import Runtime
from appliance.store.connection import Connection

FREE_FAILURES_PER_USER = 3
FREE_FAILURES_PER_ADDRESS = 10
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 900.0
FORGET_AFTER_S = 3600.0
MAX_HASHING = 2
MAX_WAITING = 16
TOKEN_TTL_S = 3600
FORM_KEY_STATE: Final = "console.sign_in_form_key"
_FORGET_MS: Final = int(FORGET_AFTER_S * 1000)


def user_key(name: str) -> str:
    return f"user:{name}"


def address_key(address: str) -> str:
    return f"addr:{address}"


def delay_s(failures: int, free_failures: int) -> float:
    """How long a key waits after its ``failures``-th failure in a row (0: not at all)."""
    beyond = failures - free_failures
    if beyond <= 0:
        return 0.0
    return float(min(FIRST_DELAY_S * 2.0 ** min(beyond - 1, 30), MAX_DELAY_S))


def record_failure(conn: Connection, keys: list[tuple[str, int]], now_ms: int) -> None:
    """A write unit: one more failure for each ``(key, free failures)``; a count older
    than :data:`FORGET_AFTER_S` starts again. One statement per key counts it, so
    processes failing the same name at once each add theirs."""
    for key, free in keys:
        row: Any = conn.execute(
            "INSERT INTO sign_in_failures (key, failures, blocked_until, last_at)"
            " VALUES (?, 1, 0, ?) ON CONFLICT (key) DO UPDATE SET"
            " failures = CASE WHEN excluded.last_at - sign_in_failures.last_at > ? THEN 1"
            " ELSE sign_in_failures.failures + 1 END,"
            " blocked_until = CASE WHEN excluded.last_at - sign_in_failures.last_at > ?"
            " THEN 0 ELSE sign_in_failures.blocked_until END,"
            " last_at = excluded.last_at"
            " RETURNING failures", (key, now_ms, _FORGET_MS, _FORGET_MS)).fetchone()
        wait = delay_s(int(row[0]), free)
        if wait:
            conn.execute("UPDATE sign_in_failures SET blocked_until = ? WHERE key = ?",
                         (now_ms + int(wait * 1000), key))
    conn.execute("DELETE FROM sign_in_failures WHERE last_at < ?", (now_ms - _FORGET_MS,))


def clear_failures(conn: Connection, key: str) -> None:
    """Part of a write unit: the key's count is forgotten (a correct password)."""
    conn.execute("DELETE FROM sign_in_failures WHERE key = ?", (key,))


def blocked_s(conn: Connection, keys: list[str], now_ms: int) -> float:
    """How long, in seconds, until none of ``keys`` is blocked (0: none is now)."""
    marks = ", ".join("?" for _ in keys)
    rows: list[Any] = conn.execute(
        f"SELECT blocked_until FROM sign_in_failures WHERE key IN ({marks})"
        " AND last_at >= ?", (*keys, now_ms - _FORGET_MS)).fetchall()
    return max([0.0] + [(int(r[0]) - now_ms) / 1000 for r in rows])


def use_token(conn: Connection, nonce: str, issued_ms: int, now_ms: int) -> bool:
    """A write unit: whether this is the token's first use (it is then used up)."""
    conn.execute("DELETE FROM sign_in_tokens_used WHERE issued_at < ?",
                 (now_ms - TOKEN_TTL_S * 1000,))
    row = conn.execute(
        "INSERT INTO sign_in_tokens_used (nonce, issued_at) VALUES (?, ?)"
        " ON CONFLICT (nonce) DO NOTHING RETURNING nonce", (nonce, issued_ms)).fetchone()
    return row is not None


def stored_form_key(conn: Connection) -> bytes | None:
    """The tokens' key, when a process has made it."""
    row: Any = conn.execute("SELECT value FROM appliance_state WHERE key = ?",
                            (FORM_KEY_STATE,)).fetchone()
    return bytes.fromhex(str(row[0])) if row is not None else None


def form_key(conn: Connection, now_ms: int) -> bytes:
    """A write unit: the tokens' key, made by the first process that needs it."""
    conn.execute("INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
                 " ON CONFLICT (key) DO NOTHING",
                 (FORM_KEY_STATE, secrets.token_hex(32), now_ms))
    key = stored_form_key(conn)
    assert key is not None
    return key


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

