"""The second-process intake design, built just far enough to be measured.

Not the product: a prototype of the design ``docs/benchmarks.md`` ("Report intake")
describes, so its figure is measured rather than estimated. Two processes:

- the **HTTP process** owns the socket (uvicorn, httptools, uvloop) and runs a bare
  ASGI callable for ``/callbacks/gw``: the real adapter verifies the signature and
  reads the reports, then the raw callback and its reports go to the writer's process
  over a Unix socket, and the answer waits for that process to say they are committed;
- the **writer's process** owns the database (the real schema, ``synchronous=FULL``):
  it takes every request waiting on the socket, runs the real write unit
  (:func:`appliance.reports.apply.receive`) for each in a savepoint of one transaction,
  commits, and only then acknowledges them, so a ``2xx`` still means on disk.

With ``--one-process`` the same two halves run in one process, the writer's half as a
thread: what the lean HTTP path gains without the second process.

Run by ``bench_callbacks_wrk.py --two-process``:
``python bench/intake_two_process.py PORT CONFIG DATA_DIR [--one-process]``.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from appliance.config import Settings  # noqa: E402
from appliance.provider_kinds import KINDS, load_settings  # noqa: E402
from appliance.providers import AuthError, CallbackRequest  # noqa: E402
from appliance.providers.registry import Providers  # noqa: E402
from appliance.reports.apply import receive  # noqa: E402
from appliance.reports.inbox import RawCallback, from_parsed  # noqa: E402
from appliance.runtime import Runtime  # noqa: E402
from appliance.store.schema import open_connection  # noqa: E402

FRAME = struct.Struct("!I")


def frames(buffer: bytearray) -> list[Any]:
    """The whole frames at the start of ``buffer`` (taken out of it)."""
    out, at = [], 0
    while len(buffer) - at >= 4:
        (size,) = FRAME.unpack_from(buffer, at)
        if len(buffer) - at - 4 < size:
            break
        out.append(pickle.loads(buffer[at + 4:at + 4 + size]))
        at += 4 + size
    del buffer[:at]
    return out


def writer_process(sock: socket.socket, settings: Settings) -> None:
    """Batches of write units, one commit each, acknowledged after the commit."""
    conn = open_connection(str(settings.db_path))
    buffer = bytearray()
    while True:
        data = sock.recv(1 << 20)
        if not data:
            return
        buffer += data
        sock.setblocking(False)
        try:  # whatever else is waiting joins this batch
            while True:
                more = sock.recv(1 << 20)
                if not more:
                    break
                buffer += more
        except BlockingIOError:
            pass
        sock.setblocking(True)
        batch = frames(buffer)
        if not batch:
            continue
        acks = []
        conn.execute("BEGIN IMMEDIATE")
        for ident, raw, reports, now in batch:
            conn.execute("SAVEPOINT unit")
            try:
                receive(conn, raw, reports, None, now)
                conn.execute("RELEASE unit")
                acks.append((ident, True))
            except Exception:
                conn.execute("ROLLBACK TO unit")
                conn.execute("RELEASE unit")
                acks.append((ident, False))
        conn.execute("COMMIT")
        blob = pickle.dumps(acks)
        sock.sendall(FRAME.pack(len(blob)) + blob)


class WriterLink(asyncio.Protocol):
    """The HTTP process's end of the socket: one future per request sent."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[bool]] = {}
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.serial = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's own class

    def connection_lost(self, exc: Exception | None) -> None:
        os._exit(0)  # the writer's process is gone: so is this one

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        for acks in frames(self.buffer):
            for ident, ok in acks:
                future = self.waiting.pop(ident)
                if not future.done():
                    future.set_result(ok)

    def store(self, raw: RawCallback, reports: list[Any], now: int) -> asyncio.Future[bool]:
        self.serial += 1
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.waiting[self.serial] = future
        blob = pickle.dumps((self.serial, raw, reports, now), protocol=5)
        assert self.transport is not None
        self.transport.write(FRAME.pack(len(blob)) + blob)
        return future


def http_process(sock: socket.socket, settings: Settings, port: int) -> None:
    import time

    import uvicorn

    adapter = Providers(settings, KINDS).get("gw").reports  # type: ignore[union-attr]
    assert adapter is not None
    link = WriterLink()
    status, content, media_type = adapter.callback_response()
    answer = [(b"content-type", media_type.encode()),
              (b"content-length", str(len(content)).encode())]

    async def app(scope: dict[str, Any], receive_: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive_()
                if message["type"] == "lifespan.startup":
                    loop = asyncio.get_running_loop()
                    await loop.connect_accepted_socket(lambda: link, sock)
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            message = await receive_()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope["query_string"].decode()
        req = CallbackRequest(method=scope["method"], url="http://127.0.0.1" + scope["path"],
                              query=query, headers=headers, body=body)
        try:
            adapter.verify(req)
        except AuthError:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        reports = [from_parsed("gw", p) for p in adapter.parse_reports(req)]
        raw = RawCallback(provider="gw", method=scope["method"],
                          content_type=headers.get("content-type", ""), query=query, body=body)
        ok = await link.store(raw, reports, int(time.time() * 1000))
        await send({"type": "http.response.start", "status": status if ok else 503,
                    "headers": answer})
        await send({"type": "http.response.body", "body": content})

    uvicorn.run(app, host="127.0.0.1", port=port, loop="uvloop", http="httptools",
                log_level="warning", access_log=False, lifespan="on")


def main() -> None:
    port, config, data_dir = int(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    settings = load_settings(config, env={}, overrides={"data_dir": data_dir})
    Runtime(settings).open().close()  # the schema, as the appliance makes it
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if "--one-process" in sys.argv:  # the same two halves, the writer as a thread
        threading.Thread(target=writer_process, args=(ours, settings), daemon=True).start()
        http_process(theirs, settings, port)
        return
    context = multiprocessing.get_context("spawn")
    http = context.Process(target=http_process, args=(theirs, settings, port), daemon=True)
    http.start()
    theirs.close()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        writer_process(ours, settings)
    finally:
        http.terminate()
        os._exit(0)


if __name__ == "__main__":
    main()
