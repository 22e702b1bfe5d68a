"""A backup killed half-way never leaves a file at its destination; its temporary
copy is cleared by the next backup into that directory, manual or scheduled."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import apsw

from appliance.ops.backup.schedule import prune_backups
from appliance.ops.backup.snapshot import remove_abandoned_temporaries
from tests.harness import appliance_cmd, create_account, run_cli, wait_for


def test_kill_9_mid_backup_leaves_nothing_at_the_destination(tmp_path: Path,
                                                             data_dir: Path) -> None:
    create_account(data_dir)
    conn = apsw.Connection(str(data_dir / "appliance.db"))
    conn.execute("CREATE TABLE ballast (b BLOB)")
    with conn:
        for _ in range(60):
            conn.execute("INSERT INTO ballast VALUES (randomblob(1000000))")
    conn.close()
    dest = tmp_path / "out" / "b.db"
    dest.parent.mkdir()
    proc = subprocess.Popen(appliance_cmd("backup", str(dest), "--data-dir", str(data_dir)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: list(dest.parent.glob(".b.db.tmp-*")), 30, interval=0.002,
             message="the temporary copy to appear")
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert not dest.exists() and not Path(str(dest) + ".manifest.json").exists()
    left = list(dest.parent.glob(".b.db.tmp-*"))
    assert left, "the kill came after the rename; the test proves nothing"
    # The live database is untouched, and the next manual backup works and clears the
    # copy the killed one left behind.
    run_cli("backup", str(dest), "--data-dir", str(data_dir))
    assert dest.exists()
    assert not list(dest.parent.glob(".b.db.tmp-*"))


def test_only_dead_processes_temporaries_and_the_oldest_backups_go(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    mine = tmp_path / f".appliance-1.db.tmp-{os.getpid()}"
    theirs = tmp_path / f".appliance-2.db.tmp-{dead.pid}"
    journal = tmp_path / f".appliance-2.db.tmp-{dead.pid}-journal"
    odd = tmp_path / ".appliance-3.db.tmp-notapid"
    other = tmp_path / f".notes.txt.tmp-{dead.pid}"  # another program's file: not ours
    for p in (mine, theirs, journal, odd):
        p.write_bytes(b"SQLite format 3\x00" + b"x" * 100)
    other.write_text("someone else's")
    assert sorted(remove_abandoned_temporaries(tmp_path)) == [theirs, journal]
    assert mine.exists() and odd.exists() and other.exists()
    names = [f"appliance-2026010{i}T000000000Z.db" for i in range(1, 6)]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
        (tmp_path / (name + ".manifest.json")).write_text("{}")
        time.sleep(0.001)
    (tmp_path / "manual.db").write_bytes(b"x")
    gone = prune_backups(tmp_path, keep=2)
    assert [p.name for p in gone] == names[:3]
    left = sorted(p.name for p in tmp_path.glob("*.db"))
    assert left == sorted([*names[3:], "manual.db"])
    assert sorted(p.name for p in tmp_path.glob("*.manifest.json")) == [
        n + ".manifest.json" for n in names[3:]]
    assert prune_backups(tmp_path, keep=0) == []  # 0 keeps everything
