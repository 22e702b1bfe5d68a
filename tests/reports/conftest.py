"""A real store (writer thread, read connections) over a fresh SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(str(tmp_path / "appliance.db"))
    try:
        yield s
    finally:
        s.close()
