"""The suppression list in the store: per account, one row per number (OPS-4).

Every function is a read unit or a part of a write unit. A number is E.164 as the
import normaliser makes it, so ``0532 123 45 67`` and ``+90 532 123 4567`` are one entry.
Adding is idempotent (the existing entry is kept as it was, reason and all); removing
gives back the entry removed.

How every send honours the list:

* ``POST /api/messages`` and the console's send: :func:`refuse_if_suppressed` in the
  same write unit as the insert (the insert is rolled back, nothing is queued);
* campaign expansion creates a suppressed contact's message ``CANCELLED`` with error
  :data:`SUPPRESSED` (``appliance.sending.campaign_messages.expand_chunk``);
* the sender's claim moves a claimed message whose number has been suppressed since it
  was queued to ``CANCELLED`` instead of ``SENDING``
  (``appliance.sending.claims.claim_due``), so it is never submitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from appliance.store.connection import Connection
from appliance.store.rows import as_int

SOURCES: Final = ("api", "console", "import", "inbound")
SUPPRESSED: Final = "suppressed"  # the error of a message cancelled because of the list
MAX_REASON_CHARS: Final = 500

# The claim's test, for one message row aliased ``messages`` (an index lookup each).
IS_SUPPRESSED_SQL: Final = (
    "EXISTS (SELECT 1 FROM suppressions s"
    " WHERE s.account_id = messages.account_id AND s.msisdn = messages.msisdn)"
)


class Suppressed(Exception):
    """The number is on the account's suppression list: nothing was queued."""

    def __init__(self, entry: Suppression) -> None:
        super().__init__(f"{entry.msisdn} is on the suppression list")
        self.entry = entry


@dataclass(frozen=True)
class Suppression:
    id: int
    account_id: int
    msisdn: str
    reason: str
    source: str
    inbound_id: int | None
    created_at: int


COLUMNS: Final = "id, account_id, msisdn, reason, source, inbound_id, created_at"


def _entry(row: Any) -> Suppression:
    return Suppression(int(row[0]), int(row[1]), str(row[2]), str(row[3]), str(row[4]),
                       None if row[5] is None else int(row[5]), int(row[6]))


def get(conn: Connection, account_id: int, msisdn: str) -> Suppression | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM suppressions WHERE account_id = ? AND msisdn = ?",
                       (account_id, msisdn)).fetchone()
    return None if row is None else _entry(row)


def add(conn: Connection, account_id: int, msisdn: str, reason: str, source: str,
        now_ms: int, inbound_id: int | None = None) -> tuple[Suppression, bool]:
    """Suppress ``msisdn`` for the account (a write unit); ``(entry, created)``.

    A number already on the list keeps its entry as it was: ``created`` is False.
    """
    if source not in SOURCES:
        raise ValueError(f"unknown suppression source {source!r}")
    row = conn.execute(
        "INSERT INTO suppressions (account_id, msisdn, reason, source, inbound_id, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (account_id, msisdn) DO NOTHING"
        f" RETURNING {COLUMNS}",
        (account_id, msisdn, reason[:MAX_REASON_CHARS], source, inbound_id, now_ms),
    ).fetchone()
    if row is not None:
        return _entry(row), True
    found = get(conn, account_id, msisdn)
    assert found is not None
    return found, False


def add_many(conn: Connection, account_id: int, entries: Iterable[tuple[str, str]],
             source: str, now_ms: int) -> int:
    """Suppress each ``(msisdn, reason)`` (a write unit); how many were new."""
    added = 0
    for msisdn, reason in entries:
        conn.execute(
            "INSERT INTO suppressions (account_id, msisdn, reason, source, created_at)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (account_id, msisdn) DO NOTHING",
            (account_id, msisdn, reason[:MAX_REASON_CHARS], source, now_ms),
        )
        added += conn.changes()
    return added


def remove(conn: Connection, account_id: int, msisdn: str) -> Suppression | None:
    """Take ``msisdn`` off the account's list (a write unit); the entry, or None."""
    row = conn.execute(
        f"DELETE FROM suppressions WHERE account_id = ? AND msisdn = ? RETURNING {COLUMNS}",
        (account_id, msisdn)).fetchone()
    return None if row is None else _entry(row)


def refuse_if_suppressed(conn: Connection, account_id: int, msisdn: str) -> None:
    """Raise :class:`Suppressed` when ``msisdn`` is on the account's list.

    Called inside the write unit that queues a message, after the insert: raising rolls
    the unit back, so nothing is queued.
    """
    found = get(conn, account_id, msisdn)
    if found is not None:
        raise Suppressed(found)


@dataclass(frozen=True)
class Page:
    entries: list[Suppression]
    total: int  # entries matching the search, on every page
    more: bool  # there are older ones after this page


def search(conn: Connection, account_id: int, *, msisdn: str | None = None,
           contains: str | None = None, before_id: int | None = None,
           limit: int = 100) -> Page:
    """The account's entries, newest first (a read unit).

    ``msisdn``: that number only. ``contains``: numbers whose digits contain these
    digits. ``before_id``: the page after an entry (keyset pagination).
    """
    where = "account_id = ?"
    args: list[Any] = [account_id]
    if msisdn is not None:
        where += " AND msisdn = ?"
        args.append(msisdn)
    if contains:
        where += " AND msisdn LIKE ?"
        args.append(f"%{contains}%")
    total_row = conn.execute(f"SELECT count(*) FROM suppressions WHERE {where}",
                             tuple(args)).fetchone()
    if before_id is not None:
        where += " AND id < ?"
        args.append(before_id)
    rows = conn.execute(
        f"SELECT {COLUMNS} FROM suppressions WHERE {where} ORDER BY id DESC LIMIT ?",
        (*args, limit + 1)).fetchall()
    entries = [_entry(r) for r in rows[:limit]]
    return Page(entries, as_int(total_row[0]) if total_row else 0, len(rows) > limit)


def suppressed_count(conn: Connection, account_id: int, list_id: int) -> int:
    """How many of a list's contacts are on the account's suppression list (a read unit):
    the messages a campaign to the list would create ``CANCELLED`` (its dry run's
    ``suppressed``)."""
    row = conn.execute(
        "SELECT count(*) FROM contacts c JOIN suppressions s"
        " ON s.account_id = ? AND s.msisdn = c.msisdn WHERE c.list_id = ?",
        (account_id, list_id)).fetchone()
    return as_int(row[0]) if row else 0
