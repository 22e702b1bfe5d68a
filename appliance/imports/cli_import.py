"""``appliance import``: queue a file as an import job and show its progress.

With a server running on the data dir, the job is queued in the database and the
server's worker does it; this command only watches. Without one, this process
runs the worker itself. Either way a second run of the same file is the same job.
"""

from __future__ import annotations

import asyncio
import sys
import time
from functools import partial

import apsw
import click

from appliance.accounts import ensure_account
from appliance.config import Settings
from appliance.imports.accept import Refused, check_list_name, check_region, count_payload_lines
from appliance.imports.import_job import (
    ImportJob,
    NewJob,
    create_job,
    fallback_idempotency_key,
    get_job,
    payload_sha256,
)
from appliance.imports.worker import ImportWorker
from appliance.offline import OfflineAppliance


def _bar(job: ImportJob, started: float) -> str:
    width = 30
    frac = job.processed / job.total if job.total else 1.0
    filled = int(frac * width)
    rate = job.processed / max(time.monotonic() - started, 1e-6)
    return (f"\r[{'#' * filled}{'.' * (width - filled)}] {job.processed}/{job.total}"
            f" ({frac * 100:5.1f}%) {rate:,.0f} lines/s")


def run_import(settings: Settings, data: bytes, list_name: str, region: str | None,
               account_name: str) -> int:
    try:
        name = check_list_name(list_name)
        region_code = check_region(region, settings.imports.default_region)
        total = count_payload_lines(data, settings.imports)
    except Refused as exc:
        raise click.ClickException(exc.message) from None
    opened = OfflineAppliance(settings)
    with opened as appliance:
        store = appliance.store

        def queue(conn: apsw.Connection) -> ImportJob:
            account = ensure_account(conn, account_name, appliance.now_ms())
            digest = payload_sha256(data)
            key = fallback_idempotency_key(account.id, name, region_code, digest)
            new = NewJob(account.id, name, region_code, key, data, "text/plain", total, digest)
            job, _ = create_job(conn, new, appliance.now_ms())
            return job

        job = store.writer.call(queue)
        click.echo(f"job {job.id}: {job.total} lines into list {job.list_name!r}", err=True)
        started = time.monotonic()
        tty = sys.stderr.isatty()
        worker = None if opened.server_running else ImportWorker(appliance)

        async def follow(job: ImportJob) -> ImportJob:
            last_print = 0.0
            while job.state in ("DRAFT", "RUNNING"):
                if worker is not None:
                    await worker.step()
                else:
                    await asyncio.sleep(0.2)
                fresh = await store.readers.run(partial(get_job, job_id=job.id))
                assert fresh is not None
                job = fresh
                now = time.monotonic()
                if tty:
                    click.echo(_bar(job, started), nl=False, err=True)
                elif now - last_print > 2 or job.state not in ("DRAFT", "RUNNING"):
                    click.echo(_bar(job, started).strip(), err=True)
                    last_print = now
            return job

        job = asyncio.run(follow(job))
        if tty:
            click.echo("", err=True)
    click.echo(
        f"job {job.id} {job.state}: {job.inserted} inserted, {job.duplicates_in_paste}"
        f" duplicates in the file, {job.duplicates_in_list} already in the list,"
        f" {job.rejected} rejected, {job.blank} blank"
    )
    if job.rejected:
        click.echo(f"rejected lines: GET /api/jobs/{job.id}/rejects.csv", err=True)
    return 0 if job.state == "DONE" else 1

