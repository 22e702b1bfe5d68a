"""What a client asks about import jobs beyond the upload, through the API or the console.

:func:`queue_rerun` (IMP-11): a new job over a finished job's stored payload, so the
current parser reads it again (into another list when named). A refusal is a
:class:`~appliance.refusals.Refused` (the web layer answers it: ``docs/api.md``).
"""

from __future__ import annotations

import secrets

from appliance.clock import iso
from appliance.imports.import_job import (
    IdempotencyConflict,
    ImportJob,
    JobStillRunning,
    ListBeingDeleted,
    PayloadPruned,
    rerun_job,
)
from appliance.refusals import Conflict, Gone, Invalid, no_such
from appliance.runtime import Runtime
from appliance.scheduler import Wake


async def queue_rerun(runtime: Runtime, account_id: int, job_id: int,
                      list_name: str | None, key: str | None, *, wake_imports: Wake
                      ) -> tuple[ImportJob, bool]:
    """A re-run of job ``job_id`` and whether it is new (the same key gives back the
    same re-run); the import loop is woken for a new one. Refused: ``payload_pruned``
    (with ``pruned_at``), ``not_found``, ``job_running``, ``idempotency_key_reused``,
    ``list_being_deleted``."""
    key = key or f"rerun:{job_id}:{secrets.token_hex(8)}"  # as the CLI's re-run
    try:
        job, created = await runtime.store.writer.run(
            lambda c: rerun_job(c, job_id, account_id, list_name, key, runtime.now_ms()))
    except PayloadPruned as exc:
        raise Gone(
            "payload_pruned",
            f"the stored payload of job {exc.job_id} was pruned on {iso(exc.pruned_at)}"
            " (retention: [import] payload_retention_days); import the list again",
            pruned_at=iso(exc.pruned_at)) from None
    except LookupError:
        raise no_such("job") from None
    except JobStillRunning as exc:
        raise Conflict("job_running", str(exc)) from None
    except IdempotencyConflict as exc:
        raise Invalid("idempotency_key_reused", str(exc)) from None
    except ListBeingDeleted as exc:
        raise Conflict("list_being_deleted", str(exc)) from None
    if created:
        wake_imports()
    return job, created
