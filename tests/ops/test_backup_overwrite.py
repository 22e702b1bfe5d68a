"""``appliance backup DEST`` over an existing file: one of our backups (its manifest
beside it) is replaced, so a nightly job to one fixed name keeps working; anything else
is refused without ``--force``."""

from __future__ import annotations

import json
from pathlib import Path

from tests.harness import create_account, run_cli


def test_backup_replaces_its_own_backups_and_refuses_other_files_without_force(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    create_account(data)
    d = ("--data-dir", str(data))
    nightly = tmp_path / "nightly.db"
    run_cli("backup", *d, str(nightly))
    first = json.loads((tmp_path / "nightly.db.manifest.json").read_text())
    again = run_cli("backup", *d, str(nightly))  # the same fixed name, the next night
    assert again.stdout.strip().splitlines()[-1] == str(nightly)
    assert json.loads((tmp_path / "nightly.db.manifest.json").read_text())["sha256"] \
        == first["sha256"]

    notes = tmp_path / "notes.txt"
    notes.write_text("somebody's notes\n")
    refused = run_cli("backup", *d, str(notes), check=False)
    assert refused.returncode == 1 and "is not one of our backups" in refused.stderr
    assert "--force" in refused.stderr and notes.read_text() == "somebody's notes\n"
    # A manifest that is not ours, or names another file, does not make it ours.
    (tmp_path / "notes.txt.manifest.json").write_text(json.dumps({"file": "notes.txt"}))
    assert run_cli("backup", *d, str(notes), check=False).returncode == 1
    forced = run_cli("backup", *d, "--force", str(notes))
    assert forced.stdout.strip().splitlines()[-1] == str(notes)
    assert notes.read_bytes().startswith(b"SQLite format 3\x00")
    assert json.loads((tmp_path / "notes.txt.manifest.json").read_text())["file"] == "notes.txt"
