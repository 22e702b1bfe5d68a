"""``appliance import``: queue a file as an import job and show its progress.

With a server running on the data dir, the job is queued in the database and the
server's worker does it; this command only watches. Without one, this process
runs the worker itself. Either way a second run of the same file is the same job.

The account is the one named (``--account``), the one whose key is given
(``--key``), or the only account there is; with several and none chosen, the
command refuses and lists them (it never makes an account of its own).
``--rerun JOB`` queues a new job over job JOB's stored payload instead of a file
(IMP-11): the current parser reads it again, into the same list or ``--list``.
``--rejects JOB`` prints job JOB's rejected lines as CSV on stdout (what
``GET /api/jobs/{id}/rejects.csv`` answers), with no server needed.
"""

from __future__ import annotations

import asyncio
import secrets
import sys
import time
from functools import partial
from typing import Any

import click

from appliance.accounts import AccountChoice, choose_account
from appliance.clock import iso
from appliance.config import Settings
from appliance.csv_export import csv_rows
from appliance.imports.accept import check_list_name, check_region, count_payload_lines
from appliance.imports.import_job import (
    ImportJob,
    JobStillRunning,
    ListBeingDeleted,
    NewJob,
    PayloadPruned,
    create_job,
    fallback_idempotency_key,
    get_job,
    iter_rejects,
    payload_sha256,
    rerun_job,
)
from appliance.imports.worker import ImportWorker
from appliance.offline import OfflineAppliance
from appliance.refusals import Refused


def _bar(job: ImportJob, started: float) -> str:
    width = 30
    frac = job.processed / job.total if job.total else 1.0
    filled = int(frac * width)
    rate = job.processed / max(time.monotonic() - started, 1e-6)
    return (f"\r[{'#' * filled}{'.' * (width - filled)}] {job.processed}/{job.total}"
            f" ({frac * 100:5.1f}%) {rate:,.0f} lines/s")


def run_import(settings: Settings, data: bytes, list_name: str, region: str | None,
               account_name: str | None, key: str | None = None,
               source: str = "the file") -> int:
    """Queue ``data`` (read from ``source``, a path or ``stdin``) and follow the job."""
    try:
        name = check_list_name(list_name)
        region_code = check_region(region, settings.imports.default_region)
        total = count_payload_lines(data, settings.imports)
    except Refused as exc:
        if exc.error == "empty_list":  # the API's wording asks a paste for a number
            what = "is empty" if not data else "holds only blank lines"
            raise click.ClickException(f"{source} {what}: nothing to import") from None
        raise click.ClickException(exc.message) from None
    digest = payload_sha256(data)

    def queue(conn: Any, account_id: int, now: int) -> ImportJob:
        key = fallback_idempotency_key(account_id, name, region_code, digest)
        new = NewJob(account_id, name, region_code, key, data, "text/plain", total, digest)
        job, _ = create_job(conn, new, now)
        return job

    return _queue_and_follow(settings, account_name, key, queue)


def run_rerun(settings: Settings, job_id: int, list_name: str | None,
              account_name: str | None, key: str | None = None) -> int:
    """``appliance import --rerun JOB``: a new job over job JOB's stored payload."""
    target = None
    if list_name is not None:
        try:
            target = check_list_name(list_name)
        except Refused as exc:
            raise click.ClickException(exc.message) from None
    idempotency_key = f"rerun:{job_id}:{secrets.token_hex(8)}"

    def queue(conn: Any, account_id: int, now: int) -> ImportJob:
        job, _ = rerun_job(conn, job_id, account_id, target, idempotency_key, now)
        return job

    return _queue_and_follow(settings, account_name, key, queue, job_id)


def run_rejects(settings: Settings, job_id: int, account_name: str | None,
                key: str | None = None) -> int:
    """``appliance import --rejects JOB``: the job's rejected lines, CSV, on stdout."""
    with OfflineAppliance(settings) as appliance:
        store = appliance.store
        try:
            account = store.readers.call(lambda c: choose_account(c, account_name, key))
        except AccountChoice as exc:
            raise click.ClickException(str(exc)) from None
        job = store.readers.call(partial(get_job, job_id=job_id, account_id=account.id))
        if job is None:
            raise click.ClickException(_no_such_job(account.name, job_id))
        rows = store.readers.call(lambda c: list(iter_rejects(c, job_id)))
    out = sys.stdout.buffer
    for piece in csv_rows(["line_number", "line", "reason"],
                          ([n, line, reason] for n, line, reason in rows)):
        out.write(piece)
    out.flush()
    click.echo(f"job {job_id}: {len(rows)} rejected lines", err=True)
    return 0


def _no_such_job(account: str, job_id: int | None) -> str:
    if job_id is None:
        return f"account {account!r} has no such job"
    return (f"account {account!r} has no such job {job_id}: no job has that number, or it"
            " is another account's")


def _queue_and_follow(settings: Settings, account_name: str | None, key: str | None,
                      queue: Any, job_id: int | None = None) -> int:
    opened = OfflineAppliance(settings)
    with opened as appliance:
        store = appliance.store
        try:
            account = store.readers.call(lambda c: choose_account(c, account_name, key))
        except AccountChoice as exc:
            raise click.ClickException(str(exc)) from None
        try:
            job = store.writer.call(lambda c: queue(c, account.id, appliance.now_ms()))
        except LookupError as exc:
            if isinstance(exc, PayloadPruned):
                raise click.ClickException(
                    f"job {exc.job_id}'s stored payload was pruned on {iso(exc.pruned_at)}"
                    " ([import] payload_retention_days); import the file again") from None
            raise click.ClickException(_no_such_job(account.name, job_id)) from None
        except (JobStillRunning, ListBeingDeleted) as exc:
            raise click.ClickException(str(exc)) from None
        again = f" (a re-run of job {job.rerun_of})" if job.rerun_of else ""
        click.echo(f"job {job.id}: {job.total} lines into list {job.list_name!r} of account"
                   f" {account.name!r}{again}", err=True)
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
        click.echo(f"rejected lines: appliance import --rejects {job.id}"
                   f" (or GET /api/jobs/{job.id}/rejects.csv)", err=True)
    return 0 if job.state == "DONE" else 1
