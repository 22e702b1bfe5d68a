"""The listening sockets and the uvicorn settings every HTTP server of ours shares.

The server (``appliance serve``) and the report intake's process
(:mod:`appliance.web.intake_app`) both take their port with :func:`bind_socket`,
before anything else starts, and run uvicorn as :func:`uvicorn_config` sets it up:
httptools with the edge protocol's timeouts and header limit (EDGE-1, 2).
"""

from __future__ import annotations

import errno
import socket

import uvicorn

from appliance.config import Settings
from appliance.web.edge import edge_protocol

BACKLOG = 4096


class PortInUse(RuntimeError):
    """The address to listen on cannot be had (another process holds the port)."""


def bind_socket(settings: Settings, port: int | None = None, flag: str = "--port"
                ) -> socket.socket:
    """The listening socket on ``host:port`` (``port``: another of ours, named ``flag``
    in the refusal), bound and listening now, so that a busy port is refused before
    anything else starts (and no other process can take the port between the check and
    the start)."""
    port = settings.port if port is None else port
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind((settings.host, port))
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        if exc.errno == errno.EADDRINUSE:
            why += f" (another process is listening there; stop it or choose another {flag})"
        raise PortInUse(f"cannot listen on {settings.host}:{port}: {why}") from None
    return sock


def uvicorn_config(app: object, settings: Settings, port: int | None = None) -> uvicorn.Config:
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:  # pragma: no cover - platforms without uvloop
        loop = "asyncio"
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=settings.host,
        port=settings.port if port is None else port,
        loop=loop,
        # httptools, with header/body read timeouts and a header size limit (EDGE-1, 2).
        http=edge_protocol(settings.http),
        ws="none",  # no WebSocket routes, and the edge protocol times plain HTTP only
        lifespan="on",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=max(1, int(settings.shutdown_timeout_s / 2)),
        # No connection cap: idle and slow sockets must not lock /healthz or
        # /callbacks/* out; requests in flight are capped in web/last_resort.py.
        limit_concurrency=None,
        backlog=BACKLOG,
    )
