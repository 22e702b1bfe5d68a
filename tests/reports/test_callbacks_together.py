"""The own port's callbacks stored together (``CallbacksTogether``): those that arrive
beside each other share one write unit and one commit, each is still answered by its
own outcome, and a failure of the write reaches every caller it holds (DLR-2)."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest

from appliance.config import Settings
from appliance.providers.http_json import body_signature
from appliance.reports.apply import Receipt
from appliance.reports.inbox import InboxReport, RawCallback
from appliance.store import Store
from appliance.store.writer import WriterClosed
from appliance.web import callback_store
from appliance.web.callback_check import Checked
from appliance.web.callback_store import CallbacksTogether
from tests.harness import Server, db_read
from tests.reports.support import (
    PROVIDER,
    SECRET,
    add_account,
    add_message,
    http_provider_config,
    message,
    one,
)
from tests.reports.support import report as a_report

NOW = 1_700_000_000_000
UNSTORABLE_AT = 2**64  # no engine files a report sent then: its interpretation fails


def checked(n: int, reports: list[InboxReport]) -> Checked:
    raw = RawCallback(PROVIDER, "POST", "application/json", "", b'{"n": %d}' % n)
    return Checked(PROVIDER, raw, reports, None, (200, b"", "text/plain"), None)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store[Any]]:
    s = Store.open(str(tmp_path / "appliance.db"))
    try:
        yield s
    finally:
        s.close()


def together(s: Store[Any]) -> CallbacksTogether:
    return CallbacksTogether(s.writer, Settings(), lambda: NOW)


def test_callbacks_queued_together_are_one_unit_and_each_gets_its_own_receipt(
        store: Store[Any]) -> None:
    store.writer.call(lambda c: add_message(c, add_account(c), "known"))
    units_before = store.writer.stats.units
    batch = [checked(1, [a_report("unknown", "DELIVERED", 1000)]),
             checked(2, [a_report("known", "DELIVERED", 2000)]),
             checked(3, [a_report("bad", "DELIVERED", UNSTORABLE_AT)]),
             checked(4, [a_report("known", "DELIVERED", 2000)])]

    async def run() -> list[Receipt | None]:
        lane = together(store)
        return list(await asyncio.gather(*(lane.store(c) for c in batch)))

    unknown, known, bad, repeat = asyncio.run(run())
    assert unknown is not None and unknown.waiting == ["unknown"]
    assert known is not None and known.outcomes == {"APPLY": 1}
    assert bad is not None and bad.filed == 0 and bad.error is not None  # kept raw
    assert repeat is not None and repeat.repeats == 1
    # Queued in one turn of the event loop: one unit took them all.
    assert store.writer.stats.units - units_before == 1
    assert store.readers.call(lambda c: message(c, "known"))["state"] == "DELIVERED"
    assert store.readers.call(lambda c: one(c, "SELECT count(*) FROM raw_reports"))[0] == 4


def test_a_failed_write_reaches_every_callback_it_held_and_the_next_ones_still_go(
        store: Store[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    real = callback_store.store_batch
    fail = [True]

    def store_batch(*args: Any) -> Any:
        if fail[0]:
            raise apsw.FullError("database or disk is full")
        return real(*args)
    monkeypatch.setattr(callback_store, "store_batch", store_batch)

    async def run() -> tuple[list[Any], list[Any]]:
        lane = together(store)
        first = await asyncio.gather(*(lane.store(checked(n, [])) for n in range(3)),
                                     return_exceptions=True)
        fail[0] = False
        second = await asyncio.gather(*(lane.store(checked(n, [])) for n in range(3, 5)),
                                      return_exceptions=True)
        return first, second

    first, second = asyncio.run(run())
    assert all(isinstance(r, apsw.FullError) for r in first)
    assert all(isinstance(r, Receipt) for r in second)
    assert store.readers.call(lambda c: one(c, "SELECT count(*) FROM raw_reports"))[0] == 2


def test_one_store_serves_a_second_event_loop_after_the_first_stopped(
        store: Store[Any]) -> None:
    """The store keeps its loop while that loop runs (asking costs a system call a
    callback): a loop started after it stopped gets its futures on itself, not on the
    one that stopped."""
    lane = together(store)

    async def run(n: int) -> Receipt | None:
        return await lane.store(checked(n, []))

    assert isinstance(asyncio.run(run(1)), Receipt)
    assert isinstance(asyncio.run(run(2)), Receipt)
    assert store.readers.call(lambda c: one(c, "SELECT count(*) FROM raw_reports"))[0] == 2


def test_a_stopped_writer_fails_the_callback_at_once_and_every_one_after(
        store: Store[Any]) -> None:
    store.writer.stop()

    async def run() -> list[Any]:
        lane = together(store)
        outcomes = []
        for n in range(2):  # the second is not left waiting for a unit never sent
            outcomes.append(await asyncio.wait_for(
                asyncio.gather(lane.store(checked(n, [])), return_exceptions=True), 5))
        return outcomes

    assert [type(r[0]) for r in asyncio.run(run())] == [WriterClosed, WriterClosed]


@pytest.fixture
def gw_server(data_dir: Path, tmp_path: Path) -> Iterator[Server]:
    srv = Server(data_dir, config=http_provider_config(tmp_path / "appliance.toml")).start()
    try:
        yield srv
    finally:
        srv.stop()


def units(server: Server) -> float:
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line.startswith("appliance_writer_units_total "):
            return float(line.split()[1])
    raise AssertionError("no appliance_writer_units_total")


def test_a_burst_on_the_own_port_takes_fewer_units_than_callbacks_and_stores_each(
        gw_server: Server) -> None:
    """128 callbacks, 32 sent at once on 32 connections, to a real server: every one
    answered 2xx is on disk and each is answered by its own outcome (a forged one 401,
    nothing stored), in fewer write units than callbacks (one a callback before)."""
    def body(n: int) -> bytes:
        return json.dumps({"ref": f"BURST-{n}", "status": "delivered",
                           "reported_at": "2026-01-01T00:00:00Z"}).encode()

    def request(n: int) -> bytes:
        signature = "forged" if n == 7 else body_signature(body(n), SECRET)
        return (f"POST /callbacks/{PROVIDER} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"Content-Type: application/json\r\nX-Signature: {signature}\r\n"
                f"Content-Length: {len(body(n))}\r\n\r\n").encode() + body(n)

    before = units(gw_server)
    statuses: list[int] = []
    for start in range(0, 128, 32):
        sockets = [socket.create_connection(("127.0.0.1", gw_server.port), timeout=30)
                   for _ in range(32)]
        try:
            for n, sock in enumerate(sockets, start):  # all sent before any answer is read
                sock.sendall(request(n))
            for sock in sockets:
                answer = b""
                while b"\r\n" not in answer:
                    answer += sock.recv(4096) or b"\r\n"
                statuses.append(int(answer.split(b" ", 2)[1]))
        finally:
            for sock in sockets:
                sock.close()
    used = units(gw_server) - before
    assert statuses[7] == 401 and [s for n, s in enumerate(statuses) if n != 7] == [200] * 127
    # Answered 2xx only once committed: every one is there now.
    raw = db_read(gw_server.data_dir,
                  lambda c: [bytes(r[0]) for r in c.execute("SELECT body FROM raw_reports")])
    assert sorted(raw) == sorted(body(n) for n in range(128) if n != 7)
    # Each unit the lane sends takes what queued while the one before was committed;
    # the server's own loops add a few units of their own meanwhile.
    assert used <= 64, used
