"""``store_on_both``: a real store (writer thread, read connections) over each backend
in turn, SQLite then a fresh PostgreSQL schema (``store``, SQLite alone, is in
``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.store import Store
from tests.conftest import BACKENDS


@pytest.fixture(params=BACKENDS)
def store_on_both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """``store`` on SQLite, then on PostgreSQL: the same units, the same assertions."""
    if request.param == "postgresql":
        from appliance.store.pg_store import open_postgresql

        s: Any = open_postgresql(request.getfixturevalue("pg_url"), read_connections=2)
    else:
        s = Store.open(str(tmp_path / "appliance.db"))
    try:
        yield s
    finally:
        s.close()
