"""Shared fixtures: a data dir, a running server, an account's key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.harness import Server, create_account


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    return d


@pytest.fixture
def server(data_dir: Path) -> Iterator[Server]:
    srv = Server(data_dir).start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def api_key(server: Server) -> str:
    return create_account(server.data_dir, "acme")


@pytest.fixture
def api(server: Server, api_key: str) -> Iterator[httpx.Client]:
    with server.client(api_key) as client:
        yield client
