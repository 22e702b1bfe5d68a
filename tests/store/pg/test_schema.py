"""The schema on PostgreSQL: the same tables as on SQLite, table by table; versioned;
created once when several processes start together."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import apsw
import pytest

from appliance.store.errors import NotAnApplianceDatabase
from appliance.store.pg import PgConnection
from appliance.store.pg_schema import (
    VERSION_TABLE,
    migrate,
    user_tables,
    version,
)
from appliance.store.schema import SCHEMA_VERSION, SchemaTooNew, open_connection
from appliance.store.schema import migrate as migrate_sqlite

TYPES = {"INTEGER": "bigint", "TEXT": "text", "BLOB": "bytea", "REAL": "double precision"}

Shape = dict[str, Any]


def _default(value: Any) -> str | None:
    if value is None:
        return None
    text = re.sub(r"::[a-z ]+$", "", str(value))
    return text


def sqlite_shape(conn: apsw.Connection) -> dict[str, Shape]:
    shape: dict[str, Shape] = {}
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
    for t in tables:
        cols = []
        pk: list[tuple[int, str]] = []
        for _cid, name, typ, notnull, dflt, pkpos in conn.execute(f"PRAGMA table_info({t})"):
            cols.append((name, TYPES[typ], bool(notnull) or pkpos > 0, _default(dflt)))
            if pkpos:
                pk.append((int(pkpos), str(name)))
        uniques, indexes = set(), {}
        for _seq, iname, unique, origin, _partial in conn.execute(f"PRAGMA index_list({t})"):
            columns = tuple(r[2] for r in conn.execute(f"PRAGMA index_info({iname})"))
            if origin == "c":
                indexes[iname] = (columns, bool(unique))
            elif origin == "u":
                uniques.add(columns)
        fks = {(r[3], r[2], r[4]) for r in conn.execute(f"PRAGMA foreign_key_list({t})")}
        shape[t] = {"columns": cols, "pk": tuple(n for _p, n in sorted(pk)),
                    "uniques": uniques, "indexes": indexes, "fks": fks}
    return shape


def pg_shape(conn: PgConnection) -> dict[str, Shape]:
    shape: dict[str, Shape] = {}
    for t in user_tables(conn):
        if t == VERSION_TABLE:
            continue
        cols = [(name, typ, nullable == "NO", _default(dflt))
                for name, typ, nullable, dflt in conn.execute(
                    "SELECT column_name, data_type, is_nullable, column_default"
                    " FROM information_schema.columns WHERE table_schema = current_schema()"
                    " AND table_name = ? ORDER BY ordinal_position", (t,))]
        uniques, indexes = set(), {}
        pk: tuple[str, ...] = ()
        for iname, unique, primary, constraint, columns in conn.execute(
                "SELECT i.relname, x.indisunique, x.indisprimary,"
                " EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = x.indexrelid),"
                " array_to_string(ARRAY(SELECT a.attname FROM unnest(x.indkey)"
                "   WITH ORDINALITY k(attnum, ord)"
                "   JOIN pg_attribute a ON a.attrelid = x.indrelid AND a.attnum = k.attnum"
                "   ORDER BY k.ord), ',')"
                " FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid"
                " WHERE x.indrelid = to_regclass(?)", (t,)):
            cols_t = tuple(str(columns).split(","))
            if primary:
                pk = cols_t
            elif constraint:
                uniques.add(cols_t)
            else:
                indexes[iname] = (cols_t, bool(unique))
        fks = set()
        for ref_table, from_col, to_col in conn.execute(
                "SELECT cf.relname, a.attname, af.attname FROM pg_constraint c"
                " JOIN pg_class cf ON cf.oid = c.confrelid"
                " JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = c.conkey[1]"
                " JOIN pg_attribute af ON af.attrelid = c.confrelid AND af.attnum = c.confkey[1]"
                " WHERE c.contype = 'f' AND c.conrelid = to_regclass(?)", (t,)):
            fks.add((from_col, ref_table, to_col))
        shape[t] = {"columns": cols, "pk": pk, "uniques": uniques, "indexes": indexes,
                    "fks": fks}
    return shape


@pytest.fixture
def sqlite_db(tmp_path: Path) -> apsw.Connection:
    path = str(tmp_path / "s.db")
    migrate_sqlite(path)
    return open_connection(path)


def test_postgresql_has_the_same_tables_column_by_column(sqlite_db: apsw.Connection,
                                                         pg_conn: PgConnection) -> None:
    assert migrate(pg_conn) == SCHEMA_VERSION
    lite, pg = sqlite_shape(sqlite_db), pg_shape(pg_conn)
    assert sorted(pg) == sorted(lite)
    for table in lite:
        assert pg[table]["columns"] == lite[table]["columns"], table
        assert pg[table]["pk"] == lite[table]["pk"], table
        assert pg[table]["uniques"] == lite[table]["uniques"], table
        assert pg[table]["indexes"] == lite[table]["indexes"], table
        assert pg[table]["fks"] == lite[table]["fks"], table


def test_row_ids_are_identities_and_times_are_bigint(pg_conn: PgConnection) -> None:
    migrate(pg_conn)
    identities = {r[0] for r in pg_conn.execute(
        "SELECT table_name FROM information_schema.columns WHERE is_identity = 'YES'")}
    assert {"messages", "contacts", "import_jobs", "report_inbox"} <= identities
    assert "import_payloads" not in identities
    narrow = pg_conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND data_type IN ('integer', 'smallint')"
    ).fetchall()
    assert narrow == []


def test_migrate_is_idempotent_and_refuses_a_newer_database(pg_conn: PgConnection) -> None:
    assert version(pg_conn) == 0
    assert migrate(pg_conn) == SCHEMA_VERSION
    assert migrate(pg_conn) == SCHEMA_VERSION
    assert version(pg_conn) == SCHEMA_VERSION
    pg_conn.execute(f"UPDATE {VERSION_TABLE} SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(SchemaTooNew, match="newer appliance"):
        migrate(pg_conn)


def test_a_database_with_other_tables_is_refused(pg_conn: PgConnection) -> None:
    pg_conn.execute("CREATE TABLE theirs (x BIGINT)")
    with pytest.raises(NotAnApplianceDatabase, match="theirs"):
        migrate(pg_conn)
    assert user_tables(pg_conn) == ["theirs"]  # nothing of ours was left behind


def test_processes_starting_together_create_the_schema_once(pg_url: str) -> None:
    results: list[Any] = []

    def start() -> None:
        conn = PgConnection.connect(pg_url)
        try:
            results.append(migrate(conn))
        except BaseException as exc:
            results.append(exc)
        finally:
            conn.close()

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [SCHEMA_VERSION] * 4
    conn = PgConnection.connect(pg_url)
    assert conn.execute(f"SELECT count(*) FROM {VERSION_TABLE}").fetchone() == (1,)
    conn.close()
