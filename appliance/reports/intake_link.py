"""The link between the server and its report intake process: pickled frames over a
Unix socket pair, each its length (4 bytes, big-endian) and then the pickle.

From the intake: ``("store", ident, provider, raw, reports, parse_error, signed_age_s)``
for each verified callback, ``("requests", [(method, status, seconds), ...])``, the
intake's requests since the last such frame, and ``("edge", open_connections,
{reason: refusals}, body_bytes_held, budget_refusals)`` when those changed (both for
``/metrics``). From the server:
``("stored", [(ident, ok), ...])`` once the write units are committed (``ok``) or
failed.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

FRAME = struct.Struct("!I")


def frame(message: tuple[Any, ...]) -> bytes:
    blob = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return FRAME.pack(len(blob)) + blob


def frames(buffer: bytearray) -> list[tuple[Any, ...]]:
    """The whole frames at the start of ``buffer`` (taken out of it)."""
    out: list[tuple[Any, ...]] = []
    at = 0
    while len(buffer) - at >= FRAME.size:
        (size,) = FRAME.unpack_from(buffer, at)
        if len(buffer) - at - FRAME.size < size:
            break
        out.append(pickle.loads(buffer[at + FRAME.size:at + FRAME.size + size]))
        at += FRAME.size + size
    del buffer[:at]
    return out
