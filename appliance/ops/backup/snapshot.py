"""A consistent copy of the live database while it serves (APP-3).

The copy is taken with SQLite's online backup API from a connection that holds one
read transaction for the whole copy: in WAL mode a reader never blocks the writer,
and the pinned snapshot means the copy holds exactly what was committed when the
backup started (pages are copied in steps with short pauses, and the copy never
restarts because other connections commit meanwhile). The copy is written to a
temporary name beside the destination, switched to a single-file journal mode,
``PRAGMA integrity_check``-ed, fsynced and renamed into place; a manifest
(``DEST.manifest.json``) records the schema and app versions, the sha256, the time
and the row counts.

EDGE-5: a destination inside the data directory is refused (the live database, its
``-wal``/``-shm``/``-journal``, the lock file, anything else there), except in its
``backups/`` folder, so a slip of the keyboard cannot replace a live file. A
temporary copy left by a backup that was killed (``.NAME.tmp-PID``, an SQLite file
whose process is gone, and its journal) is removed by the next backup into the same
directory, manual or scheduled.

An existing file at the destination is replaced only when it is one of our backups
(its manifest beside it, :func:`is_our_backup`), so a nightly job writing to one fixed
name keeps working; anything else is refused unless ``force`` (``backup --force``): a
mistyped destination must not silently replace somebody's file.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from appliance import __version__
from appliance.clock import iso
from appliance.ops.backup.fsync import replace_durably, write_json_durably
from appliance.store.schema import user_version

log = logging.getLogger("appliance.backup")
MANIFEST_FORMAT = "appliance-backup/1"
BACKUPS_FOLDER = "backups"  # the one place inside the data dir that backups may go
_TEMPORARY = re.compile(r"^\..+\.tmp-(\d+)(-journal|-wal|-shm)?$")


class BackupFailed(RuntimeError):
    """The backup could not be taken; nothing was left at the destination."""


class BackupRefused(BackupFailed):
    """The destination is not a place for a backup (an operator's slip, not a failure)."""


@dataclass(frozen=True)
class BackupResult:
    path: Path
    manifest_path: Path
    manifest: dict[str, Any]
    seconds: float


def inside_data_dir(path: Path, data_dir: Path) -> bool:
    """Whether ``path`` (symlinks followed) is in ``data_dir`` but not in its backups/."""
    data = data_dir.resolve()
    target = path.absolute().resolve()
    if target != data and data not in target.parents:
        return False
    backups = (data_dir / BACKUPS_FOLDER).resolve()
    safe = backups != data and data in backups.parents and backups in target.parents
    return not safe


def remove_abandoned_temporaries(directory: Path) -> list[Path]:
    """Temporary copies left by a backup whose process died (killed mid-copy)."""
    gone: list[Path] = []
    try:
        candidates = list(directory.glob(".*.tmp-*"))
    except OSError:
        return gone
    for path in candidates:
        match = _TEMPORARY.match(path.name)
        if match is None or _alive(int(match.group(1))) or not path.is_file():
            continue
        if match.group(2) is None and not _sqlite_or_empty(path):
            continue  # not a copy of ours: another program's file of a similar name
        try:
            path.unlink()
        except OSError:
            continue
        log.info("removed an abandoned backup copy", extra={"path": str(path)})
        gone.append(path)
    return gone


def _sqlite_or_empty(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return head in (b"", b"SQLite format 3\x00")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def manifest_path_for(dest: Path) -> Path:
    return dest.with_name(dest.name + ".manifest.json")


def table_row_counts(conn: apsw.Connection) -> dict[str, int]:
    names = [str(r[0]) for r in conn.execute(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        " ORDER BY name")]
    counts: dict[str, int] = {}
    for name in names:
        quoted = '"' + name.replace('"', '""') + '"'
        row = conn.execute(f"SELECT count(*) FROM {quoted}").fetchone()
        counts[name] = int(row[0]) if row else 0
    return counts


def integrity_problems(conn: apsw.Connection, limit: int = 5) -> list[str]:
    """``[]`` when ``PRAGMA integrity_check`` says ok, else its first complaints."""
    rows = [str(r[0]) for r in conn.execute(f"PRAGMA integrity_check({limit})")]
    return [] if rows == ["ok"] else rows


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_snapshot(db_path: Path, tmp: Path, pages_per_step: int, pause_s: float) -> int:
    """Copy the committed state of ``db_path`` into ``tmp``; return its schema version."""
    try:
        src = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error as exc:
        raise BackupFailed(f"cannot open {db_path}: {exc}") from None
    try:
        src.set_busy_timeout(5000)
        # One read transaction for the whole copy: a fixed snapshot, and the backup
        # is not restarted by commits the writer makes meanwhile.
        src.execute("BEGIN")
        version = user_version(src)
        src.execute("SELECT count(*) FROM sqlite_schema").fetchone()
        dst = apsw.Connection(str(tmp))
        try:
            with dst.backup("main", src, "main") as step:
                while not step.done:
                    step.step(pages_per_step)
                    if not step.done and pause_s > 0:
                        time.sleep(pause_s)
            src.execute("COMMIT")
            # A backup is one self-contained file: no -wal beside it.
            dst.execute("PRAGMA journal_mode=DELETE").fetchone()
        finally:
            dst.close()
    except apsw.Error as exc:
        raise BackupFailed(f"copying {db_path} failed: {exc}") from None
    finally:
        src.close()
    return version


def is_our_backup(dest: Path) -> bool:
    """Whether ``dest`` is a backup this appliance wrote: its manifest is beside it, in
    our format, and names it."""
    try:
        manifest = json.loads(manifest_path_for(dest).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(manifest, dict) and manifest.get("format") == MANIFEST_FORMAT
            and manifest.get("file") == dest.name)


def take_backup(db_path: Path, dest: Path, now_ms: int, pages_per_step: int = 1024,
                pause_s: float = 0.002, force: bool = False) -> BackupResult:
    """Write a verified copy of the database at ``db_path`` to ``dest``; an existing
    ``dest`` is replaced only when it is one of our backups, or with ``force``."""
    started = time.perf_counter()
    if not db_path.is_file():
        raise BackupFailed(f"no database at {db_path} (is --data-dir right?)")
    dest = dest.absolute()
    if dest.is_dir():
        raise BackupRefused(f"{dest} is a directory; give a file name for the backup")
    if not dest.parent.is_dir():
        raise BackupRefused(f"directory {dest.parent} does not exist")
    if dest.resolve() == db_path.resolve():
        raise BackupRefused("the backup destination is the live database itself")
    if inside_data_dir(dest, db_path.parent):
        raise BackupRefused(
            f"{dest} is inside the data directory {db_path.parent.absolute()}, beside the live"
            f" files; write the backup elsewhere, or into {db_path.parent / BACKUPS_FOLDER}/")
    if (dest.exists() or dest.is_symlink()) and not force and not is_our_backup(dest):
        raise BackupRefused(
            f"{dest} exists and is not one of our backups (no"
            f" {manifest_path_for(dest).name} beside it); give another name, or --force to"
            " replace it")
    remove_abandoned_temporaries(dest.parent)
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    try:
        tmp.unlink(missing_ok=True)
        version = _copy_snapshot(db_path, tmp, pages_per_step, pause_s)
        check = apsw.Connection(str(tmp), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            problems = integrity_problems(check)
            if problems:
                raise BackupFailed(f"the copy failed integrity_check: {'; '.join(problems)}")
            counts = table_row_counts(check)
        finally:
            check.close()
        replace_durably(tmp, dest)
    except OSError as exc:
        raise BackupFailed(f"writing {dest} failed: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    manifest: dict[str, Any] = {
        "format": MANIFEST_FORMAT,
        "file": dest.name,
        "schema_version": version,
        "app_version": __version__,
        "sha256": sha256_file(dest),
        "bytes": dest.stat().st_size,
        "created_at": now_ms,
        "created_at_iso": iso(now_ms),
        "row_counts": counts,
    }
    manifest_path = manifest_path_for(dest)
    try:
        write_json_durably(manifest_path, manifest)
    except OSError as exc:
        raise BackupFailed(f"writing {manifest_path} failed: {exc.strerror or exc}") from None
    seconds = time.perf_counter() - started
    log.info("backup written", extra={"path": str(dest), "bytes": manifest["bytes"],
                                      "seconds": round(seconds, 3)})
    return BackupResult(dest, manifest_path, manifest, seconds)
