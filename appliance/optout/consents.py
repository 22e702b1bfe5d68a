"""Consents to commercial messages in the store (IYS-2): per account, one record in force
per number and every record received.

A record is what İYS keeps for a number (its consent fields: ``status`` ONAY or RET,
``recipientType`` BIREYSEL or TACIR, ``source``, ``consentDate``): the record in force is
the latest by ``consented_at``; on a tie RET wins, then BIREYSEL (the side that needs
consent), then the greater source, so the same records in any order, any number of times,
leave the same record in force. Every record received is kept once in ``consent_history``.

Who may get a commercial message (:data:`ALLOWED_SQL`): a number whose record in force is
``ONAY``, or a ``TACIR`` one that has not refused. Law 6563 art. 6(1): "Esnaf ve tacirlere
önceden onay alınmaksızın ticarî elektronik iletiler gönderilebilir"; its regulation
(Ticari İletişim ve Ticari Elektronik İletiler Hakkında Yönetmelik) art. 6 keeps that
exception only until the trader or craftsman uses the right to refuse (a message sent
after a RET counts as sent without consent). A number with no record is a BIREYSEL
without consent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.rows import as_int

ONAY, RET = "ONAY", "RET"
STATUSES: Final = (ONAY, RET)
BIREYSEL, TACIR = "BIREYSEL", "TACIR"
RECIPIENT_TYPES: Final = (BIREYSEL, TACIR)
NO_CONSENT: Final = "no_consent"  # the error of a commercial message left out for it

# A consent row aliased ``k`` that allows a commercial message.
ALLOWED_SQL: Final = (f"(k.status = '{ONAY}' OR k.recipient_type = '{TACIR}')"
                      f" AND k.status <> '{RET}'")


@dataclass(frozen=True)
class ConsentRecord:
    """One record as received (a row of an upload, or one object)."""

    msisdn: str
    status: str
    recipient_type: str
    source: str
    consented_at: int

    @property
    def rank(self) -> tuple[int, bool, bool, str]:
        """The order that decides which record is in force: the greatest."""
        return (self.consented_at, self.status == RET, self.recipient_type == BIREYSEL,
                self.source)


@dataclass(frozen=True)
class Consent:
    """A number's record in force."""

    id: int
    msisdn: str
    status: str
    recipient_type: str
    source: str
    consented_at: int
    received_at: int
    last_commercial_at: int | None

    @property
    def allows_commercial(self) -> bool:
        return self.status != RET and (self.status == ONAY or self.recipient_type == TACIR)

    @property
    def record(self) -> ConsentRecord:
        return ConsentRecord(self.msisdn, self.status, self.recipient_type, self.source,
                             self.consented_at)


COLUMNS: Final = ("id, msisdn, status, recipient_type, source, consented_at, received_at,"
                  " last_commercial_at")


def _consent(row: Any) -> Consent:
    return Consent(as_int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4]),
                   as_int(row[5]), as_int(row[6]), None if row[7] is None else as_int(row[7]))


class NoConsent(Exception):
    """A commercial message to a number without consent: nothing was queued."""

    def __init__(self, msisdn: str, found: Consent | None) -> None:
        why = "has no consent record" if found is None else (
            f"has {found.status} ({found.recipient_type})")
        super().__init__(f"{msisdn} {why}")
        self.msisdn = msisdn
        self.found = found


def get(conn: Connection, account_id: int, msisdn: str, lock: bool = False) -> Consent | None:
    """The number's record in force (``lock``: locked to the unit's end on PostgreSQL)."""
    row = conn.execute(
        f"SELECT {COLUMNS} FROM consents WHERE account_id = ? AND msisdn = ?"
        + (dialect.of(conn).for_update if lock else ""), (account_id, msisdn)).fetchone()
    return None if row is None else _consent(row)


@dataclass
class Applied:
    """What applying records did: numbers given their first record, records that took
    over from the one in force, and records that changed nothing in force."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0


def apply_one(conn: Connection, account_id: int, rec: ConsentRecord, now_ms: int) -> str:
    """Apply one record (part of a write unit): ``"added"``, ``"updated"`` or
    ``"unchanged"``. The record is kept in the history (once); it takes over the one in
    force when it ranks above it (:attr:`ConsentRecord.rank`)."""
    conn.execute(
        "INSERT INTO consent_history (account_id, msisdn, status, recipient_type, source,"
        " consented_at, received_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (account_id, rec.msisdn, rec.status, rec.recipient_type, rec.source,
         rec.consented_at, now_ms))
    conn.execute(
        "INSERT INTO consents (account_id, msisdn, status, recipient_type, source,"
        " consented_at, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (account_id, msisdn) DO NOTHING",
        (account_id, rec.msisdn, rec.status, rec.recipient_type, rec.source,
         rec.consented_at, now_ms))
    if conn.changes():
        return "added"
    # Locked first on PostgreSQL: a sender marking a commercial message to this number
    # waits for this unit, or this unit for it (appliance.sending.consent_gate).
    found = get(conn, account_id, rec.msisdn, lock=True)
    assert found is not None
    if rec.rank <= found.record.rank:
        return "unchanged"
    conn.execute(
        "UPDATE consents SET status = ?, recipient_type = ?, source = ?, consented_at = ?,"
        " received_at = ? WHERE id = ?",
        (rec.status, rec.recipient_type, rec.source, rec.consented_at, now_ms, found.id))
    return "updated"


def apply_many(conn: Connection, account_id: int, records: Iterable[ConsentRecord],
               now_ms: int) -> Applied:
    """Apply records in order (a write unit)."""
    out = Applied()
    for rec in records:
        what = apply_one(conn, account_id, rec, now_ms)
        setattr(out, what, getattr(out, what) + 1)
    return out


@dataclass(frozen=True)
class Received:
    """A record as kept in the history, with when it first arrived."""

    record: ConsentRecord
    received_at: int


def history(conn: Connection, account_id: int, msisdn: str) -> list[Received]:
    """Every record received for the number, oldest consent first (a read unit)."""
    rows: list[Any] = conn.execute(
        "SELECT msisdn, status, recipient_type, source, consented_at, received_at"
        " FROM consent_history WHERE account_id = ? AND msisdn = ?"
        " ORDER BY consented_at, id", (account_id, msisdn)).fetchall()
    return [Received(ConsentRecord(str(r[0]), str(r[1]), str(r[2]), str(r[3]),
                                   as_int(r[4])), as_int(r[5])) for r in rows]


@dataclass(frozen=True)
class Page:
    consents: list[Consent]
    total: int
    more: bool


def search(conn: Connection, account_id: int, *, status: str | None = None,
           msisdn: str | None = None, before_id: int | None = None,
           limit: int = 100) -> Page:
    """The account's records in force, newest first (a read unit)."""
    where = "account_id = ?"
    args: list[Any] = [account_id]
    if status is not None:
        where += " AND status = ?"
        args.append(status)
    if msisdn is not None:
        where += " AND msisdn = ?"
        args.append(msisdn)
    total: Any = conn.execute(f"SELECT count(*) FROM consents WHERE {where}",
                              tuple(args)).fetchone()
    if before_id is not None:
        where += " AND id < ?"
        args.append(before_id)
    rows: list[Any] = conn.execute(
        f"SELECT {COLUMNS} FROM consents WHERE {where} ORDER BY id DESC LIMIT ?",
        (*args, limit + 1)).fetchall()
    return Page([_consent(r) for r in rows[:limit]], as_int(total[0]), len(rows) > limit)


def search_after(conn: Connection, account_id: int, after_id: int,
                 batch: int = 5000) -> list[Consent]:
    """The account's records in force after ``after_id``, by id (an export's read unit)."""
    rows: list[Any] = conn.execute(
        f"SELECT {COLUMNS} FROM consents WHERE account_id = ? AND id > ?"
        " ORDER BY id LIMIT ?", (account_id, after_id, batch)).fetchall()
    return [_consent(r) for r in rows]


def refuse_without_consent(conn: Connection, account_id: int, msisdn: str) -> None:
    """Raise :class:`NoConsent` unless the number may get a commercial message (inside
    the write unit that queues it: raising rolls the unit back)."""
    found = get(conn, account_id, msisdn)
    if found is None or not found.allows_commercial:
        raise NoConsent(msisdn, found)


def no_consent_count(conn: Connection, account_id: int, list_id: int) -> int:
    """A list's contacts that a commercial campaign leaves out for want of consent (not
    counting those on the suppression list, which are counted as ``suppressed``)."""
    row: Any = conn.execute(
        "SELECT count(*) FROM contacts c WHERE c.list_id = ? AND NOT EXISTS (SELECT 1"
        " FROM suppressions s WHERE s.account_id = ? AND s.msisdn = c.msisdn) AND NOT EXISTS"
        f" (SELECT 1 FROM consents k WHERE k.account_id = ? AND k.msisdn = c.msisdn AND"
        f" {ALLOWED_SQL})", (list_id, account_id, account_id)).fetchone()
    return as_int(row[0])
