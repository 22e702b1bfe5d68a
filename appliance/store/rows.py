"""Reading a row's values with their types checked.

A :class:`~appliance.store.connection.Cursor` gives rows as tuples of
:data:`~appliance.store.connection.SqlValue` (what either engine can return: an integer,
a real, a text, a blob or NULL), so ``mypy --strict`` sees every read. A unit says which
type it expects with one of these converters; a value of another type is a
:class:`RowTypeError` naming both, never a silent coercion (``int("12")``, ``int(1.5)``,
``str(None)`` would each hide a schema mistake).

PostgreSQL's ``numeric`` (``SUM`` of integers) arrives as an ``int`` when it is whole
(:mod:`appliance.store.pg`), so an integral ``float`` is read as an integer too.
"""

from __future__ import annotations

from .connection import Cursor, Row, SqlValue


class RowTypeError(TypeError):
    """A column held a value of another type than its reader expects."""


def _refuse(value: SqlValue, expected: str) -> RowTypeError:
    return RowTypeError(f"expected {expected}, got {type(value).__name__} {value!r:.40}")


def as_int(value: SqlValue) -> int:
    """An INTEGER column (or a whole number from an aggregate)."""
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _refuse(value, "an integer")


def as_float(value: SqlValue) -> float:
    """A REAL column, or an INTEGER read as a number."""
    if isinstance(value, (int, float)):
        return float(value)
    raise _refuse(value, "a number")


def as_str(value: SqlValue) -> str:
    """A TEXT column."""
    if isinstance(value, str):
        return value
    raise _refuse(value, "a text")


def as_bytes(value: SqlValue) -> bytes:
    """A BLOB column (a driver's buffer is copied into ``bytes``)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise _refuse(value, "a blob")


def opt_int(value: SqlValue) -> int | None:
    """A nullable INTEGER column."""
    return None if value is None else as_int(value)


def opt_float(value: SqlValue) -> float | None:
    """A nullable REAL column."""
    return None if value is None else as_float(value)


def opt_str(value: SqlValue) -> str | None:
    """A nullable TEXT column."""
    return None if value is None else as_str(value)


def one(cursor: Cursor) -> Row:
    """The row a statement must return (an aggregate, a row just written or locked)."""
    row = cursor.fetchone()
    if row is None:
        raise LookupError("the statement returned no row")
    return row
