"""The HTTP transport over real sockets: what went out, and what each failure means.

A small asyncio server on 127.0.0.1 plays the provider, byte for byte, so each case is
the real thing: a refused connection, a provider that hangs up after reading the
request, one that never answers, a broken answer, a compressed one, a redirect.
"""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import httpx

from appliance.outgoing_http import USER_AGENT
from appliance.provider_kinds import build_adapter
from appliance.providers import OutgoingMessage, SubmitResult
from appliance.providers.base import Outcome
from appliance.providers.http_transport import HttpTransport
from tests.harness import free_port
from tests.providers.test_provider_base import FULL

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
MSG = OutgoingMessage("01M8RQZTAK4NB4A9KEX78DKBZV", "+905321234567", "héllo",
                      "http://127.0.0.1:9/callbacks/gw")


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head, await reader.readexactly(length)


def answer(status: str, body: bytes, *headers: str) -> bytes:
    extra = "".join(f"{h}\r\n" for h in headers)
    return (f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def submit_to(handler: Handler | None, *msgs: OutgoingMessage, timeout_s: float = 5.0,
              concurrency: int = 1) -> list[Outcome]:
    async def go() -> list[Outcome]:
        port = free_port()
        server = await asyncio.start_server(handler, "127.0.0.1", port) if handler else None
        adapter = build_adapter(replace(FULL, kind="http", base_url=f"http://127.0.0.1:{port}",
                                        concurrency=concurrency))
        transport = HttpTransport(adapter, adapter.settings, timeout_s)
        try:
            return list(await asyncio.gather(*(transport.submit(m) for m in msgs)))
        finally:
            await transport.close()
            if server is not None:
                server.close()
                await server.wait_closed()

    return asyncio.run(go())


def test_the_request_goes_out_as_the_wire_format_built_it_over_one_kept_connection() -> None:
    seen: list[tuple[bytes, bytes]] = []
    connections = 0

    async def provider(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                seen.append(await read_request(reader))
            except asyncio.IncompleteReadError:
                break
            writer.write(answer("200 OK", b'{"id": "p-%d"}' % len(seen)))
            await writer.drain()
        writer.close()

    msgs = [replace(MSG, ref=f"01M8RQZTAK4NB4A9KEX78DKC0{i}") for i in range(3)]
    outs = submit_to(provider, *msgs)
    assert [(o.result, o.provider_msg_id) for o in outs] == [
        (SubmitResult.ACCEPTED, f"p-{i}") for i in (1, 2, 3)]
    assert connections == 1  # keep-alive: one connection for the three
    head, body = seen[0]
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /messages HTTP/1.1"
    headers = {k.lower(): v.strip() for k, v in (h.split(":", 1) for h in lines[1:] if h)}
    assert headers["user-agent"] == USER_AGENT
    assert headers["content-type"] == "application/json"
    assert headers["authorization"].startswith("Bearer ")
    assert json.loads(body) == {"ref": msgs[0].ref, "to": MSG.msisdn, "body": "héllo",
                                "callback_url": MSG.callback_url}


def test_a_compressed_answer_is_read_and_a_redirect_is_not_followed() -> None:
    async def gzipped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer("200 OK", gzip.compress(b'{"id": "z-1"}'), "Content-Encoding: gzip"))
        await writer.drain()
        writer.close()

    [out] = submit_to(gzipped, MSG)
    assert (out.result, out.provider_msg_id) == (SubmitResult.ACCEPTED, "z-1")

    async def moved(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(answer("301 Moved Permanently", b"", "Location: http://127.0.0.1:9/x"))
        await writer.drain()
        writer.close()

    [out] = submit_to(moved, MSG)
    assert out.result is SubmitResult.RETRY and "127.0.0.1:9/x" in (out.error or "")


def test_a_refused_connection_sent_nothing_so_it_is_retried() -> None:
    [out] = submit_to(None, MSG)
    assert out.result is SubmitResult.RETRY
    assert out.error == "not sent: ConnectError"


def test_a_provider_that_hangs_up_after_reading_may_have_it() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.close()

    [out] = submit_to(hang_up, MSG)
    assert out.result is SubmitResult.UNCERTAIN
    assert out.error == "outcome unknown: RemoteProtocolError"


def test_no_answer_in_time_is_uncertain() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)
        writer.close()

    [out] = submit_to(silent, MSG, timeout_s=0.3)
    assert out.result is SubmitResult.UNCERTAIN
    assert out.error == "outcome unknown: ReadTimeout"


def test_a_broken_answer_is_uncertain() -> None:
    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")
        await writer.drain()
        writer.close()

    [out] = submit_to(garbage, MSG)
    assert out.result is SubmitResult.UNCERTAIN


def test_no_more_than_concurrency_submissions_are_in_flight() -> None:
    in_flight = 0
    most = 0
    connections = 0

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal in_flight, most, connections
        connections += 1
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            in_flight += 1
            most = max(most, in_flight)
            await asyncio.sleep(0.05)
            in_flight -= 1
            writer.write(answer("200 OK", b'{"id": "s"}'))
            await writer.drain()
        writer.close()

    msgs = [replace(MSG, ref=f"01M8RQZTAK4NB4A9KEX78DKC{i:02d}") for i in range(8)]
    outs = submit_to(slow, *msgs, concurrency=2)
    assert all(o.result is SubmitResult.ACCEPTED for o in outs)
    assert most == 2 and connections == 2


def test_a_request_lost_on_a_kept_connection_is_never_sent_again_by_the_client() -> None:
    received = 0

    async def once_then_hang_up(reader: asyncio.StreamReader,
                                writer: asyncio.StreamWriter) -> None:
        nonlocal received
        await read_request(reader)
        received += 1
        writer.write(answer("200 OK", b'{"id": "first"}'))
        await writer.drain()
        await read_request(reader)  # the second, on the kept connection: taken, no answer
        received += 1
        writer.close()

    async def go() -> list[Outcome]:
        port = free_port()
        server = await asyncio.start_server(once_then_hang_up, "127.0.0.1", port)
        adapter = build_adapter(replace(FULL, kind="http", base_url=f"http://127.0.0.1:{port}",
                                        concurrency=1))
        transport = HttpTransport(adapter, adapter.settings, 5.0)
        try:
            first = await transport.submit(MSG)
            second = await transport.submit(replace(MSG, ref="01M8RQZTAK4NB4A9KEX78DKC99"))
            return [first, second]
        finally:
            await transport.close()
            server.close()
            await server.wait_closed()

    first, second = asyncio.run(go())
    # A resend by the client would have been answered on a new connection (ACCEPTED).
    assert first.result is SubmitResult.ACCEPTED
    assert second.result is SubmitResult.UNCERTAIN
    assert received == 2


def test_a_local_error_before_any_byte_left_is_retry_not_uncertain() -> None:
    """A timeout of ``nan`` ends every wait at once, before the connection is made:
    nothing was sent, so the message may be sent again (never "outcome unknown")."""
    received: list[bytes] = []

    async def provider(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.read())
        writer.close()

    [out] = submit_to(provider, MSG, timeout_s=float("nan"))
    assert out.result is SubmitResult.RETRY, out
    assert out.error is not None and out.error.startswith("not sent:")
    assert not any(received)


def test_a_provider_that_never_answers_stays_uncertain_once_connected() -> None:
    """The rule it narrows still holds: once the connection was there, a deadline that
    fires may follow a request the provider has."""

    async def provider(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(30)

    [out] = submit_to(provider, MSG, timeout_s=0.3)
    assert out.result is SubmitResult.UNCERTAIN, out


def test_sends_and_status_pulls_share_one_requests_per_s() -> None:
    """``requests_per_s`` bounds every request to the provider, sends and pulls together
    (issue 28, "Two rates"): five submissions and five status requests made at once
    reach the provider one every ``1 / requests_per_s`` seconds, in whatever order."""
    rate = 10.0
    arrived: list[tuple[float, str]] = []

    async def provider(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head, _ = await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            arrived.append((time.monotonic(), head.split(b" ", 1)[0].decode()))
            writer.write(answer("200 OK", b'{"id": "p"}'))
            await writer.drain()
        writer.close()

    async def go() -> int:
        port = free_port()
        server = await asyncio.start_server(provider, "127.0.0.1", port)
        settings = replace(FULL, kind="http", base_url=f"http://127.0.0.1:{port}",
                           concurrency=10, rate_per_s=1000.0)
        adapter = build_adapter(settings)
        transport = HttpTransport(adapter, adapter.settings, 5.0, requests_per_s=rate)
        status = httpx.Request("GET", f"http://127.0.0.1:{port}/status")
        try:
            sends = [transport.submit(replace(MSG, ref=f"01M8RQZTAK4NB4A9KEX78DKD{i:02d}"))
                     for i in range(5)]
            pulls = [transport.exchange(status) for _ in range(5)]
            await asyncio.gather(*sends, *pulls)
            return transport.requests_made
        finally:
            await transport.close()
            server.close()
            await server.wait_closed()

    made = asyncio.run(go())
    assert made == 10
    assert sorted(method for _, method in arrived) == ["GET"] * 5 + ["POST"] * 5
    times = sorted(t for t, _ in arrived)
    # The first goes at once (a burst of one), then one every 0.1 s: nine gaps at least.
    # (A request may reach the provider a little sooner after leaving than the one
    # before did: a few ms each side.)
    assert times[-1] - times[0] >= 9 / rate - 0.05, times
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= 1 / rate - 0.05, gaps
