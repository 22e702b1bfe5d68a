"""A PostgreSQL connection that speaks the store's :class:`Connection` subset.

:class:`PgConnection` wraps one psycopg 3 connection in autocommit mode, so that, as on
apsw, a transaction is exactly what the SQL says (``BEGIN`` ... ``COMMIT``, savepoints).
It

* translates each statement once (:func:`appliance.store.dialect.to_postgresql`);
* counts ``changes()`` / ``total_changes()`` from each INSERT/UPDATE/DELETE's row count;
* knows ``last_insert_rowid()``: an ``INSERT`` into a table with a row id gets
  ``RETURNING`` that id added, and the last one returned is kept (an insert that
  inserted nothing, ``ON CONFLICT DO NOTHING``, leaves it as it was, as on SQLite);
* sends every Python ``int`` as ``bigint`` (epoch milliseconds times anything overflow
  the ``smallint``/``integer`` psycopg would otherwise choose for a small value) and a
  ``bool`` as the integer 1 or 0 (the schema's flags are integers, as on SQLite);
* reads ``numeric`` as ``int`` when it has no fraction (``sum()`` of a ``bigint`` column
  is ``numeric`` in PostgreSQL) and as ``float`` otherwise, and ``boolean`` as 1 or 0
  (``x IS NOT NULL`` in a select list), as SQLite answers;
* raises :mod:`appliance.store.errors`' classes, never psycopg's;
* with ``batched`` (the writer's connection): holds back ``BEGIN``, ``SAVEPOINT name``
  and ``RELEASE name`` and sends them in one message with the next statement, so a
  savepoint costs no round trip of its own (see :meth:`PgConnection.execute`).
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import psycopg
import psycopg.adapt
from psycopg import pq
from psycopg.types.numeric import Int8BinaryDumper, Int8Dumper

from appliance.store import dialect
from appliance.store.connection import Params
from appliance.store.errors import (
    IntegrityError,
    StorageUnavailable,
    StoreConflict,
    StoreError,
)
from appliance.store.schema import schema_sql

# -- types ---------------------------------------------------------------------


class _NumericLoader(psycopg.adapt.Loader):
    """``numeric`` text: an int when it has no fraction, else a float."""

    def load(self, data: Any) -> int | float:
        text = bytes(data)
        if b"." in text or b"e" in text or b"E" in text or b"N" in text or b"n" in text:
            return float(text)
        return int(text)


class _BoolLoader(psycopg.adapt.Loader):
    def load(self, data: Any) -> int:
        return 1 if bytes(data) == b"t" else 0


class _BoolDumper(Int8Dumper):
    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


class _BoolBinaryDumper(Int8BinaryDumper):
    def dump(self, obj: Any) -> bytes:
        return struct.pack(">q", 1 if obj else 0)


def configure_types(conn: psycopg.Connection[Any]) -> None:
    """Make ``conn`` send and read values as the store's units expect (see above)."""
    adapters = conn.adapters
    adapters.register_dumper(int, Int8Dumper)
    adapters.register_dumper(int, Int8BinaryDumper)
    adapters.register_dumper(bool, _BoolDumper)
    adapters.register_dumper(bool, _BoolBinaryDumper)
    adapters.register_loader("numeric", _NumericLoader)
    adapters.register_loader("bool", _BoolLoader)


# -- errors --------------------------------------------------------------------

_CONFLICT_STATES: Final = frozenset({"40001", "40P01", "55P03", "57014"})
_UNAVAILABLE_CLASSES: Final = ("08", "53", "57", "58", "XX")
_UNAVAILABLE_STATES: Final = frozenset({"25006"})  # read-only transaction: a standby


def store_error(exc: BaseException) -> StoreError:
    """psycopg's exception as one of the store's classes (the cause is kept)."""
    state = getattr(exc, "sqlstate", None) or ""
    message = str(exc).strip() or type(exc).__name__
    out: StoreError
    if state.startswith("23"):
        out = IntegrityError(message)
    elif state in _CONFLICT_STATES:
        out = StoreConflict(message)
    elif state.startswith(_UNAVAILABLE_CLASSES) or state in _UNAVAILABLE_STATES:
        out = StorageUnavailable(message)
    elif isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) and not state:
        out = StorageUnavailable(message)  # the connection went, or never came
    else:
        out = StoreError(message)
    out.sqlstate = state  # type: ignore[attr-defined]
    return out


# -- the connection --------------------------------------------------------------

_DML: Final = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE"})
# The statements a batched connection holds back: nothing is read of them, and each can
# fail only where the statement after it would fail too (a transaction already
# aborted, a lost connection) or for a savepoint name never taken (a bug).
_HELD: Final = re.compile(r"(BEGIN|SAVEPOINT\s+\w+|RELEASE\s+(SAVEPOINT\s+)?\w+)",
                          re.IGNORECASE)
_ROLLBACK: Final = re.compile(r"ROLLBACK(\s+(WORK|TRANSACTION))?", re.IGNORECASE)
_IDENTITY: dict[str, str] = {}


def identity_columns() -> dict[str, str]:
    """The schema's tables with a row id, and its column (read once)."""
    if not _IDENTITY:
        _IDENTITY.update(dialect.identity_columns(schema_sql()))
    return _IDENTITY


class PgCursor:
    """Rows of one statement, fetched already (psycopg's client-side cursor)."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows
        self._at = 0

    def fetchone(self) -> Any:
        if self._at >= len(self._rows):
            return None
        row = self._rows[self._at]
        self._at += 1
        return row

    def fetchall(self) -> list[Any]:
        rows = self._rows[self._at:]
        self._at = len(self._rows)
        return rows

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        row = self.fetchone()
        if row is None:
            raise StopIteration
        return row


class PgConnection:
    """One PostgreSQL connection as a store :class:`~appliance.store.connection.Connection`."""

    dialect: Final = dialect.POSTGRESQL

    def __init__(self, raw: psycopg.Connection[Any],
                 identity: Mapping[str, str] | None = None, *, configured: bool = False,
                 batched: bool = False) -> None:
        if not raw.autocommit:
            raw.autocommit = True
        if not configured:
            configure_types(raw)
        self.raw = raw
        self.identity = dict(identity_columns() if identity is None else identity)
        self.batched = batched
        self.round_trips = 0  # statements (or held statements with one) sent to the server
        self._held: list[str] = []
        self._client_cursor: psycopg.ClientCursor[Any] | None = None
        self._changes = 0
        self._total_changes = 0
        self._last_rowid = 0

    @classmethod
    def connect(cls, url: str, *, application_name: str = "appliance",
                connect_timeout_s: float = 10.0, batched: bool = False) -> PgConnection:
        try:
            raw = psycopg.connect(url, autocommit=True, application_name=application_name,
                                  connect_timeout=max(1, int(connect_timeout_s)))
        except psycopg.Error as exc:
            raise store_error(exc) from exc
        return cls(raw, batched=batched)

    # -- the Connection subset ---------------------------------------------------
    def execute(self, sql: str, params: Params | None = None, /) -> PgCursor:
        """Run ``sql``; its rows are read at once.

        On a ``batched`` connection, ``BEGIN``, ``SAVEPOINT name`` and ``RELEASE name``
        are held back and go with the next statement, in one message (the simple query
        protocol, the values bound here by psycopg's client-side cursor): the server runs
        them in order, and an error of any stops the rest, raised by that next statement.
        That is where the unit's code expects it: a held statement cannot fail unless the
        transaction is already lost, and the statement that lost it raised at once. A
        full ``ROLLBACK`` drops what is held (it would undo it anyway).
        """
        with_params = params is not None
        if self.batched and not with_params and _holdable(sql):
            self._held.append(sql.strip().rstrip(";"))
            return PgCursor([])
        held = self._take_held(sql)
        text = dialect.to_postgresql(sql, with_params)
        returning_id = None
        table = dialect.inserted_table(sql)
        if table is not None and table in self.identity and not dialect.has_returning(sql):
            returning_id = self.identity[table]
            text = f"{text.rstrip().rstrip(';')}\nRETURNING {returning_id}"
        self.round_trips += 1
        try:
            if not held:
                cur = self.raw.execute(text, _params(params) if with_params else None)  # type: ignore[arg-type]
            elif with_params:
                cur = self._client().execute(held + text, _params(params))  # type: ignore[arg-type]
            else:
                cur = self.raw.execute(held + text)
            while held and cur.nextset():  # to the result of the statement itself
                pass
            rows = cur.fetchall() if cur.pgresult is not None and cur.description else []
        except psycopg.Error as exc:
            raise store_error(exc) from exc
        self._count(cur)
        if returning_id is not None:
            if rows:
                self._last_rowid = int(rows[-1][0])
            return PgCursor([])
        if table is not None and rows and cur.rowcount > 0 and self._returns_id(sql, cur):
            self._last_rowid = int(rows[-1][0])
        return PgCursor(rows)

    def executemany(self, sql: str, rows: Iterable[Params], /) -> PgCursor:
        text = dialect.to_postgresql(sql, True)
        held = self._take_held(sql)
        try:
            if held:
                self.round_trips += 1
                self.raw.execute(held.rstrip("; "))
            self.round_trips += 1
            with self.raw.cursor() as cur:
                cur.executemany(text, [_params(r) for r in rows])
                self._count(cur)
        except psycopg.Error as exc:
            raise store_error(exc) from exc
        return PgCursor([])

    def changes(self) -> int:
        return self._changes

    def total_changes(self) -> int:
        return self._total_changes

    def last_insert_rowid(self) -> int:
        return self._last_rowid

    @property
    def in_transaction(self) -> bool:
        # Statements are held only in a transaction, or with the BEGIN that opens one.
        return bool(self._held) or self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    # -- beyond it ------------------------------------------------------------------
    @property
    def broken(self) -> bool:
        """The connection is gone (closed, or lost to the server)."""
        return self.raw.closed or self.raw.broken

    def close(self) -> None:
        self._held.clear()
        self.raw.close()

    def _take_held(self, sql: str) -> str:
        """The statements held back, to send before ``sql`` (``"A; B; "``), and none
        before a full ``ROLLBACK``, which would undo them."""
        if not self._held:
            return ""
        held, self._held = self._held, []
        if _ROLLBACK.fullmatch(sql.strip().rstrip(";").strip()):
            return ""
        return "; ".join(held) + "; "

    def _client(self) -> psycopg.ClientCursor[Any]:
        if self._client_cursor is None or self._client_cursor.closed:
            self._client_cursor = psycopg.ClientCursor(self.raw)
        return self._client_cursor

    def _count(self, cur: psycopg.Cursor[Any]) -> None:
        status = (cur.statusmessage or "").split(" ", 1)[0]
        if status in _DML and cur.rowcount >= 0:
            self._changes = cur.rowcount
            self._total_changes += cur.rowcount

    def _returns_id(self, sql: str, cur: psycopg.Cursor[Any]) -> bool:
        """An INSERT whose own RETURNING starts with the row id: keep it as the last id."""
        table = dialect.inserted_table(sql)
        column = self.identity.get(table or "")
        desc = cur.description
        return bool(column and desc and desc[0].name == column)


@functools.lru_cache(maxsize=256)
def _holdable(sql: str) -> bool:
    """Whether a batched connection holds ``sql`` back (see :meth:`PgConnection.execute`)."""
    return _HELD.fullmatch(sql.strip().rstrip(";").strip()) is not None


def _params(params: Params) -> Sequence[Any] | Mapping[str, Any]:
    if isinstance(params, Mapping):
        return params
    return tuple(params)
