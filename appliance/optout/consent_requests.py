"""Loading consents through the API (IYS-2): read the records, apply the good ones in
units of :data:`WRITE_CHUNK` (each record whole or not at all), say what became of each.

Synchronous like the suppression upload; sending the same records again changes nothing
(``added`` and ``updated`` 0). A refusal is a :class:`~appliance.refusals.Refused`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from appliance.imports.lines import PayloadEncodingError
from appliance.optout import consents as store
from appliance.optout.consent_input import MAX_ROWS, ReadRecords, read_csv, read_json_array
from appliance.refusals import Invalid, Malformed, TooLarge
from appliance.runtime import Runtime

WRITE_CHUNK = 5000


@dataclass(frozen=True)
class LoadSummary:
    applied: store.Applied
    read: ReadRecords


def _check_rows(rows: int) -> None:
    if rows > MAX_ROWS:
        raise TooLarge("too_many_rows", f"{rows} records; the limit is {MAX_ROWS}: split them",
                       limit=MAX_ROWS, submitted=rows)


async def _apply(runtime: Runtime, account_id: int, read: ReadRecords) -> LoadSummary:
    if not read.records and not read.rejects:
        raise Invalid("empty_list", "no consent records: give at least one")
    total = store.Applied()
    now = runtime.now_ms()
    for start in range(0, len(read.records), WRITE_CHUNK):
        part = read.records[start:start + WRITE_CHUNK]
        got = await runtime.store.writer.run(
            partial(store.apply_many, account_id=account_id, records=part, now_ms=now))
        total.added += got.added
        total.updated += got.updated
        total.unchanged += got.unchanged
    return LoadSummary(total, read)


async def load_csv(runtime: Runtime, account_id: int, payload: bytes,
                   region: str) -> LoadSummary:
    """A CSV upload. Refused: ``invalid_encoding``, ``too_many_rows``, ``empty_list``."""
    now = runtime.now_ms()
    try:
        read = await anyio.to_thread.run_sync(lambda: read_csv(payload, region, now))
    except (PayloadEncodingError, UnicodeDecodeError) as exc:
        raise Malformed("invalid_encoding", str(exc)) from None
    _check_rows(read.rows)
    return await _apply(runtime, account_id, read)


async def load_array(runtime: Runtime, account_id: int, items: list[object],
                     region: str) -> LoadSummary:
    """A JSON array of records. Refused: ``too_many_rows``, ``empty_list``."""
    _check_rows(len(items))
    now = runtime.now_ms()
    read = await anyio.to_thread.run_sync(lambda: read_json_array(list(items), region, now))
    return await _apply(runtime, account_id, read)
