"""The one place that knows how SQLite's SQL and PostgreSQL's differ.

The store modules write one SQL: SQLite's, kept portable (see "PostgreSQL" in
``docs/architecture.md`` for the rules). On PostgreSQL, :func:`to_postgresql` turns each
statement into what psycopg sends, once per distinct statement (cached):

* ``?`` becomes ``%s`` and ``:name`` becomes ``%(name)s``, outside string literals,
  quoted names and comments; with parameters, every literal ``%`` is doubled (psycopg
  reads the whole text for placeholders);
* ``LIKE`` becomes ``ILIKE`` (SQLite's ``LIKE`` ignores the case of ASCII letters), and a
  ``LIKE ?`` without ``ESCAPE`` gets ``ESCAPE ''`` (PostgreSQL's ``LIKE`` otherwise
  treats a backslash as an escape, SQLite's never);
* ``x IS ?`` / ``x IS NOT ?`` become ``IS NOT DISTINCT FROM`` / ``IS DISTINCT FROM``;
* the scalar ``max(a, b, ...)`` / ``min(a, b, ...)`` become ``GREATEST`` / ``LEAST``
  (which skip NULLs where SQLite's answer NULL: keep their arguments NOT NULL);
* ``ifnull(`` becomes ``coalesce(``; ``BEGIN IMMEDIATE`` (or ``DEFERRED``,
  ``EXCLUSIVE``) becomes ``BEGIN``.

:func:`postgresql_schema` turns ``schema.sql`` into PostgreSQL's DDL: ``BIGINT`` for
every INTEGER (epoch milliseconds do not fit a 32-bit int), an identity column for an
``INTEGER PRIMARY KEY`` row id (``AUTOINCREMENT`` or not), ``BYTEA`` for BLOB, text
in the ``"C"`` collation (byte order, as SQLite compares), the same constraints and
indexes.

:class:`Dialect` is what a unit asks when it must say something only one backend has:
``FOR UPDATE SKIP LOCKED`` on a claim, the index (or the row id) SQLite must read a
hot statement by.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

# -- tokens -----------------------------------------------------------------

_TOKEN: Final = re.compile(r"""
    (?P<string>'(?:[^']|'')*'?)
  | (?P<quoted>"(?:[^"]|"")*"?)
  | (?P<line_comment>--[^\n]*)
  | (?P<block_comment>/\*.*?(?:\*/|\Z))
  | (?P<cast>::)
  | (?P<param>\?[0-9]*|:[A-Za-z_][A-Za-z0-9_]*)
  | (?P<word>[A-Za-z_][A-Za-z0-9_$]*)
  | (?P<space>\s+)
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


@dataclass(frozen=True)
class Token:
    kind: str  # string quoted line_comment block_comment cast param word space other
    text: str

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""

    @property
    def significant(self) -> bool:
        return self.kind not in ("space", "line_comment", "block_comment")


def tokens(sql: str) -> list[Token]:
    out: list[Token] = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup or "other"
        out.append(Token(kind, m.group()))
    return out


class UnsupportedSql(ValueError):
    """A statement the PostgreSQL translation cannot carry (say it portably instead)."""


# -- statements ---------------------------------------------------------------

def _next_significant(toks: list[Token], i: int) -> int:
    """The index of the first significant token at or after ``i`` (len when none)."""
    while i < len(toks) and not toks[i].significant:
        i += 1
    return i


def _matching_paren(toks: list[Token], open_at: int) -> tuple[int, bool]:
    """The index of the ``)`` closing ``toks[open_at]`` and whether a comma sits at its
    top level."""
    depth, comma = 0, False
    for j in range(open_at, len(toks)):
        t = toks[j].text if toks[j].kind == "other" else ""
        if t == "(":
            depth += 1
        elif t == ")":
            depth -= 1
            if depth == 0:
                return j, comma
        elif t == "," and depth == 1:
            comma = True
    return len(toks), comma


def _plain(tok: Token, with_params: bool) -> str:
    """A token that is not a keyword, as PostgreSQL (through psycopg) reads it."""
    if tok.kind == "param":
        if tok.text.startswith("?"):
            if len(tok.text) > 1:
                raise UnsupportedSql(f"numbered parameter {tok.text}: use ? or :name")
            return "%s"
        return f"%({tok.text[1:]})s"
    if with_params and tok.kind != "space":
        return tok.text.replace("%", "%%")
    return tok.text


@functools.lru_cache(maxsize=4096)
def to_postgresql(sql: str, with_params: bool = True) -> str:
    """``sql`` (SQLite's, portable) as psycopg sends it to PostgreSQL.

    ``with_params``: whether parameters go with it (psycopg then reads ``%`` as the start
    of a placeholder, so a literal one is doubled; without parameters it is left alone).
    """
    toks = tokens(sql)
    out: list[str] = []
    i = 0
    n = len(toks)
    while i < n:
        tok = toks[i]
        if tok.kind != "word":
            out.append(_plain(tok, with_params))
            i += 1
            continue
        word = tok.upper
        nxt = _next_significant(toks, i + 1)
        if word == "LIKE":
            out.append("ILIKE")
            operand = nxt
            if operand < n and toks[operand].kind in ("param", "string"):
                after = _next_significant(toks, operand + 1)
                if after >= n or toks[after].upper != "ESCAPE":
                    # copy up to and including the operand, then say there is no escape
                    out.extend(_plain(t, with_params) for t in toks[i + 1:operand + 1])
                    out.append(" ESCAPE ''")
                    i = operand + 1
                    continue
            i += 1
            continue
        if word == "IS" and nxt < n:
            if toks[nxt].kind == "param":
                out.append("IS NOT DISTINCT FROM")
                i += 1
                continue
            if toks[nxt].upper == "NOT":
                after = _next_significant(toks, nxt + 1)
                if after < n and toks[after].kind == "param":
                    out.append("IS DISTINCT FROM")
                    i = nxt + 1
                    continue
        if word in ("MAX", "MIN") and nxt < n and toks[nxt].text == "(":
            _close, comma = _matching_paren(toks, nxt)
            if comma:
                out.append("GREATEST" if word == "MAX" else "LEAST")
                i += 1
                continue
        if word == "IFNULL" and nxt < n and toks[nxt].text == "(":
            out.append("coalesce")
            i += 1
            continue
        if word == "BEGIN" and nxt < n and toks[nxt].upper in ("IMMEDIATE", "DEFERRED",
                                                               "EXCLUSIVE"):
            out.append("BEGIN")
            i = nxt + 1
            continue
        out.append(tok.text)
        i += 1
    return "".join(out)


_INSERT_INTO: Final = re.compile(r"^\s*INSERT\s+INTO\s+\"?([A-Za-z_][A-Za-z0-9_]*)", re.I)


def inserted_table(sql: str) -> str | None:
    """The table an ``INSERT INTO t ...`` statement writes, lower case; None otherwise."""
    m = _INSERT_INTO.match(sql)
    return m.group(1).lower() if m else None


@functools.lru_cache(maxsize=4096)
def has_returning(sql: str) -> bool:
    return any(t.upper == "RETURNING" for t in tokens(sql))


# -- schema -------------------------------------------------------------------

_TYPES: Final = {"INTEGER": "BIGINT", "INT": "BIGINT", "BIGINT": "BIGINT", "BLOB": "BYTEA",
                 "REAL": "DOUBLE PRECISION", "TEXT": 'TEXT COLLATE "C"'}
_TABLE_CONSTRAINTS: Final = ("UNIQUE", "PRIMARY", "CHECK", "FOREIGN", "CONSTRAINT")


def _split_top_level(toks: list[Token]) -> list[list[Token]]:
    parts: list[list[Token]] = [[]]
    depth = 0
    for t in toks:
        if t.kind == "other" and t.text == "(":
            depth += 1
        elif t.kind == "other" and t.text == ")":
            depth -= 1
        if depth == 0 and t.kind == "other" and t.text == ",":
            parts.append([])
            continue
        parts[-1].append(t)
    return parts


def _column(defn: list[Token]) -> tuple[str, str | None]:
    """One column definition in PostgreSQL's words, and its name when it is a row id
    (an ``INTEGER PRIMARY KEY`` that is no foreign key)."""
    words = [t.upper for t in defn if t.kind == "word"]
    sig = [t for t in defn if t.significant]
    if not sig or sig[0].upper in _TABLE_CONSTRAINTS:
        return "".join(t.text for t in defn), None
    name = sig[0].text
    rowid = (len(words) >= 4 and words[1] == "INTEGER" and words[2:4] == ["PRIMARY", "KEY"]
             and "REFERENCES" not in words)
    out: list[str] = []
    typed = False
    for t in defn:
        if t.kind == "word" and t.upper == "AUTOINCREMENT":
            continue
        if t.kind == "word" and not typed and t is not sig[0]:
            typed = True
            if t.upper not in _TYPES:
                raise UnsupportedSql(f"column {name}: type {t.text} has no PostgreSQL twin here")
            out.append("BIGINT GENERATED BY DEFAULT AS IDENTITY" if rowid else _TYPES[t.upper])
            continue
        out.append(t.text)
    text = "".join(out)
    return re.sub(r"[ \t]+(?=,|\n|$)", "", text), (name if rowid else None)


def _statements(sql: str) -> Iterator[list[Token]]:
    current: list[Token] = []
    for t in tokens(sql):
        current.append(t)
        if t.kind == "other" and t.text == ";":
            yield current
            current = []
    if any(t.significant for t in current):
        yield current


# A SQLite trigger, from CREATE TRIGGER to the END; that closes its body at the start
# of a line (a CASE ... END; inside the body is indented).
_SQLITE_TRIGGER = re.compile(r"^CREATE\s+TRIGGER\b.*?^END;[ \t]*$", re.S | re.I | re.M)


def postgresql_schema(sqlite_sql: str) -> str:
    """``schema.sql``'s tables and indexes in PostgreSQL's DDL.

    SQLite's triggers (the kept counts of :mod:`appliance.store.rollups`) are left out:
    on PostgreSQL they are PL/pgSQL functions, installed by
    :mod:`appliance.store.pg_triggers`."""
    out: list[str] = []
    for stmt in _statements(_SQLITE_TRIGGER.sub("", sqlite_sql)):
        sig = [t for t in stmt if t.significant]
        if [t.upper for t in sig[:2]] != ["CREATE", "TABLE"]:
            out.append("".join(t.text for t in stmt))
            continue
        open_at = next(i for i, t in enumerate(stmt) if t.text == "(")
        close_at, _ = _matching_paren(stmt, open_at)
        body = [_column(d)[0] for d in _split_top_level(stmt[open_at + 1:close_at])]
        out.append("".join(t.text for t in stmt[:open_at + 1]) + ",".join(body)
                   + "".join(t.text for t in stmt[close_at:]))
    return "".join(out)


def identity_columns(sqlite_sql: str) -> dict[str, str]:
    """Table -> its row-id column (``INTEGER PRIMARY KEY``, no foreign key), lower case."""
    found: dict[str, str] = {}
    for stmt in _statements(sqlite_sql):
        sig = [t for t in stmt if t.significant]
        if [t.upper for t in sig[:2]] != ["CREATE", "TABLE"]:
            continue
        table = sig[2].text.strip('"').lower()
        open_at = next(i for i, t in enumerate(stmt) if t.text == "(")
        close_at, _ = _matching_paren(stmt, open_at)
        for d in _split_top_level(stmt[open_at + 1:close_at]):
            _text, rowid = _column(d)
            if rowid:
                found[table] = rowid.lower()
    return found


# -- what a unit asks ------------------------------------------------------------

@dataclass(frozen=True)
class Dialect:
    name: str  # "sqlite" or "postgresql"

    @property
    def skip_locked(self) -> str:
        """Appended to a claim's ``SELECT``: rows another process holds are passed over
        (PostgreSQL); on SQLite the one writer already serialises every claim."""
        return " FOR UPDATE SKIP LOCKED" if self.name == "postgresql" else ""

    @property
    def for_update(self) -> str:
        """Appended to a unit's ``SELECT`` of a message (or any row it is about to
        judge and write): on PostgreSQL the row is locked to the unit's commit, and the
        unit reads it as the last process to commit left it. A unit that writes a
        message and its parts locks the message first, so two such units never deadlock.
        On SQLite the one writer already runs one unit at a time."""
        return " FOR UPDATE" if self.name == "postgresql" else ""

    def indexed_by(self, index: str) -> str:
        """Put after a table name in ``FROM``: the index SQLite must read it by. Without
        statistics (``ANALYZE`` is never run) SQLite may pick a wider index that holds
        the same rows in another order; PostgreSQL plans from its own statistics."""
        return "" if self.name == "postgresql" else f" INDEXED BY {index}"

    @property
    def by_rowid(self) -> str:
        """Put after a table name in ``UPDATE`` or ``FROM`` when the rows are given by
        ``id IN (...)``: SQLite then looks each up by its row id. Without statistics it
        may instead read every row of a state from an index (``state IN ('QUEUED',
        'RETRY')`` looks cheaper to it than a long ``IN`` list of ids)."""
        return "" if self.name == "postgresql" else " NOT INDEXED"

    @property
    def rows_a_statement(self) -> int:
        """The most rows a statement that writes (or looks up) many at once takes. On
        PostgreSQL each statement is a round trip: 500. On SQLite a statement costs
        nothing to send, but each distinct text is parsed (50-100 µs) unless the
        writer's statement cache holds it (:data:`appliance.store.schema.WRITER_STATEMENTS`):
        64, so the sizes a flood's batches come in are few enough to stay cached, and
        each statement kept is small (a 64-row insert of reports is ~80 KB)."""
        return 500 if self.name == "postgresql" else 64

    @property
    def is_postgresql(self) -> bool:
        return self.name == "postgresql"

    @property
    def incremental_blobs(self) -> bool:
        """Whether a blob can be written piece by piece into a ``zeroblob(n)`` (SQLite's
        ``blob_open``); PostgreSQL takes a ``BYTEA`` whole."""
        return self.name == "sqlite"


SQLITE: Final = Dialect("sqlite")
POSTGRESQL: Final = Dialect("postgresql")


def of(conn: Any) -> Dialect:
    """The dialect of a unit's connection."""
    return POSTGRESQL if getattr(conn, "dialect", None) is POSTGRESQL else SQLITE
