"""Running the HTTP server and the scheduler in one process (APP-1), and stopping it.

Start: refuse a second process on the data dir (``appliance.lock``) and a data dir
an interrupted restore left behind; take the listening socket (a busy port fails
here, before the database is touched: see :func:`bind_socket`); open (migrate) the
database; serve.

SIGTERM (or SIGINT): stop accepting connections and tell the scheduler loops to end
after the step they are in, let in-flight requests finish (up to half of
``shutdown_timeout_s``), let every scheduler loop finish its current step (a chunk of
an import, a send batch), flush the writer's queue, close the database, release the
lock and exit 0. A watchdog ends the process with status 1 if all that
has not happened ``shutdown_timeout_s`` (+5 s) after the signal. The next start
resumes whatever was under way (every unit of work records its position).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path
from types import FrameType

import uvicorn

from appliance import retention
from appliance.config import Settings, ensure_data_dir
from appliance.imports import worker as import_worker
from appliance.inbound import poll as inbound_poll
from appliance.logs import setup_logging
from appliance.ops.backup import install as backups
from appliance.ops.backup.restore import pending_restore
from appliance.ops.observability import install as observability
from appliance.ops.observability.metrics import Metrics
from appliance.ops.observability.sources import Sources
from appliance.provider_kinds import KINDS, secret_values
from appliance.providers.callback_token import token_warnings
from appliance.providers.registry import Providers
from appliance.reports import loops as report_loops
from appliance.reports import puller
from appliance.runtime import Runtime
from appliance.sending import credit, expansion, orphans, sender
from appliance.smpp import lifecycle as smpp_sessions
from appliance.start_warnings import start_warnings
from appliance.store.lock import DataDirLock, DataDirLocked
from appliance.web.app import build_app
from appliance.web.body_budget import BodyBudget
from appliance.web.edge import STATS, raise_open_files_limit
from appliance.web.listener import bind_socket, uvicorn_config
from appliance.web.pages.sign_in_guard import SignInGuard
from appliance.web.parts import Parts
from appliance.webhooks import delivery as webhooks

log = logging.getLogger("appliance")
WATCHDOG_GRACE_S = 5.0


class ApplianceServer(uvicorn.Server):
    """uvicorn's server, except that a signal ends in a clean return (exit 0) after
    the shutdown, not in re-raising the signal before our own clean-up has run."""

    def __init__(self, config: uvicorn.Config, shutdown_timeout_s: float,
                 on_signal: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.shutdown_timeout_s = shutdown_timeout_s
        self.signalled_at: float | None = None
        self.on_signal = on_signal  # the loops stop taking new work at once
        self._signalled = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None

    async def main_loop(self) -> None:
        """uvicorn's loop of ticks (the Date header, once a second), except that a signal
        ends the wait at once instead of at the next tenth of a second."""
        self._loop = asyncio.get_running_loop()
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._signalled.wait(), 0.1)
            should_exit = await self.on_tick(counter)

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.signalled_at is None:
            self.signalled_at = time.monotonic()
            # A fresh context: the signal may land while a request's task runs.
            contextvars.Context().run(
                log.info, "stopping", extra={"signal": signal.Signals(sig).name})
            threading.Thread(target=self._watchdog, name="shutdown-watchdog",
                             daemon=True).start()
            if self.on_signal is not None:
                self.on_signal()
        super().handle_exit(sig, frame)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._signalled.set)

    def _watchdog(self) -> None:
        time.sleep(self.shutdown_timeout_s + WATCHDOG_GRACE_S)
        log.error("shutdown took longer than %s s; exiting now", self.shutdown_timeout_s)
        logging.shutdown()
        os._exit(1)


def assemble(runtime: Runtime, intake: socket.socket | None = None,
             log_file: Path | None = None) -> Parts:
    """The composition root: every part of a serving process, built now, in start order.

    Each part's ``install`` takes the (open) runtime and what it needs of the parts
    before it, registers its loops and returns the part; nothing is made later by
    whoever asks first. ``intake``: the report intake's listening socket
    (``[reports] intake_port``), whose process :meth:`ReportIntake.start
    <appliance.web.intake_process.ReportIntake.start>` starts; ``log_file``: where
    that process logs. Stops run in the reverse order (the intake's first, then the
    webhooks', the sessions', the sender's).
    """
    settings = runtime.settings
    providers = Providers(settings, KINDS, now_ms=runtime.now_ms)
    worker, wake_imports = import_worker.install(runtime)
    report_loops.install(runtime, providers)
    pulls = puller.install(runtime, providers, inbound_poll.poller(runtime, providers))
    retention.install(runtime)
    sending = sender.install(runtime, providers, credit.install(runtime, providers),
                             pulled=pulls.lanes)
    campaigns = expansion.install(runtime, sending.wake, lambda: sending.health.lowered)
    orphans.install(runtime, providers)
    sessions = smpp_sessions.install(runtime, providers)
    delivery = webhooks.install(runtime)
    budget = BodyBudget(settings.http.max_inflight_body_bytes)
    metrics = Metrics()
    report_intake = None
    if intake is not None:  # the intake's process and its link: only with an intake port
        from appliance.web import intake_process

        report_intake = intake_process.install(runtime, metrics, intake, log_file,
                                               secret_values(settings))
    observability.install(runtime, metrics, Sources(sending, worker, providers, STATS,
                                                    budget, report_intake, pulls))
    backups.install(runtime)
    return Parts(runtime=runtime, providers=providers, sender=sending, campaigns=campaigns,
                 import_worker=worker, wake_imports=wake_imports, sessions=sessions,
                 webhooks=delivery, report_intake=report_intake, metrics=metrics,
                 body_budget=budget, sign_in_guard=SignInGuard(runtime), puller=pulls)


def run_server(settings: Settings, runtime: Runtime | None = None, *,
               sock: socket.socket | None = None, log_file: Path | None = None) -> None:
    """Serve until SIGTERM/SIGINT; then finish in-flight work and flush the writer.

    ``sock``: a listening socket already taken with :func:`bind_socket` (else it is
    taken here); ``log_file``: write the logs there instead of stderr.
    """
    setup_logging(settings.log_format, settings.log_level, settings.log_full_numbers,
                  secret_values(settings), path=log_file)
    ensure_data_dir(settings)
    raise_open_files_limit()
    lock = DataDirLock(settings.data_dir)
    lock.acquire()
    try:
        refusal = pending_restore(settings.data_dir)
        if refusal:
            raise DataDirLocked(refusal)
        sock = sock or bind_socket(settings)
        intake_sock = (bind_socket(settings, settings.reports.intake_port,
                                   flag="[reports] intake_port")
                       if settings.reports.intake_port else None)
        runtime = runtime or Runtime(settings)
        runtime.open()
        try:
            parts = assemble(runtime, intake_sock, log_file)
            intake = parts.report_intake
            app = build_app(parts)

            def on_signal() -> None:
                runtime.scheduler.request_stop()
                if intake is not None:
                    intake.forward_stop()

            server = ApplianceServer(uvicorn_config(app, settings), settings.shutdown_timeout_s,
                                     on_signal=on_signal)
            if intake is not None:
                intake.start()
            log.info("listening", extra={"url": f"http://{settings.host}:{settings.port}"})
            for warning in [*start_warnings(settings), *token_warnings(settings, KINDS)]:
                log.warning(warning)
            server.run(sockets=[sock])
        finally:
            runtime.close()
            log.info("stopped cleanly")
    finally:
        lock.release()
