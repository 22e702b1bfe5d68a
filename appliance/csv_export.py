"""CSV downloads that are safe to open in any spreadsheet, in any locale (EDGE-7).

Every field is quoted. A spreadsheet opening the file with another list separator
than ours (``;`` in German, French, Turkish locales) splits a quoted field at its
commas or semicolons anyway, so a cell like ``1;=cmd|' /C calc'!A0;`` would become a
formula cell there. :func:`spreadsheet_safe` therefore looks at the start of every
piece of a cell, split at ``,``, ``;`` and tab (after any spaces and quotes), and puts a
``'`` before each piece that starts like a formula (``=``, ``+``, ``-``, ``@``, a tab
or a carriage return, or their full-width forms), so no reading of the file yields
a formula cell.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Iterator

_PIECE_START = re.compile(r"(^|[,;\t])([ \"]*)(?=[=+\-@\t\r＝＋－＠])")
FLUSH_ROWS = 2000


def spreadsheet_safe(cell: str) -> str:
    """``cell`` with a ``'`` before every piece a spreadsheet would read as a formula."""
    return _PIECE_START.sub(r"\1\2'", cell)


def csv_rows(header: list[str], rows: Iterable[list[object]]) -> Iterator[bytes]:
    """UTF-8 CSV (CRLF, every field quoted, text cells made safe) in pieces."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    for i, row in enumerate(rows, 1):
        writer.writerow([spreadsheet_safe(c) if isinstance(c, str) else c for c in row])
        if i % FLUSH_ROWS == 0:
            yield buf.getvalue().encode("utf-8")
            buf.seek(0)
            buf.truncate()
    yield buf.getvalue().encode("utf-8")
