"""The same text twice in a day (IYS-4): with ``[compliance] country = "TR"`` a message
to a number that already has a live one of the same text, through the same sender
header, on the same day in Europe/Istanbul, for the same account, is not sent. Operators
in Turkey block such a repeat and charge for it (Verimor ``DOUBLE_SEND_ERROR``, Netgsm's
duplicate code).

Each guarded message carries :func:`dup_key`: the day it is due, the account and the
number as they are, then a hash of the sender header and the text after
personalisation. The number's index of ``messages`` is unique and ends with the key,
``messages_msisdn (account_id, msisdn, dup_key)``, so it holds one message per key and
two writers at once cannot both make one; a message that ends ``REJECTED``, ``FAILED``
or ``CANCELLED`` has its key cleared by a trigger in the statement that ends it
(:mod:`appliance.store.dup_key_triggers`), and one created so is created without one:
NULLs are distinct in a unique index, so it blocks nothing. A single send answers ``409
duplicate_today``; a campaign creates the repeat ``CANCELLED`` with error
``duplicate_today``, counted.

The key costs a guarded message no index entry of its own: every message has its entry
in ``messages_msisdn`` anyway, and the key only lengthens it. Until schema version 24 a
second unique index, over the live keys only, held them: a conflict check and an insert
in one more B-tree for every guarded message, the largest part of what the guard added
to a campaign's expansion in Turkey (``bench/bench_consent_expansion.py``). Before
that, a key that was a hash of everything scattered each chunk's 2,000 keys over that
whole index, and each chunk's commit rewrote that many of its pages. The key still
leads with the day, so within one number's entries a day's keys lie together (the dry
run looks for a number's keys of a day by that range). :class:`DayKeys` works out the
day once and hashes each distinct text once, for a chunk whose messages share the day
and the sender.
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
_IN_CHUNK = 500


class DuplicateToday(Exception):
    """A live message with the same key exists: nothing was queued."""


def day_of(at_ms: int) -> str:
    """The day in Europe/Istanbul of an instant, as ``YYYY-MM-DD``."""
    return datetime.fromtimestamp(at_ms / 1000, tz=TURKEY).strftime("%Y-%m-%d")


class DayKeys:
    """The keys of one account's messages through one sender header due on one day."""

    def __init__(self, account_id: int, sender: str, due_ms: int) -> None:
        self.day = f"{day_of(due_ms).replace('-', '')}/"
        self.prefix = f"{self.day}{account_id}/"
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


def live_keys(conn: Connection, account_id: int,
              keyed: Iterable[tuple[str, str]]) -> set[str]:
    """Those of the keys of ``keyed`` (number, key) a message of the account holds: one
    probe of ``messages_msisdn`` per pair. A key in the index is a live message's (an
    ended one's is cleared), so these are exactly the keys a new message would collide
    with."""
    wanted = list(dict.fromkeys(keyed))
    found: set[str] = set()
    for start in range(0, len(wanted), _IN_CHUNK):
        chunk = wanted[start:start + _IN_CHUNK]
        rows: list[Any] = conn.execute(
            "SELECT dup_key FROM messages WHERE account_id = ? AND (msisdn, dup_key) IN"
            f" (VALUES {','.join(['(?, ?)'] * len(chunk))})",
            (account_id, *(v for pair in chunk for v in pair))).fetchall()
        found.update(str(r[0]) for r in rows)
    return found
