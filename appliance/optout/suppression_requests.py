"""Uploading a list of numbers to suppress, through the API or the console (OPS-4).

:func:`import_suppressions` reads the list as contact imports are read and adds its
numbers in units of :data:`WRITE_CHUNK`; sending the same list again adds nothing. A
refusal is a :class:`~appliance.refusals.Refused` (the web layer answers it:
``docs/api.md``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import anyio.to_thread

from appliance.imports.accept import too_large
from appliance.imports.lines import PayloadEncodingError, count_lines
from appliance.optout import suppressions as sup
from appliance.optout.suppression_import import MAX_BYTES, MAX_LINES, ReadList
from appliance.optout.suppression_import import read_suppressions as read_list
from appliance.refusals import Invalid, Malformed, TooLarge
from appliance.runtime import Runtime
from appliance.store.connection import Connection

WRITE_CHUNK = 5000


@dataclass(frozen=True)
class ImportSummary:
    """What an upload came to: its lines, the numbers added, those already listed, and
    what was read (rejected lines among it)."""

    lines: int
    added: int
    already: int
    read: ReadList


def _add_chunk(account_id: int, entries: list[tuple[str, str]], source: str, now_ms: int,
               conn: Connection) -> int:
    return sup.add_many(conn, account_id, entries, source, now_ms)


async def import_suppressions(runtime: Runtime, account_id: int, payload: bytes,
                              region: str, source: str) -> ImportSummary:
    """Read an uploaded list and add its numbers.

    Refused: ``payload_too_large`` and ``too_many_rows`` (a list too large),
    ``invalid_encoding`` (not text), ``empty_list``.
    """
    if len(payload) > MAX_BYTES:
        raise too_large(MAX_BYTES)

    def read() -> tuple[int, ReadList]:
        lines = count_lines(payload)
        if lines > MAX_LINES:
            raise TooLarge("too_many_rows",
                           f"This list has {lines} lines. The limit is {MAX_LINES}; split it.",
                           limit=MAX_LINES, submitted=lines)
        return lines, read_list(payload, region)

    try:
        lines, found = await anyio.to_thread.run_sync(read)
    except (PayloadEncodingError, UnicodeDecodeError) as exc:
        raise Malformed("invalid_encoding", str(exc)) from None
    if lines == 0 or (not found.entries and not found.rejects and not found.repeats):
        raise Invalid("empty_list", "the list is empty: give at least one number")
    added = 0
    now = runtime.now_ms()
    for start in range(0, len(found.entries), WRITE_CHUNK):
        added += await runtime.store.writer.run(
            partial(_add_chunk, account_id, found.entries[start:start + WRITE_CHUNK], source,
                    now))
    already = len(found.entries) - added + found.repeats
    return ImportSummary(lines, added, already, found)
