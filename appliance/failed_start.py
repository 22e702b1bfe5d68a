"""A start that fails leaves the data dir as it found it.

``serve`` and ``demo`` make the data dir when it is missing and take its lock file
(:mod:`appliance.store.lock`) before they know whether they can listen, open the
database or run at all. When the start then fails (a busy port, a locked or foreign
database, a bad setting), what they made is removed again: the lock file when there
was none before (and nobody holds it now), and the directory when it was made by this
start and is empty again. Nothing is removed that was there before, and nothing once
something was written into it (a database, a log): that is data, not litter.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from appliance.store.lock import DataDirLock


@contextlib.contextmanager
def nothing_left_on_failure(data_dir: Path, created: bool | None = None) -> Iterator[None]:
    """Around a start: on any exception, remove what the start made (see the module).
    ``created``: whether the start made ``data_dir`` (default: it does not exist yet)."""
    made_dir = not data_dir.exists() if created is None else created
    lock = DataDirLock(data_dir)
    had_lock = lock.path.exists()
    try:
        yield
    except BaseException:
        tidy(data_dir, made_dir, had_lock)
        raise


def tidy(data_dir: Path, made_dir: bool, had_lock: bool) -> None:
    """Remove the lock file this start made (unless someone holds it), then the data dir
    if this start made it and it is empty."""
    lock = DataDirLock(data_dir)
    with contextlib.suppress(OSError):
        if not had_lock and lock.path.exists() and not lock.held_by_other():
            lock.path.unlink()
    with contextlib.suppress(OSError):
        if made_dir and data_dir.is_dir() and not any(data_dir.iterdir()):
            data_dir.rmdir()
