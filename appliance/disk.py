"""Free space on the data dir's disk, the reserve, and what counts as a storage error.

EDGE-4: a full disk must be a clear ``503``, never a lost row. Two lines of defence:

* **the reserve** (``[storage] min_free_bytes``): imports and campaigns, the big
  writes, are refused (``503 storage_full``) while free space is under it (an import
  also when its own payload would take free space under it), so the small writes
  that must not fail (callbacks, single messages, sessions) still have room;
  ``/readyz`` is not ready meanwhile;
* **storage errors** (SQLite's ``SQLITE_FULL``, ``SQLITE_IOERR`` and friends, or an
  ``OSError`` such as ``ENOSPC``) from any write: the write unit was rolled back, so
  the caller answers ``503 not_stored`` with ``Retry-After``.

Both clear up on their own once space is freed: nothing needs a restart.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from appliance.config import Settings
from appliance.store.errors import STORAGE_ERRORS

STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS})


def free_bytes(path: Path) -> int:
    """Bytes an unprivileged writer may still use on the filesystem holding ``path``."""
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the store could not write (and so nothing was written)."""
    if isinstance(exc, STORAGE_ERRORS):
        return True
    return isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS


def below_reserve(settings: Settings, incoming: int = 0) -> str | None:
    """Why a big write must wait (free space under the reserve), or None when it may go."""
    reserve = settings.storage.min_free_bytes
    if reserve <= 0 or settings.database_url:  # PostgreSQL's disk is the server's
        return None
    try:
        free = free_bytes(settings.data_dir)
    except OSError as exc:
        return f"the free space of {settings.data_dir} cannot be read ({exc.strerror})"
    if free - incoming >= reserve:
        return None
    if incoming:
        return (f"the disk holding the data has {free} bytes free; storing {incoming} more"
                f" would leave less than the reserve of {reserve} bytes"
                " ([storage] min_free_bytes): free some space, then send it again")
    return (f"the disk holding the data has {free} bytes free, under the reserve of"
            f" {reserve} bytes ([storage] min_free_bytes): free some space, then send it again")
