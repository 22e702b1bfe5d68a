"""One server per data directory: an exclusive ``flock`` on ``appliance.lock``."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


class DataDirLocked(RuntimeError):
    pass


class DataDirLock:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "appliance.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise DataDirLocked(
                f"data dir {self.path.parent} is in use by a running appliance (pid {holder})"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    def held_by_other(self) -> bool:
        """True when a server holds the lock (used by CLI commands)."""
        if not self.path.exists():
            return False
        fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
