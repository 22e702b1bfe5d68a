"""The commands with ``database_url`` set (SCALE-1): what runs on PostgreSQL, and what
refuses plainly rather than run half on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.harness import create_account, run_cli


def test_commands_work_on_postgresql_and_leave_the_data_dir_without_a_database(
        tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("APPLIANCE_DATABASE_URL", pg_url)
    data = tmp_path / "data"
    key = create_account(data)
    listed = run_cli("key", "list", "--account", "acme", "--data-dir", str(data))
    assert key[:8] in listed.stdout
    doctor = run_cli("doctor", "--data-dir", str(data), check=False)
    assert doctor.returncode in (0, 1), doctor.stderr  # 1: an alert holds
    assert "coverage" in doctor.stdout.lower()
    restore = run_cli("restore", str(tmp_path / "x.db"), "--data-dir", str(data),
                      check=False)
    assert restore.returncode == 1 and "pg_dump" in restore.stderr
    assert not (data / "appliance.db").exists()  # nothing quietly on SQLite
