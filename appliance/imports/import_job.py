"""Import jobs in the store: creating one idempotently, reading it, advancing it.

Every function here is a read unit or a write unit (a function of an apsw
connection). How a parsed part of a job advances it is
:func:`appliance.imports.apply_window.apply_parsed`. :func:`rerun_job` (IMP-11) makes a
new job over a finished job's stored payload (copied inside the database, never through
Python), so the current parser reads it again, into the same list or another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.owner import OWNER, dead_owners
from appliance.store.rows import as_bytes, as_int
from appliance.store.singleton import one_at_a_time

ACTIVE_STATES = ("DRAFT", "RUNNING")
JOB_COLUMNS = (
    "j.id, j.account_id, l.name, j.list_id, j.state, j.region, j.total, j.processed,"
    " j.text_offset, j.inserted, j.duplicates_in_paste, j.duplicates_in_list, j.rejected,"
    " j.blank, j.header_skipped, j.error, j.created_at, j.started_at, j.finished_at,"
    " j.updated_at, j.payload_pruned_at, j.rerun_of, j.window_to, j.window_done, j.window_lines"
)


class IdempotencyConflict(ValueError):
    """The idempotency key was used before with another payload."""


class JobMoved(RuntimeError):
    """The job's position was not where this worker expected: someone else moved it."""


class JobStillRunning(ValueError):
    """The job has not finished: it cannot be re-run yet."""


class PayloadPruned(LookupError):
    """The job's stored payload was removed by retention (IMP-10) at ``pruned_at``."""

    def __init__(self, job_id: int, pruned_at: int) -> None:
        super().__init__(f"the stored payload of job {job_id} was pruned")
        self.job_id = job_id
        self.pruned_at = pruned_at


class ListBeingDeleted(ValueError):
    """The list's contacts are being deleted; it cannot take an import until that ends."""


@dataclass(frozen=True)
class ImportJob:
    id: int
    account_id: int
    list_name: str
    list_id: int
    state: str
    region: str
    total: int
    processed: int
    text_offset: int
    inserted: int
    duplicates_in_paste: int
    duplicates_in_list: int
    rejected: int
    blank: int
    header_skipped: int
    error: str | None
    created_at: int
    started_at: int | None
    finished_at: int | None
    updated_at: int
    payload_pruned_at: int | None
    rerun_of: int | None = None
    # A window part-way (see schema.sql): its end line, its numbers in, its lines done.
    window_to: int | None = None
    window_done: int = 0
    window_lines: int = 0

    @property
    def duplicates(self) -> int:
        return self.duplicates_in_paste + self.duplicates_in_list

    @property
    def resume_line(self) -> int:
        """The line after which parsing resumes (at ``text_offset``): the start of the
        window part-way, else ``processed``."""
        return self.processed - self.window_lines

    @property
    def entries_seen(self) -> int:
        """Non-blank lines before :attr:`resume_line` (header detection looks at the
        first one). A window's blank lines are counted when it ends, so ``blank`` holds
        only those before it."""
        return self.resume_line - self.blank


@dataclass(frozen=True)
class NewJob:
    account_id: int
    list_name: str
    region: str
    idempotency_key: str
    payload: bytes
    content_type: str
    total: int
    payload_sha256: str = ""  # computed from payload when not given
    # The payload as the pieces it arrived in, instead of ``payload`` (then b""): stored
    # piece by piece, so a large body is never joined into one more copy.
    pieces: tuple[bytes, ...] = ()

    def __post_init__(self) -> None:
        if not self.payload_sha256:
            whole = self.payload or b"".join(self.pieces)
            object.__setattr__(self, "payload_sha256", payload_sha256(whole))


def _job(row: Any) -> ImportJob:
    return ImportJob(*row)


def payload_sha256(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def default_idempotency_key(account_id: int, payload: bytes | str) -> str:
    """A key from the account and a payload hash (the console hashes its own scope in).

    ``payload`` is the raw bytes or their sha256 hex digest (already computed).
    """
    digest = payload_sha256(payload) if isinstance(payload, bytes) else payload
    return "sha256:" + hashlib.sha256(f"{account_id}:{digest}".encode()).hexdigest()


def fallback_idempotency_key(account_id: int, list_name: str, region: str, digest: str) -> str:
    """The key of a submission sent without ``Idempotency-Key``.

    It covers the account, the list, the region and the payload (its sha256 hex
    digest), so the same file sent again to the same list is the same job, and the
    same file sent to another list or region is a new one.
    """
    scope = "\0".join((str(account_id), list_name, region, digest))
    return "auto:" + hashlib.sha256(scope.encode("utf-8")).hexdigest()


def ensure_list(conn: Connection, account_id: int, name: str, now_ms: int) -> int:
    """The id of the account's list ``name``, created if missing; a deleted list of that
    name comes back (empty) once its contacts are gone."""
    conn.execute(
        "INSERT INTO lists (account_id, name, created_at) VALUES (?, ?, ?)"
        " ON CONFLICT (account_id, name) DO NOTHING",
        (account_id, name, now_ms),
    )
    row = conn.execute(
        "SELECT id, deleted_at FROM lists WHERE account_id = ? AND name = ?",
        (account_id, name),
    ).fetchone()
    assert row is not None
    list_id = as_int(row[0])
    if row[1] is not None:
        left = conn.execute("SELECT 1 FROM contacts WHERE list_id = ? LIMIT 1",
                            (list_id,)).fetchone()
        if left is not None:
            raise ListBeingDeleted(f"the list {name!r} is being deleted; try again in a moment")
        conn.execute("UPDATE lists SET deleted_at = NULL, created_at = ? WHERE id = ?",
                     (now_ms, list_id))
    return list_id


def create_job(conn: Connection, new: NewJob, now_ms: int) -> tuple[ImportJob, bool]:
    """Write unit: the job for this submission, and whether it was created now.

    The same key with the same payload, list and region returns the existing job; the
    same key with anything else raises :class:`IdempotencyConflict`.
    """
    digest = new.payload_sha256
    same = _same_submission(conn, new.account_id, new.idempotency_key, digest,
                            new.list_name, new.region)
    if same is not None:
        return same, False
    list_id = ensure_list(conn, new.account_id, new.list_name, now_ms)
    conn.execute(
        "INSERT INTO import_jobs (account_id, list_id, idempotency_key, payload_sha256, region,"
        " state, total, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 'DRAFT', ?, ?, ?)",
        (new.account_id, list_id, new.idempotency_key, digest, new.region, new.total,
         now_ms, now_ms),
    )
    job_id = conn.last_insert_rowid()
    if not new.pieces or not dialect.of(conn).incremental_blobs:
        conn.execute(
            "INSERT INTO import_payloads (job_id, content_type, body, received_at)"
            " VALUES (?, ?, ?, ?)",
            (job_id, new.content_type, new.payload if not new.pieces
             else b"".join(new.pieces), now_ms),
        )
    else:
        conn.execute(
            "INSERT INTO import_payloads (job_id, content_type, body, received_at)"
            " VALUES (?, ?, zeroblob(?), ?)",
            (job_id, new.content_type, sum(len(p) for p in new.pieces), now_ms),
        )
        blob = conn.blob_open(  # type: ignore[attr-defined]  # SQLite only
            "main", "import_payloads", "body", job_id, True)
        try:
            for piece in new.pieces:
                blob.write(piece)
        finally:
            blob.close()
    job = get_job(conn, job_id, new.account_id)
    assert job is not None
    return job, True


def _same_submission(conn: Connection, account_id: int, key: str, digest: str,
                     list_name: str, region: str) -> ImportJob | None:
    """The job already made under ``key``, if it is this very submission; a key used
    for another submission raises :class:`IdempotencyConflict`.

    With several processes, the same key sent to two at once: the second waits here
    for the first's unit (to its commit), then finds its job, as a retry after it would.
    """
    one_at_a_time(conn, f"idempotency:import_jobs:{account_id}:{key}")
    found = conn.execute(
        "SELECT j.id, j.payload_sha256, l.name, j.region FROM import_jobs j"
        " JOIN lists l ON l.id = j.list_id WHERE j.account_id = ? AND j.idempotency_key = ?",
        (account_id, key),
    ).fetchone()
    if found is None:
        return None
    if (found[1], found[2], found[3]) != (digest, list_name, region):
        raise IdempotencyConflict(
            "this Idempotency-Key was already used for a different submission"
            f" (job {as_int(found[0])}); use a new key for a new list"
        )
    job = get_job(conn, as_int(found[0]), account_id)
    assert job is not None
    return job


def rerun_job(conn: Connection, source_id: int, account_id: int, list_name: str | None,
              idempotency_key: str, now_ms: int) -> tuple[ImportJob, bool]:
    """Write unit (IMP-11): a new job over the stored payload of finished job
    ``source_id``, into ``list_name`` (default: the source's list) with the source's
    region; the worker parses it with the current parser. Returns (job, created now).

    Raises ``LookupError`` (no such job of this account), :class:`JobStillRunning`,
    :class:`PayloadPruned` (with the time retention removed it).
    """
    source = get_job(conn, source_id, account_id)
    if source is None:
        raise LookupError(f"no job {source_id}")
    if source.state in ACTIVE_STATES:
        raise JobStillRunning(f"job {source.id} is still {source.state}: let it finish first")
    row = conn.execute(
        "SELECT j.payload_sha256 FROM import_payloads p JOIN import_jobs j ON j.id = p.job_id"
        " WHERE p.job_id = ?", (source.id,)).fetchone()
    if row is None:
        raise PayloadPruned(source.id, source.payload_pruned_at or source.updated_at)
    digest = str(row[0])
    target = list_name or source.list_name
    same = _same_submission(conn, account_id, idempotency_key, digest, target, source.region)
    if same is not None:
        return same, False
    list_id = ensure_list(conn, account_id, target, now_ms)
    conn.execute(
        "INSERT INTO import_jobs (account_id, list_id, idempotency_key, payload_sha256, region,"
        " state, total, created_at, updated_at, rerun_of)"
        " VALUES (?, ?, ?, ?, ?, 'DRAFT', ?, ?, ?, ?)",
        (account_id, list_id, idempotency_key, digest, source.region, source.total,
         now_ms, now_ms, source.id),
    )
    job_id = conn.last_insert_rowid()
    conn.execute(
        "INSERT INTO import_payloads (job_id, content_type, body, received_at)"
        " SELECT ?, content_type, body, ? FROM import_payloads WHERE job_id = ?",
        (job_id, now_ms, source.id),
    )
    job = get_job(conn, job_id, account_id)
    assert job is not None
    return job, True


def get_job(conn: Connection, job_id: int, account_id: int | None = None) -> ImportJob | None:
    sql = f"SELECT {JOB_COLUMNS} FROM import_jobs j JOIN lists l ON l.id = j.list_id WHERE j.id = ?"
    args: tuple[Any, ...] = (job_id,)
    if account_id is not None:
        sql += " AND j.account_id = ?"
        args += (account_id,)
    row = conn.execute(sql, args).fetchone()
    return None if row is None else _job(row)


def list_jobs(conn: Connection, account_id: int, limit: int = 50) -> list[ImportJob]:
    rows = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM import_jobs j JOIN lists l ON l.id = j.list_id"
        " WHERE j.account_id = ? ORDER BY j.id DESC LIMIT ?",
        (account_id, limit),
    ).fetchall()
    return [_job(r) for r in rows]


def next_runnable(conn: Connection) -> ImportJob | None:
    """The oldest job that still has work (DRAFT or RUNNING)."""
    row = conn.execute(
        f"SELECT {JOB_COLUMNS} FROM import_jobs j JOIN lists l ON l.id = j.list_id"
        " WHERE j.state IN ('DRAFT', 'RUNNING') ORDER BY j.id LIMIT 1"
    ).fetchone()
    return None if row is None else _job(row)


def claim_runnable(conn: Connection) -> ImportJob | None:
    """Write unit, several processes on PostgreSQL: the oldest job with work that no
    live process holds, now held by this one (``lease_owner``); a job this process
    holds already is its own. A job whose holder died is taken over where its last
    chunk left it (the chunk units stay guarded by ``processed``)."""
    rows = [(as_int(r[0]), None if r[1] is None else str(r[1])) for r in conn.execute(
        "SELECT id, lease_owner FROM import_jobs WHERE state IN ('DRAFT', 'RUNNING')"
        " ORDER BY id")]
    gone = dead_owners(conn, (owner for _, owner in rows))
    for job_id, owner in rows:
        if owner is not None and owner != OWNER and owner not in gone:
            continue  # another process works on it
        if owner != OWNER:
            conn.execute("UPDATE import_jobs SET lease_owner = ? WHERE id = ?"
                         " AND state IN ('DRAFT', 'RUNNING') AND lease_owner IS ?",
                         (OWNER, job_id, owner))
            if conn.changes() != 1:
                continue  # taken by another process meanwhile
        return get_job(conn, job_id)
    return None


def load_payload(conn: Connection, job_id: int) -> bytes | None:
    row = conn.execute("SELECT body FROM import_payloads WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else as_bytes(row[0])


def fail_job(conn: Connection, job_id: int, error: str, now_ms: int) -> None:
    conn.execute(
        "UPDATE import_jobs SET state = 'FAILED', error = ?, finished_at = ?, updated_at = ?"
        " WHERE id = ? AND state IN ('DRAFT', 'RUNNING')",
        (error, now_ms, now_ms, job_id),
    )


def cancel_job(conn: Connection, job_id: int, account_id: int, now_ms: int) -> bool:
    """Write unit: cancel an unfinished job; True if it was cancelled now."""
    conn.execute(
        "UPDATE import_jobs SET state = 'CANCELLED', finished_at = ?, updated_at = ?"
        " WHERE id = ? AND account_id = ? AND state IN ('DRAFT', 'RUNNING')",
        (now_ms, now_ms, job_id, account_id),
    )
    return bool(conn.changes())


def iter_rejects(conn: Connection, job_id: int) -> Iterator[tuple[int, str, str]]:
    """(line number, line, reason); a shortened line's reason gives its full length."""
    for row in conn.execute(
        "SELECT line_number, line, reason, line_length FROM import_rejects WHERE job_id = ?"
        " ORDER BY line_number",
        (job_id,),
    ):
        line, reason, length = str(row[1]), str(row[2]), int(row[3] or 0)
        if length > len(line):
            reason = (f"{reason} ({length} characters; the first {len(line)} are kept)")
        yield as_int(row[0]), line, reason


def list_summary(conn: Connection, account_id: int, name: str) -> dict[str, Any] | None:
    row = conn.execute(
        "SELECT l.id, l.name, l.created_at, (SELECT count(*) FROM contacts c"
        " WHERE c.list_id = l.id) FROM lists l WHERE l.account_id = ? AND l.name = ?"
        " AND l.deleted_at IS NULL",
        (account_id, name),
    ).fetchone()
    if row is None:
        return None
    return {"id": row[0], "name": row[1], "created_at": row[2], "contacts": row[3]}


def list_lists(conn: Connection, account_id: int) -> list[dict[str, Any]]:
    rows: list[Any] = conn.execute(
        "SELECT l.id, l.name, l.created_at, (SELECT count(*) FROM contacts c"
        " WHERE c.list_id = l.id) FROM lists l WHERE l.account_id = ? AND l.deleted_at IS NULL"
        " ORDER BY l.name",
        (account_id,),
    ).fetchall()
    return [{"id": r[0], "name": r[1], "created_at": r[2], "contacts": r[3]} for r in rows]
