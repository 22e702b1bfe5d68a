"""Durable file moves: fsync a file, fsync its directory, replace atomically."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: Path, dest: Path) -> None:
    """``tmp`` becomes ``dest`` in one step, and the rename survives power loss."""
    fsync_file(tmp)
    os.replace(tmp, dest)
    fsync_dir(dest.parent)


def write_json_durably(dest: Path, data: Any) -> None:
    tmp = dest.with_name(f".{dest.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    replace_durably(tmp, dest)
