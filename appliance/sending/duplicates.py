"""The same text twice in a day (IYS-4): with ``[compliance] country = "TR"`` a message
to a number that already has a live one of the same text, through the same sender
header, on the same day in Europe/Istanbul, for the same account, is not sent. Operators
in Turkey block such a repeat and charge for it (Verimor ``DOUBLE_SEND_ERROR``, Netgsm's
duplicate code).

Each guarded message carries :func:`dup_key`, a hash of the account, the number, the
sender header, the day it is due and the text after personalisation; the partial unique
index ``messages_duplicate_today`` holds one live message per key (one that ended
``REJECTED``, ``FAILED`` or ``CANCELLED`` leaves the index, so it blocks nothing), so two
writers at once cannot both make one. A single send answers ``409 duplicate_today``; a
campaign creates the repeat ``CANCELLED`` with error ``duplicate_today``, counted.
"""

from __future__ import annotations

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


def dup_key(account_id: int, msisdn: str, sender: str, due_ms: int, text: str) -> str:
    raw = "\x1f".join((str(account_id), msisdn, sender, day_of(due_ms), text))
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()[:32]


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
