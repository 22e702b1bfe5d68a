"""Serving the simulator: in the foreground (``appliance simulator``) or in a thread."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading

import uvicorn

from appliance.simulator.behaviour import Behaviour
from appliance.simulator.server import Simulator
from appliance.simulator.smsc import SmscSimulator
from appliance.simulator.smsc_behaviour import SmscBehaviour


def _config(sim: Simulator, host: str, port: int) -> uvicorn.Config:
    return uvicorn.Config(sim.app, host=host, port=port, log_config=None, access_log=False,
                          lifespan="on", server_header=False, timeout_graceful_shutdown=2,
                          backlog=4096)


def serve(behaviour: Behaviour, host: str = "127.0.0.1", port: int = 9090) -> None:
    """Serve the simulator until SIGINT/SIGTERM."""
    uvicorn.Server(_config(Simulator(behaviour), host, port)).run()


def serve_with_smsc(behaviour: Behaviour | None, smsc: SmscBehaviour, host: str, port: int,
                    smpp_port: int) -> None:
    """The SMSC simulator, and the HTTP one unless ``behaviour`` is ``None``, until
    SIGINT/SIGTERM."""

    async def main() -> None:
        sim = SmscSimulator(smsc)
        await sim.start(host, smpp_port)
        try:
            if behaviour is not None:
                await uvicorn.Server(_config(Simulator(behaviour, sim), host, port)).serve()
            else:
                stop = asyncio.Event()
                loop = asyncio.get_running_loop()
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.add_signal_handler(sig, stop.set)
                await stop.wait()
        finally:
            await sim.stop()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


class SimulatorThread:
    """The simulator on its own event loop in a daemon thread (used by ``demo``); with
    ``smsc`` and ``smpp_port`` the SMSC simulator too, on the same loop."""

    def __init__(self, behaviour: Behaviour, host: str = "127.0.0.1", port: int = 9090,
                 smsc: SmscBehaviour | None = None, smpp_port: int = 0) -> None:
        self.smsc = SmscSimulator(smsc) if smsc is not None else None
        self.smpp_port = smpp_port
        self.simulator = Simulator(behaviour, self.smsc)
        self.server = uvicorn.Server(_config(self.simulator, host, port))
        self.host = host
        self.thread = threading.Thread(target=self._run, name="simulator", daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            if self.smsc is not None:
                await self.smsc.start(self.host, self.smpp_port)
            try:
                await self.server.serve()
            finally:
                if self.smsc is not None:
                    await self.smsc.stop()

        asyncio.run(main())

    def start(self, timeout: float = 10.0) -> SimulatorThread:
        self.thread.start()
        waited = 0.0
        while not self.server.started and waited < timeout and self.thread.is_alive():
            threading.Event().wait(0.02)
            waited += 0.02
        if not self.server.started:
            raise RuntimeError("the simulator did not start (is the port free?)")
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(5)
