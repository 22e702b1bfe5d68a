"""The connection a store unit is a function of, on either backend.

Every read and write unit takes a :class:`Connection`: the subset of apsw's connection
the appliance uses. An ``apsw.Connection`` is one as it is; on PostgreSQL it is a
:class:`appliance.store.pg.PgConnection`, which speaks the same subset (``?``
placeholders, ``changes()``, ``last_insert_rowid()``, ``in_transaction``) and raises the
classes of :mod:`appliance.store.errors`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
Params = Sequence[Any] | Mapping[str, Any]


SqlValue = int | float | str | bytes | None
Row = tuple[SqlValue, ...]


class Cursor(Protocol):
    """What ``execute`` returns: rows as tuples."""

    def fetchone(self) -> Row | None: ...

    def fetchall(self) -> list[Row]: ...

    def __iter__(self) -> Iterator[Row]: ...


class Connection(Protocol):
    """The part of a database connection a store unit may use.

    * ``execute(sql, params)``: one statement (or, without params, a script of several),
      ``?`` placeholders (or ``:name`` with a mapping);
    * ``executemany(sql, rows)``: the statement once per row of params;
    * ``changes()``: rows inserted, updated or deleted by the last such statement (a
      ``SELECT`` leaves it as it was); after ``executemany`` use the difference of
      ``total_changes()``, which counts every row changed on this connection;
    * ``last_insert_rowid()``: the id of the last row inserted (0 before any);
    * ``in_transaction``: whether a transaction is open;
    * ``SAVEPOINT name`` / ``RELEASE name`` / ``ROLLBACK TO name`` as statements.
    """

    def execute(self, sql: str, params: Params | None = None, /) -> Cursor: ...

    def executemany(self, sql: str, rows: Iterable[Params], /) -> Cursor: ...

    def changes(self) -> int: ...

    def total_changes(self) -> int: ...

    def last_insert_rowid(self) -> int: ...

    @property
    def in_transaction(self) -> bool: ...


Unit = Callable[[Connection], T]
