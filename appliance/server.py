"""Running the HTTP server and the scheduler in one process (APP-1)."""

from __future__ import annotations

import logging

import uvicorn

from appliance.config import Settings, ensure_data_dir
from appliance.logs import setup_logging
from appliance.service import Appliance
from appliance.store.lock import DataDirLock
from appliance.web.app import build_app

log = logging.getLogger("appliance")


def uvicorn_config(app: object, settings: Settings) -> uvicorn.Config:
    try:
        import uvloop  # noqa: F401

        loop = "uvloop"
    except ImportError:  # pragma: no cover - platforms without uvloop
        loop = "asyncio"
    return uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=settings.host,
        port=settings.port,
        loop=loop,
        http="httptools",
        lifespan="on",
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=int(settings.shutdown_timeout_s),
        limit_concurrency=2000,
        backlog=4096,
    )


def run_server(settings: Settings, appliance: Appliance | None = None) -> None:
    """Serve until SIGTERM/SIGINT; then finish in-flight work and flush the writer."""
    setup_logging(settings.log_format, settings.log_level)
    ensure_data_dir(settings)
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    try:
        appliance = appliance or Appliance(settings)
        appliance.open()
        try:
            app = build_app(appliance)
            server = uvicorn.Server(uvicorn_config(app, settings))
            log.info("listening", extra={"url": f"http://{settings.host}:{settings.port}"})
            server.run()
        finally:
            appliance.close()
            log.info("stopped cleanly")
    finally:
        lock.release()
