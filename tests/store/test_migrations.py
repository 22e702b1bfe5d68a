"""A version 1 file is brought to the current schema, the same as a new file."""

from __future__ import annotations

from pathlib import Path

from appliance.store.schema import SCHEMA_VERSION, migrate, open_connection


def _columns(path: str) -> dict[str, list[str]]:
    conn = open_connection(path)
    try:
        tables = [str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
        return {t: sorted(str(r[1]) for r in conn.execute(f'PRAGMA table_info("{t}")'))
                for t in tables}
    finally:
        conn.close()


def test_a_version_1_database_migrates_to_the_current_schema(tmp_path: Path) -> None:
    fresh = str(tmp_path / "fresh.db")
    migrate(fresh)
    old = str(tmp_path / "old.db")
    migrate(old)
    conn = open_connection(old)
    # Version 1, as it was: no deleted lists, no re-runs; with a row in each table.
    conn.execute("ALTER TABLE lists DROP COLUMN deleted_at")
    conn.execute("ALTER TABLE import_jobs DROP COLUMN rerun_of")
    conn.execute("INSERT INTO accounts (name, created_at) VALUES ('a', 0)")
    conn.execute("INSERT INTO lists (account_id, name, created_at) VALUES (1, 'l', 0)")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    assert migrate(old) == SCHEMA_VERSION == 2
    assert _columns(old) == _columns(fresh)
    conn = open_connection(old)
    assert conn.execute("SELECT name, deleted_at FROM lists").fetchall() == [("l", None)]
    conn.close()
