"""Writing one parsed part of an import job's window: the write unit of IMP-4.

The contacts of one part of a window of lines, and with its last part the window's
rejects and the new position, are written in one transaction, guarded by the position
before, so two workers can never advance the same job.
"""

from __future__ import annotations

from typing import Any

from appliance.imports.import_job import ACTIVE_STATES, ImportJob, JobMoved, get_job
from appliance.store.connection import Connection
from appliance.store.singleton import one_at_a_time


def apply_parsed(conn: Connection, part: Any, now_ms: int) -> ImportJob:
    """Write unit: one part of a window of lines, or nothing at all.

    ``part`` is a :class:`appliance.imports.windows.ParsedChunk`: some of the
    window's distinct numbers (each with how many more lines of the window repeat it),
    inserted in one ``executemany``; the window's last part also brings its rejects,
    blank lines and header and moves the job to the window's end. A part applies only
    where the job is: its window starting at the job's resume line, after exactly the
    numbers of the window already in (``done_before``), so a part parsed twice or for
    a job moved meanwhile raises :class:`JobMoved` and writes nothing.

    Duplicates are decided by the database: a line whose number this job put in the
    list (in this window or before) is a duplicate within the paste, any other line
    whose number is in the list already is "already in the list".
    """
    job = get_job(conn, part.job_id)
    if (job is None or job.state not in ACTIVE_STATES or job.resume_line != part.from_processed
            or job.window_done != part.done_before
            or job.window_to != (part.to_processed if part.done_before else None)):
        raise JobMoved(f"job {part.job_id} is not at line {part.from_processed}"
                       f" with {part.done_before} of its window's numbers in")
    contacts: list[tuple[str, str | None]] = part.contacts
    repeats: list[int] = part.repeats
    one_at_a_time(conn, f"list:{job.list_id}")  # beside a campaign made from this list
    before = conn.total_changes()  # contacts has no trigger: these are the rows inserted
    conn.executemany(
        "INSERT INTO contacts (list_id, msisdn, name, job_id, created_at)"
        f" VALUES ({int(job.list_id)}, ?, ?, {int(job.id)}, {int(now_ms)})"
        " ON CONFLICT (list_id, msisdn) DO NOTHING", contacts)
    inserted = conn.total_changes() - before
    lines = len(contacts) + sum(repeats)
    if inserted == len(contacts):  # every number new: its repeats are in-paste duplicates
        dup_paste = lines - inserted
    else:
        ours: set[str] = set()
        numbers = [m for m, _ in contacts]
        for start in range(0, len(numbers), 500):
            chunk = numbers[start:start + 500]
            ours.update(str(r[0]) for r in conn.execute(
                "SELECT msisdn FROM contacts WHERE list_id = ? AND msisdn IN"
                f" ({','.join('?' * len(chunk))}) AND job_id = ?",
                (job.list_id, *chunk, job.id)))
        owned = sum(1 + r for (m, _), r in zip(contacts, repeats, strict=True) if m in ours)
        dup_paste = owned - inserted
    dup_list = lines - inserted - dup_paste
    counts = ("inserted = inserted + ?, duplicates_in_paste = duplicates_in_paste + ?,"
              " duplicates_in_list = duplicates_in_list + ?,")
    guard = (" WHERE id = ? AND processed = ? AND window_done = ?"
             " AND state IN ('DRAFT', 'RUNNING')")
    if not part.last:
        conn.execute(
            f"UPDATE import_jobs SET {counts} processed = processed + ?,"
            " window_to = ?, window_done = window_done + ?, window_lines = window_lines + ?,"
            " state = 'RUNNING', started_at = COALESCE(started_at, ?), updated_at = ?" + guard,
            (inserted, dup_paste, dup_list, lines, part.to_processed, len(contacts), lines,
             now_ms, now_ms, job.id, job.processed, job.window_done))
    else:
        if part.rejects:
            conn.executemany(
                "INSERT INTO import_rejects (job_id, line_number, line, reason, line_length)"
                f" VALUES ({int(job.id)}, ?, ?, ?, ?) ON CONFLICT (job_id, line_number)"
                " DO NOTHING", part.rejects)
        done = part.to_processed >= job.total
        conn.execute(
            f"UPDATE import_jobs SET {counts} processed = ?, text_offset = ?,"
            " window_to = NULL, window_done = 0, window_lines = 0,"
            " rejected = rejected + ?, blank = blank + ?, header_skipped = header_skipped + ?,"
            " state = ?, started_at = COALESCE(started_at, ?), finished_at = ?, updated_at = ?"
            + guard,
            (inserted, dup_paste, dup_list, part.to_processed, part.to_offset,
             len(part.rejects), part.blank, part.header, "DONE" if done else "RUNNING", now_ms,
             now_ms if done else None, now_ms, job.id, job.processed, job.window_done))
    if conn.changes() != 1:
        raise JobMoved(f"job {job.id} moved while this part was written")
    out = get_job(conn, job.id)
    assert out is not None
    return out
