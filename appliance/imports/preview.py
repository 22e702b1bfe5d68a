"""A preview of an import before it runs: its first lines, their columns, and what
the importer will make of each.

It runs the worker's own parser (:func:`appliance.imports.chunk.parse_chunk`) over
the head of the payload, so the preview says exactly what the import will do with
those lines: the number it reads (as E.164), the name, a header row skipped, or the
reason a line is rejected. Only the head is read (:data:`PREVIEW_BYTES`): the
browser sends just that much of a large file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from appliance.imports.chunk import parse_chunk
from appliance.imports.lines import PayloadEncodingError, cells_of, decode_payload

PREVIEW_BYTES = 64 * 1024
PREVIEW_LINES = 10


@dataclass(frozen=True)
class PreviewRow:
    line_number: int
    line: str
    cells: list[str]
    msisdn: str | None
    name: str | None
    outcome: str  # "ok", "header" or "rejected"
    reason: str = ""


@dataclass
class Preview:
    rows: list[PreviewRow] = field(default_factory=list)
    blank: int = 0
    columns: int = 0  # the most cells any previewed line has
    error: str = ""  # the payload cannot be read at all (encoding)

    def as_json(self) -> dict[str, object]:
        return {
            "rows": [{"line_number": r.line_number, "line": r.line, "cells": r.cells,
                      "msisdn": r.msisdn, "name": r.name, "outcome": r.outcome,
                      "reason": r.reason} for r in self.rows],
            "blank": self.blank, "columns": self.columns, "error": self.error,
        }


def _head_text(head: bytes, complete: bool) -> str:
    """The head as text, cut to whole lines (a cut multi-byte character is dropped)."""
    if head[:2] in (b"\xff\xfe", b"\xfe\xff") and len(head) % 2:
        head = head[:-1]
    for trim in range(4):
        try:
            text = decode_payload(head[:len(head) - trim] if trim else head)
            break
        except PayloadEncodingError as exc:
            if complete or exc.offset < len(head) - 4:
                raise
    else:  # pragma: no cover - the loop always breaks or raises
        raise PayloadEncodingError(len(head))
    if not complete:
        cut = max(text.rfind("\n"), text.rfind("\r"))
        if cut > 0:
            text = text[:cut]
    return text


def preview(head: bytes, region: str, complete: bool = True,
            lines: int = PREVIEW_LINES) -> Preview:
    """What the importer makes of the first ``lines`` lines of ``head`` (``complete``:
    ``head`` is the whole payload, not a slice of it)."""
    try:
        text = _head_text(head[:PREVIEW_BYTES], complete and len(head) <= PREVIEW_BYTES)
    except PayloadEncodingError as exc:
        return Preview(error=str(exc))
    chunk = parse_chunk(0, text, 0, 0, lines, region, 0)
    out = Preview(blank=chunk.blank)
    for row in chunk.rows:
        cells = cells_of(row.line)
        out.columns = max(out.columns, len(cells))
        if row.header:
            outcome = "header"
        elif row.msisdn is None:
            outcome = "rejected"
        else:
            outcome = "ok"
        out.rows.append(PreviewRow(row.line_number, row.line, cells, row.msisdn, row.name,
                                   outcome, row.reason))
    return out
