"""EDGE-5: a backup or restore pointed into the data dir is refused; the data stays whole.

Against a serving appliance: ``backup DATA/appliance.db-wal`` used to replace the
live WAL (losing committed rows at the next start) and ``backup DATA/appliance.lock``
let a second server start on the same data dir.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import httpx
import pytest

from tests.harness import Server, create_account, db_rows, run_cli, wait_for


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"


@pytest.fixture
def serving(data_dir: Path) -> tuple[Server, httpx.Client]:
    srv = Server(data_dir).start()
    api = srv.client(create_account(data_dir))
    accepted = api.post("/api/contacts/import?list=keep",
                        content=b"+905321234567\n+905329876543\n",
                        headers={"Content-Type": "text/plain"})
    assert accepted.status_code == 202
    wait_for(lambda: api.get(accepted.json()["poll"]).json()["state"] == "DONE", 20)
    return srv, api


def live_files(data_dir: Path) -> dict[str, tuple[int, str]]:
    """Each file's inode (a replaced file is a new one) and, but for the WAL and the
    shared memory that commits change, its content."""
    return {p.name: (p.stat().st_ino, "" if p.name.endswith(("-wal", "-shm")) else digest(p))
            for p in data_dir.iterdir() if p.is_file()}


def test_a_backup_into_the_data_dir_is_refused_and_the_live_files_stay(
        serving: tuple[Server, httpx.Client], data_dir: Path) -> None:
    srv, api = serving
    try:
        (data_dir / "sub").mkdir()
        (data_dir / "sub-link").symlink_to(data_dir)
        for target in ("appliance.db-wal", "appliance.db-shm", "appliance.lock",
                       "backup-status.json", "new-file.db", "sub/dir.db",
                       "sub-link/appliance.db-wal", "../data/appliance.db-wal"):
            before = live_files(data_dir)
            done = run_cli("backup", str(data_dir / target), "--data-dir", str(data_dir),
                           check=False)
            assert done.returncode == 1, target
            assert "inside the data directory" in done.stderr, done.stderr
            assert live_files(data_dir) == before, target
            assert api.get("/readyz").status_code == 200
        # The committed import is whole after a restart: nothing replaced the WAL.
        srv.stop()
        again = Server(data_dir).start()
        try:
            with again.client(api.headers["Authorization"].split(" ", 1)[1]) as fresh:
                assert fresh.get("/api/lists/keep").json()["contacts"] == 2
        finally:
            again.stop()
    finally:
        api.close()
        srv.stop()


def test_a_second_server_cannot_start_after_a_refused_lock_backup(
        serving: tuple[Server, httpx.Client], data_dir: Path) -> None:
    srv, api = serving
    try:
        run_cli("backup", str(data_dir / "appliance.lock"), "--data-dir", str(data_dir),
                check=False)
        second = Server(data_dir)
        second.start(wait=False)
        assert second.proc is not None
        assert second.proc.wait(30) != 0
        assert "in use by a running appliance" in second.log()
    finally:
        api.close()
        srv.stop()


def test_backups_may_go_into_the_backups_folder_and_restore_refuses_live_files(
        serving: tuple[Server, httpx.Client], data_dir: Path, tmp_path: Path) -> None:
    srv, api = serving
    try:
        (data_dir / "backups").mkdir()
        inside = data_dir / "backups" / "manual.db"
        assert run_cli("backup", str(inside), "--data-dir", str(data_dir)).returncode == 0
        outside = tmp_path / "outside.db"
        run_cli("backup", str(outside), "--data-dir", str(data_dir))
    finally:
        api.close()
        srv.stop()
    for src in ("appliance.lock", "appliance.db", "backup-status.json"):
        done = run_cli("restore", str(data_dir / src), "--data-dir", str(data_dir), check=False)
        assert done.returncode != 0 and "restore refused" in done.stderr, done.stderr
    assert db_rows(data_dir, "SELECT count(*) FROM contacts") == [(2,)]
    assert run_cli("restore", str(inside), "--data-dir", str(data_dir)).returncode == 0
    assert run_cli("restore", str(outside), "--data-dir", str(data_dir)).returncode == 0
    assert db_rows(data_dir, "SELECT count(*) FROM contacts") == [(2,)]


def test_a_backup_dir_inside_the_data_dir_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    data = tmp_path / "data"
    config.write_text(f'[backup]\ninterval_hours = 1\ndir = "{data}"\n')
    done = run_cli("config", "check", "--config", str(config), "--data-dir", str(data),
                   check=False)
    assert done.returncode == 2 and "[backup] dir" in done.stderr
    config.write_text(f'[backup]\ninterval_hours = 1\ndir = "{data / "backups"}"\n')
    assert run_cli("config", "check", "--config", str(config), "--data-dir", str(data)
                   ).returncode == 0
