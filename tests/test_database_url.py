"""``database_url`` (SCALE-1): read from the file or APPLIANCE_DATABASE_URL, checked,
its password never printed; serve and the commands say plainly when it cannot be reached."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.config import ConfigError, mask_database_url
from appliance.provider_kinds import load_settings, masked
from tests.harness import run_cli

URL = "postgresql://app:s3cret-pw@db.example.org:5432/appliance"


def test_from_the_file_and_from_the_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "a.toml"
    cfg.write_text(f'database_url = "{URL}"\n')
    assert load_settings(cfg, env={}).database_url == URL
    other = "postgresql://x@h2/db2"
    assert load_settings(cfg, env={"APPLIANCE_DATABASE_URL": other}).database_url == other
    assert load_settings(env={}).database_url == ""  # absent: the SQLite file


@pytest.mark.parametrize(("url", "says"), [
    ("mysql://h/db", "is not a postgresql:// URL"),
    ("postgresql://h", "names no database"),
    ("postgresql:///db", "names no host"),
    ("postgresql://u:pw@h:99999/db", "not a valid URL"),
    ("postgresql://u:pw@h/my db", "white space"),
])
def test_a_bad_url_is_one_clear_line_without_its_password(url: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        load_settings(env={"APPLIANCE_DATABASE_URL": url})
    assert str(caught.value).startswith("database_url: ")
    assert "pw" not in str(caught.value).replace("postgresql", "")


def test_socket_and_query_forms_are_accepted() -> None:
    for url in ("postgresql:///appliance?host=/var/run/postgresql",
                "postgres://u@h/db?sslmode=require&password=x"):
        assert load_settings(env={"APPLIANCE_DATABASE_URL": url}).database_url == url


def test_the_password_is_masked() -> None:
    assert mask_database_url(URL) == "postgresql://app:***@db.example.org:5432/appliance"
    assert mask_database_url("postgresql://u@h/db?sslmode=require&password=x") == \
        "postgresql://u@h/db?sslmode=require&password=***"
    shown = masked(load_settings(env={"APPLIANCE_DATABASE_URL": URL}))
    assert shown["database_url"] == "postgresql://app:***@db.example.org:5432/appliance"
    assert "s3cret" not in repr(shown)


def test_config_check_masks_it_and_serve_says_it_cannot_reach_it(tmp_path: Path) -> None:
    env = {"APPLIANCE_DATABASE_URL": URL}
    data = str(tmp_path / "data")
    out = run_cli("config", "check", "--data-dir", data, env=env)
    assert json.loads(out.stdout)["database_url"] == \
        "postgresql://app:***@db.example.org:5432/appliance"
    assert "s3cret" not in out.stdout + out.stderr
    serve = run_cli("serve", "--data-dir", data, "--port", "0", env=env, check=False)
    assert serve.returncode == 1
    assert "the database: failed to resolve host 'db.example.org'" in serve.stderr
    assert "Traceback" not in serve.stderr and "s3cret" not in serve.stderr
    account = run_cli("account", "create", "x", "--data-dir", data, env=env, check=False)
    assert account.returncode == 1 and "the database: " in account.stderr
    assert not (tmp_path / "data" / "appliance.db").exists()  # not quietly on SQLite


def test_backup_points_to_postgresqls_own(tmp_path: Path) -> None:
    out = run_cli("backup", str(tmp_path / "b.db"), "--data-dir", str(tmp_path / "data"),
                  env={"APPLIANCE_DATABASE_URL": URL}, check=False)
    assert out.returncode == 1
    assert "backups are its own" in out.stderr and "pg_dump" in out.stderr
    assert "docs/operations.md" in out.stderr
