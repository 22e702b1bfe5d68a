"""Our message reference (DLR-1): made here, before anything leaves the process.

A ref is 26 characters of Crockford base32 (``0-9A-Z`` without ``I L O U``): 48 bits
of milliseconds since the epoch followed by 80 random bits, like a ULID. Refs sort by
creation time, are URL-safe and case-insensitive to read. Within one process they
are strictly increasing: a second ref in the same millisecond (or after the clock
stepped back) is the previous one plus one.
"""

from __future__ import annotations

import re
import secrets
import threading
import time

ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
REF_LENGTH = 26
_RANDOM_BITS = 80
_RANDOM_MAX = (1 << _RANDOM_BITS) - 1
_TIME_MAX = (1 << 48) - 1
REF_PATTERN = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")


def encode(value: int) -> str:
    """``value`` (up to 130 bits) as 26 Crockford base32 characters."""
    out = []
    for _ in range(REF_LENGTH):
        out.append(ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def looks_like_ref(text: str) -> bool:
    """True when ``text`` has the shape of one of our refs."""
    return len(text) == REF_LENGTH and REF_PATTERN.fullmatch(text) is not None


def ref_time_ms(ref: str) -> int:
    """The creation time (epoch ms) a ref carries."""
    value = 0
    for ch in ref[:10]:
        value = value * 32 + ALPHABET.index(ch)
    return value


class RefMaker:
    """Makes strictly increasing refs; safe to share between threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def new_ref(self, now_ms: int | None = None) -> str:
        ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        ms = min(max(ms, 0), _TIME_MAX)
        with self._lock:
            if ms <= self._last_ms:
                ms = self._last_ms
                rand = self._last_random + 1
                if rand > _RANDOM_MAX:  # 2^80 refs in one millisecond: borrow the next
                    ms, rand = ms + 1, secrets.randbits(_RANDOM_BITS - 1)
            else:
                # One bit of headroom so increments within a millisecond never overflow.
                rand = secrets.randbits(_RANDOM_BITS - 1)
            self._last_ms, self._last_random = ms, rand
        return encode((ms << _RANDOM_BITS) | rand)

    def new_refs(self, count: int, now_ms: int | None = None) -> list[str]:
        return [self.new_ref(now_ms) for _ in range(count)]


_MAKER = RefMaker()


def new_ref(now_ms: int | None = None) -> str:
    """A fresh ref from the process-wide maker."""
    return _MAKER.new_ref(now_ms)
