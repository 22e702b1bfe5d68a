"""Restoring a backup into a data directory (server stopped).

The steps never leave a half-restored directory:

1. take the data-dir lock (a running server holds it: refuse);
2. copy the backup into the data dir under a temporary name and fsync it;
3. validate the copy: an SQLite file, ``PRAGMA integrity_check`` ok, our schema (a
   known ``user_version`` and our tables; a newer schema is refused), and the
   manifest's sha256 when a manifest lies beside the source;
4. write ``restore.pending`` (a server refuses to start while it exists), fold the
   current database's WAL into it and keep it aside as
   ``appliance.db.pre-restore-<time>`` (a hard link: the live name never goes missing);
5. rename the copy over ``appliance.db``, fsync the directory, remove the marker.

The database kept aside is removed by the next start that opens the restored one
and writes to it (see :func:`remove_kept_aside`).

EDGE-5: a source inside the data directory is refused (the live files, the lock,
anything else there) except a backup in its ``backups/`` folder or a database an
earlier restore kept aside (``appliance.db.pre-restore-*``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import apsw

from appliance.ops.backup.fsync import fsync_dir, fsync_file, write_json_durably
from appliance.ops.backup.snapshot import (
    inside_data_dir,
    integrity_problems,
    manifest_path_for,
    sha256_file,
    table_row_counts,
)
from appliance.store.lock import DataDirLock, DataDirLocked
from appliance.store.schema import SCHEMA_VERSION, user_version

log = logging.getLogger("appliance.restore")
DB_NAME = "appliance.db"
MARKER = "restore.pending"
ASIDE_INFIX = ".pre-restore-"
REQUIRED_TABLES = ("accounts", "api_keys", "lists", "contacts", "import_jobs", "messages",
                   "report_inbox", "appliance_state")
SQLITE_MAGIC = b"SQLite format 3\x00"


class RestoreRefused(RuntimeError):
    """The restore did not happen; the data directory is as it was."""


@dataclass(frozen=True)
class RestoreResult:
    db_path: Path
    kept_aside: Path | None
    schema_version: int
    row_counts: dict[str, int]


def validate_database(path: Path, label: str) -> tuple[int, dict[str, int]]:
    """Check that ``path`` is an intact appliance database this build can open."""
    with open(path, "rb") as fh:
        if fh.read(16) != SQLITE_MAGIC:
            raise RestoreRefused(f"{label} is not an SQLite database")
    try:
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)
    except apsw.Error as exc:
        raise RestoreRefused(f"{label} cannot be opened: {exc}") from None
    try:
        try:
            problems = integrity_problems(conn)
        except apsw.Error as exc:
            raise RestoreRefused(f"{label} is damaged: {exc}") from None
        if problems:
            raise RestoreRefused(f"{label} failed integrity_check: {'; '.join(problems)}")
        version = user_version(conn)
        if version > SCHEMA_VERSION:
            raise RestoreRefused(
                f"{label} has schema version {version}, newer than this appliance"
                f" ({SCHEMA_VERSION}); restore it with a newer appliance")
        tables = {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table'")}
        missing = [t for t in REQUIRED_TABLES if t not in tables]
        if version < 1 or missing:
            raise RestoreRefused(f"{label} is not an appliance database"
                                 f" (missing tables: {', '.join(missing) or 'none'};"
                                 f" schema version {version})")
        counts = table_row_counts(conn)
        # The restored file is one self-contained file until the server opens it.
        conn.execute("PRAGMA journal_mode=DELETE").fetchone()
    except apsw.Error as exc:
        raise RestoreRefused(f"{label} is damaged: {exc}") from None
    finally:
        conn.close()
    return version, counts


def _check_manifest(src: Path) -> None:
    manifest_path = manifest_path_for(src)
    if not manifest_path.is_file():
        return
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        expected = str(manifest["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        raise RestoreRefused(f"{manifest_path} is not a readable backup manifest") from None
    actual = sha256_file(src)
    if actual != expected:
        raise RestoreRefused(f"{src} does not match its manifest (sha256 {actual[:12]}…,"
                             f" manifest says {expected[:12]}…): the file changed or is"
                             " incomplete")


def _fold_wal(db: Path) -> bool:
    """Checkpoint the current database so it is one file; False if it cannot."""
    try:
        conn = apsw.Connection(str(db), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            conn.execute("PRAGMA journal_mode=DELETE").fetchone()
        finally:
            conn.close()
    except apsw.Error as exc:
        log.warning("cannot checkpoint the current database: %s", exc)
        return False
    return not Path(str(db) + "-wal").exists()


def _refuse_inside(src: Path, data_dir: Path) -> None:
    if not inside_data_dir(src, data_dir):
        return
    resolved = src.absolute().resolve()
    if resolved.parent == data_dir.resolve() and resolved.name.startswith(DB_NAME + ASIDE_INFIX) \
            and not resolved.name.endswith(("-wal", "-shm", "-journal")):
        return  # what an earlier restore kept aside: restoring it undoes that restore
    raise RestoreRefused(f"{src} is inside the data directory {data_dir} (a live file, not a"
                         " backup); restore from a backup elsewhere or in its backups/ folder")


def restore(src: Path, data_dir: Path) -> RestoreResult:
    """Replace the database in ``data_dir`` with the backup ``src``."""
    if not src.is_file():
        raise RestoreRefused(f"{src}: no such backup file")
    if data_dir.exists():
        _refuse_inside(src, data_dir)
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RestoreRefused(f"data dir {data_dir}: {exc.strerror}") from None
    lock = DataDirLock(data_dir)
    try:
        lock.acquire()
    except DataDirLocked as exc:
        raise RestoreRefused(f"{exc}; stop the server before restoring") from None
    try:
        return _restore_locked(src, data_dir)
    finally:
        lock.release()


def _restore_locked(src: Path, data_dir: Path) -> RestoreResult:
    db = data_dir / DB_NAME
    if db.exists() and db.resolve() == src.resolve():
        raise RestoreRefused(f"{src} is the live database itself")
    _check_manifest(src)
    tmp = data_dir / f".restore-{os.getpid()}.db"
    try:
        try:
            shutil.copyfile(src, tmp)
            fsync_file(tmp)
        except OSError as exc:
            raise RestoreRefused(f"copying {src} into {data_dir} failed: {exc.strerror}") from None
        version, counts = validate_database(tmp, str(src))
        for suffix in ("-wal", "-shm", "-journal"):
            Path(str(tmp) + suffix).unlink(missing_ok=True)
        fsync_file(tmp)

        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside: Path | None = None
        marker = data_dir / MARKER
        write_json_durably(marker, {"source": str(src.absolute()), "started": stamp})
        if db.exists():
            aside = data_dir / f"{DB_NAME}{ASIDE_INFIX}{stamp}"
            n = 1
            while aside.exists() or Path(str(aside) + "-wal").exists():
                n += 1  # a second restore within the same second
                aside = data_dir / f"{DB_NAME}{ASIDE_INFIX}{stamp}-{n}"
            wal = Path(str(db) + "-wal")
            if not _fold_wal(db) and wal.exists():
                # A damaged database: keep its WAL with it, under the same new name.
                os.link(wal, str(aside) + "-wal")
            os.link(db, aside)
            for suffix in ("-wal", "-shm", "-journal"):
                Path(str(db) + suffix).unlink(missing_ok=True)
        os.replace(tmp, db)
        fsync_dir(data_dir)
        marker.unlink()
        fsync_dir(data_dir)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("restored", extra={"source": str(src), "kept_aside": str(aside or "")})
    return RestoreResult(db, aside, version, counts)


def pending_restore(data_dir: Path) -> str | None:
    """A one-line refusal when an interrupted restore left its marker, else None."""
    marker = data_dir / MARKER
    if not marker.exists():
        return None
    return (f"an interrupted restore left {marker}: run `appliance restore SRC` again"
            " (the previous database is kept as appliance.db.pre-restore-*)")


def kept_aside(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob(f"{DB_NAME}{ASIDE_INFIX}*"))


def remove_kept_aside(data_dir: Path) -> list[Path]:
    """After a good start on a restored database, drop what restore kept aside."""
    gone = kept_aside(data_dir)
    for path in gone:
        path.unlink(missing_ok=True)
    if gone:
        log.info("removed the database kept aside by restore",
                 extra={"files": [p.name for p in gone]})
    return gone
