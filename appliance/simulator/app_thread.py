"""An ASGI app served on 127.0.0.1 from a daemon thread: how a provider's fake runs
beside the process that talks to it (tests, benchmarks).

The socket is bound in the constructor, so :attr:`AppThread.port` is known (and
final) before the server starts; entering waits until uvicorn says it has started,
and fails at once if its thread died (a port taken, an app that cannot start).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Self

import uvicorn
from starlette.types import ASGIApp


class AppThread:
    """``app`` on a free port of 127.0.0.1 while ``with`` it (or between ``start`` and
    ``stop``); ``name`` says whose server did not start."""

    def __init__(self, app: ASGIApp, name: str) -> None:
        self.name = name
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        config = uvicorn.Config(app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=name,
                                        kwargs={"sockets": [self._sock]}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The URL a provider's ``base_url`` setting takes."""
        return self.url

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 10.0) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"{self.name} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
