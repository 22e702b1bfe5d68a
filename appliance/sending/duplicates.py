"""The same text twice in a day (IYS-4): with ``[compliance] country = "TR"`` a message
to a number that already has a live one of the same text, through the same sender
header, on the same day in Europe/Istanbul, for the same account, is not sent. Operators
in Turkey block such a repeat and charge for it (Verimor ``DOUBLE_SEND_ERROR``, Netgsm's
duplicate code).

Each guarded message carries :func:`dup_key`: the day it is due, the account and the
number as they are, then a hash of the sender header and the text after
personalisation; the partial unique index ``messages_duplicate_today`` holds one live
message per key (one that ended ``REJECTED``, ``FAILED`` or ``CANCELLED`` leaves the
index, so it blocks nothing), so two writers at once cannot both make one. A single send
answers ``409 duplicate_today``; a campaign creates the repeat ``CANCELLED`` with error
``duplicate_today``, counted.

The key leads with the day, then the account, so a campaign's keys go into one narrow
stretch of the index (today's, its account's) rather than all over it: a key that was
a hash of everything scattered each chunk's 2,000 keys over the whole index, which grows
with every message ever keyed, and each chunk's commit rewrote that many index pages;
that made a campaign's expansion in Turkey four times as long as without (see
``bench/bench_consent_expansion.py``). :class:`DayKeys` works out the day once and hashes
each distinct text once, for a chunk whose messages share the day and the sender.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Final
from zoneinfo import ZoneInfo

from appliance.store.connection import Connection

DUPLICATE_TODAY: Final = "duplicate_today"
TURKEY: Final = ZoneInfo("Europe/Istanbul")
LIVE_SQL: Final = "state NOT IN ('REJECTED', 'FAILED', 'CANCELLED')"
_IN_CHUNK = 500


class DuplicateToday(Exception):
    """A live message with the same key exists: nothing was queued."""


def day_of(at_ms: int) -> str:
    """The day in Europe/Istanbul of an instant, as ``YYYY-MM-DD``."""
    return datetime.fromtimestamp(at_ms / 1000, tz=TURKEY).strftime("%Y-%m-%d")


class DayKeys:
    """The keys of one account's messages through one sender header due on one day."""

    def __init__(self, account_id: int, sender: str, due_ms: int) -> None:
        self.prefix = f"{day_of(due_ms).replace('-', '')}/{account_id}/"
        self._sender = sender
        self._digests: dict[str, str] = {}

    def of(self, msisdn: str, text: str) -> str:
        """The key of the text to the number: ``YYYYMMDD/account/msisdn/digest``, the
        digest the first 96 bits of the SHA-256 of the sender header and the text, in 16
        characters of URL-safe base64. Short, as every guarded message carries its key
        and the index holds it again: a list in no particular order puts each chunk's
        keys all over today's stretch of the index, and each byte of a key is rewritten
        with its index page at every commit. 96 bits are plenty where the day, the
        account and the number are exact: two different texts to one number on one day
        share a digest with a chance of 2^-96."""
        digest = self._digests.get(text)
        if digest is None:
            raw = f"{self._sender}\x1f{text}".encode("utf-8", "surrogatepass")
            digest = self._digests[text] = base64.urlsafe_b64encode(
                hashlib.sha256(raw).digest()[:12]).decode("ascii")
        return f"{self.prefix}{msisdn}/{digest}"


def dup_key(account_id: int, msisdn: str, sender: str, due_ms: int, text: str) -> str:
    """The key of one message (:class:`DayKeys` for many with the same day and sender)."""
    return DayKeys(account_id, sender, due_ms).of(msisdn, text)


def live_keys(conn: Connection, keys: Iterable[str]) -> set[str]:
    """Those of ``keys`` a live message holds (index lookups)."""
    wanted = list(dict.fromkeys(keys))
    found: set[str] = set()
    for start in range(0, len(wanted), _IN_CHUNK):
        chunk = wanted[start:start + _IN_CHUNK]
        rows: list[Any] = conn.execute(
            f"SELECT dup_key FROM messages WHERE dup_key IN ({','.join('?' * len(chunk))})"
            f" AND dup_key IS NOT NULL AND {LIVE_SQL}", tuple(chunk)).fetchall()
        found.update(str(r[0]) for r in rows)
    return found
