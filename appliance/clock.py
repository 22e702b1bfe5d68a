"""The one clock the appliance reads.

Every timestamp is an integer of milliseconds since 1970-01-01 UTC. Tests control
time through ``APPLIANCE_CLOCK_FILE``: when set, the file holds the current time in
milliseconds (written by the test), so a real server process can be moved forward
by hours without sleeping.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path


class Clock:
    """Wall clock in epoch milliseconds, optionally driven by a file."""

    def __init__(self, control_file: str | None = None) -> None:
        self._file = Path(control_file) if control_file else None

    @classmethod
    def from_env(cls) -> Clock:
        return cls(os.environ.get("APPLIANCE_CLOCK_FILE") or None)

    def now_ms(self) -> int:
        if self._file is not None:
            try:
                return int(self._file.read_text().strip())
            except (OSError, ValueError):
                pass
        return time.time_ns() // 1_000_000

    @property
    def controlled(self) -> bool:
        return self._file is not None


def iso(ms: int | None) -> str | None:
    """Render epoch milliseconds as an ISO-8601 UTC string (``...Z``)."""
    if ms is None:
        return None
    dt = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return dt.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
