"""A list's contacts in the store: browsing, searching, exporting, deleting.

Read units and write units, like :mod:`appliance.imports.import_job`. Browsing pages
by contact id (``id > after``), so a page costs the same at the end of a million-row
list as at its start. Deleting a list marks it deleted (it disappears from the
console and the API at once; its campaigns and import jobs keep pointing at the
row) and then deletes its contacts in bounded batches, so a large list never holds
the writer for long; if the process stops halfway, retention finishes the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from appliance.store.connection import Connection
from appliance.store.rows import as_int, as_str

DELETE_BATCH = 5000


class ListBusy(ValueError):
    """An import into the list, or a campaign creating its messages from it, is under way."""


class ListChanged(ValueError):
    """The list does not hold the number of contacts the confirmation stated."""

    def __init__(self, contacts: int) -> None:
        super().__init__(f"the list now has {contacts} contacts")
        self.contacts = contacts


@dataclass(frozen=True)
class ListInfo:
    id: int
    name: str
    created_at: int
    contacts: int
    jobs: int
    campaigns: int


@dataclass(frozen=True)
class Contact:
    id: int
    msisdn: str
    name: str | None
    created_at: int
    job_id: int | None


def get_list(conn: Connection, account_id: int, list_id: int) -> ListInfo | None:
    """A live (not deleted) list of the account, with its counts (a read unit)."""
    row = conn.execute(
        "SELECT l.id, l.name, l.created_at,"
        " (SELECT count(*) FROM contacts c WHERE c.list_id = l.id),"
        " (SELECT count(*) FROM import_jobs j WHERE j.list_id = l.id),"
        " (SELECT count(*) FROM campaigns m WHERE m.list_id = l.id)"
        " FROM lists l WHERE l.id = ? AND l.account_id = ? AND l.deleted_at IS NULL",
        (list_id, account_id)).fetchone()
    if row is None:
        return None
    return ListInfo(as_int(row[0]), as_str(row[1]), as_int(row[2]), as_int(row[3]),
                    as_int(row[4]), as_int(row[5]))


def get_contact(conn: Connection, list_id: int, contact_id: int) -> Contact | None:
    row: Any = conn.execute(
        "SELECT id, msisdn, name, created_at, job_id FROM contacts WHERE id = ? AND list_id = ?",
        (contact_id, list_id)).fetchone()
    return None if row is None else Contact(int(row[0]), str(row[1]), row[2], int(row[3]),
                                            row[4])


def _like(text: str) -> str:
    return "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def browse(conn: Connection, list_id: int, after_id: int = 0, limit: int = 100,
           msisdn: str | None = None, text: str | None = None) -> list[Contact]:
    """Contacts after ``after_id`` in id order (a read unit). ``msisdn``: exactly that
    number; ``text``: digits anywhere in the number, or text anywhere in the name."""
    where = "list_id = ? AND id > ?"
    args: list[Any] = [list_id, after_id]
    if msisdn is not None:
        where += " AND msisdn = ?"
        args.append(msisdn)
    elif text:
        digits = "".join(ch for ch in text if ch.isdigit()).lstrip("0")
        clauses = ["name LIKE ? ESCAPE '\\'"]
        args.append(_like(text))
        if len(digits) >= 3:
            clauses.append("msisdn LIKE ? ESCAPE '\\'")
            args.append(_like(digits))
        where += " AND (" + " OR ".join(clauses) + ")"
    rows: list[Any] = conn.execute(
        f"SELECT id, msisdn, name, created_at, job_id FROM contacts WHERE {where}"
        " ORDER BY id LIMIT ?", (*args, limit)).fetchall()
    return [Contact(int(r[0]), str(r[1]), r[2], int(r[3]), r[4]) for r in rows]


def export_page(conn: Connection, list_id: int, after_id: int,
                limit: int = 5000) -> list[tuple[int, str, str, int]]:
    """(id, msisdn, name, created_at) of the next ``limit`` contacts (a read unit)."""
    return [(as_int(r[0]), str(r[1]), str(r[2] or ""), as_int(r[3])) for r in conn.execute(
        "SELECT id, msisdn, name, created_at FROM contacts WHERE list_id = ? AND id > ?"
        " ORDER BY id LIMIT ?", (list_id, after_id, limit))]


def busy_with(conn: Connection, list_id: int) -> str | None:
    """Why the list cannot be changed now, or None (a read unit)."""
    running = conn.execute(
        "SELECT id FROM import_jobs WHERE list_id = ? AND state IN ('DRAFT', 'RUNNING')"
        " ORDER BY id LIMIT 1", (list_id,)).fetchone()
    if running is not None:
        return f"import job {as_int(running[0])} into this list is still running"
    expanding = conn.execute(
        "SELECT id FROM campaigns WHERE list_id = ? AND state = 'RUNNING'"
        " AND queued_through < last_contact_id ORDER BY id LIMIT 1", (list_id,)).fetchone()
    if expanding is not None:
        return f"campaign {as_int(expanding[0])} is still creating its messages from this list"
    return None


def delete_contact(conn: Connection, account_id: int, list_id: int,
                   contact_id: int) -> int:
    """Delete one contact of the account's list; how many went (0 or 1) (a write unit)."""
    conn.execute(
        "DELETE FROM contacts WHERE id = ? AND list_id = (SELECT id FROM lists"
        " WHERE id = ? AND account_id = ? AND deleted_at IS NULL)",
        (contact_id, list_id, account_id))
    return int(conn.changes())


def mark_deleted(conn: Connection, account_id: int, list_id: int, expected: int,
                 now_ms: int) -> int:
    """Mark the list deleted if it still has ``expected`` contacts (a write unit).

    Returns the number of contacts it had; raises :class:`ListBusy` while an import or
    a campaign expansion uses it, ``LookupError`` when there is no such list, and
    :class:`ListChanged` when the count is no longer the one confirmed.
    """
    found = get_list(conn, account_id, list_id)
    if found is None:
        raise LookupError(f"no list {list_id}")
    why = busy_with(conn, list_id)
    if why is not None:
        raise ListBusy(why)
    if found.contacts != expected:
        raise ListChanged(found.contacts)
    conn.execute("UPDATE lists SET deleted_at = ? WHERE id = ?", (now_ms, list_id))
    return found.contacts


def delete_some_contacts(conn: Connection, list_id: int,
                         batch: int = DELETE_BATCH) -> int:
    """Delete up to ``batch`` contacts of a deleted list (a write unit)."""
    conn.execute(
        "DELETE FROM contacts WHERE id IN (SELECT c.id FROM contacts c JOIN lists l"
        " ON l.id = c.list_id WHERE c.list_id = ? AND l.deleted_at IS NOT NULL LIMIT ?)",
        (list_id, batch))
    return int(conn.changes())
