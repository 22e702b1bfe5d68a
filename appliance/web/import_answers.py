"""How an import job is shown: its JSON (the API's answer, and the console's job page and
its poll), and its rejected lines as a CSV download.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from starlette.responses import Response, StreamingResponse

from appliance.clock import iso
from appliance.csv_export import csv_rows
from appliance.imports.import_job import ImportJob, iter_rejects
from appliance.runtime import Runtime


def job_json(job: ImportJob) -> dict[str, Any]:
    elapsed = None
    if job.started_at is not None:
        elapsed = ((job.finished_at or job.updated_at) - job.started_at) / 1000
    return {
        "id": job.id,
        "jobId": job.id,
        "state": job.state,
        "list": job.list_name,
        "region": job.region,
        "total": job.total,
        "processed": job.processed,
        "inserted": job.inserted,
        "duplicates": job.duplicates,
        "duplicates_in_paste": job.duplicates_in_paste,
        "duplicates_in_list": job.duplicates_in_list,
        "rejected": job.rejected,
        "blank": job.blank,
        "header_skipped": job.header_skipped,
        "error": job.error,
        "percent": round(100.0 * job.processed / job.total, 1) if job.total else 100.0,
        "rows_per_s": round(job.processed / elapsed) if elapsed else None,
        "created_at": iso(job.created_at),
        "started_at": iso(job.started_at),
        "finished_at": iso(job.finished_at),
        "updated_at": iso(job.updated_at),
        "payload_pruned": job.payload_pruned_at is not None,
        "payload_pruned_at": iso(job.payload_pruned_at),
        "rerun_of": job.rerun_of,
        "poll": f"/api/jobs/{job.id}",
        "rejects_url": f"/api/jobs/{job.id}/rejects.csv",
    }


async def rejects_response(appliance: Runtime, job: ImportJob) -> Response:
    """The job's rejected lines as a CSV download (``line_number,line,reason``).

    A line stored shortened (too long to keep whole) says so in its reason, with its
    full length.
    """
    rows = await appliance.store.readers.run(lambda c: list(iter_rejects(c, job.id)))

    async def body() -> AsyncIterator[bytes]:
        cells = ([number, line, reason] for number, line, reason in rows)
        for piece in csv_rows(["line_number", "line", "reason"], cells):
            yield piece

    return StreamingResponse(
        body(), media_type="text/csv; charset=utf-8",
        headers={"Content-Disposition": f'attachment; filename="job-{job.id}-rejects.csv"'},
    )
