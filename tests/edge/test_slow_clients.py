"""EDGE-1, EDGE-2: slow and many clients, big headers, the body budget, the row limit.

Real sockets against a real server whose timeouts are small (1.5 s) so the test is
quick; the defaults are the same code with bigger numbers.
"""

from __future__ import annotations

import contextlib
import re
import selectors
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.edge.support import (
    BODY_BUDGET,
    BODY_TIMEOUT_S,
    HEADER_TIMEOUT_S,
    IMPORT_MAX_ROWS,
    edge_config,
    raw_request,
    read_response,
    read_until_closed,
    signed_callback,
    status_and_json,
)
from tests.harness import Server, create_account, wait_for
from tests.reports.support import PROVIDER

SLOW_SOCKETS = 2100


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    root = tmp_path_factory.mktemp("edge")
    data_dir = root / "data"
    data_dir.mkdir()
    srv = Server(data_dir, config=edge_config(root / "edge.toml")).start()
    try:
        yield srv, create_account(data_dir)
    finally:
        srv.stop()


def metric(srv: Server, name: str) -> float:
    text = httpx.get(srv.url + "/metrics", timeout=5).text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.MULTILINE)
    assert found, f"no {name} in /metrics"
    return float(found.group(1))


def timed(fn: Callable[[], httpx.Response]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = fn()
    return answer, time.monotonic() - started


def test_a_slowloris_of_2100_sockets_cannot_stop_healthz_or_callbacks(
        edge: tuple[Server, str]) -> None:
    srv, _ = edge
    kinds = ("idle", "headers", "body")
    socks: dict[socket.socket, str] = {}
    try:
        opened = time.monotonic()
        for i in range(SLOW_SOCKETS):
            sock = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            kind = kinds[i % 3]
            if kind == "headers":  # a request line and half the headers, then nothing
                sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: 1\r\n")
            elif kind == "body":  # the headers of a callback, ten of its 1,000 bytes
                sock.sendall(f"POST /callbacks/{PROVIDER} HTTP/1.1\r\nHost: x\r\n"
                             "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                             "{\"ref\": \"A".encode())
            socks[sock] = kind
        wait_for(lambda: metric(srv, "appliance_http_connections_open") >= SLOW_SOCKETS,
                 10, message="the server to hold every slow socket")
        assert time.monotonic() - opened < HEADER_TIMEOUT_S, "too slow to open: proves nothing"

        with httpx.Client(base_url=srv.url, timeout=5) as client:
            health, health_s = timed(lambda: client.get("/healthz"))
            report, report_s = timed(lambda: signed_callback(client))
        assert health.status_code == 200 and health_s < 1.0, (health.status_code, health_s)
        assert 200 <= report.status_code < 300 and report_s < 1.0, (report.text, report_s)

        # Then the server lets every one of them go, after its timeout and not before.
        selector = selectors.DefaultSelector()
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ)
        answers: dict[str, list[bytes]] = {k: [] for k in kinds}
        closed_after: list[float] = []
        deadline = time.monotonic() + HEADER_TIMEOUT_S + BODY_TIMEOUT_S + 10
        pending = dict(socks)
        while pending and time.monotonic() < deadline:
            for key, _ in selector.select(timeout=0.5):
                ready = key.fileobj
                assert isinstance(ready, socket.socket)
                sock = ready
                try:
                    piece = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except ConnectionResetError:
                    piece = b""
                if piece:
                    answers[pending[sock]].append(piece)
                    continue
                selector.unregister(sock)
                closed_after.append(time.monotonic() - opened)
                del pending[sock]
        selector.close()
        assert not pending, f"{len(pending)} slow sockets were never closed"
        assert min(closed_after) >= HEADER_TIMEOUT_S * 0.9
        assert not answers["idle"], "an idle socket gets no answer, only a close"
        for kind in ("headers", "body"):
            assert len(answers[kind]) == SLOW_SOCKETS // 3
            assert all(a.startswith(b"HTTP/1.1 408 ") for a in answers[kind])
        assert b'"error": "request_timeout"' in answers["headers"][0]
    finally:
        for sock in socks:
            sock.close()


def test_a_body_that_trickles_is_closed_though_it_is_never_idle(edge: tuple[Server, str]) -> None:
    srv, key = edge
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
        sock.sendall(b"POST /api/contacts/import?list=slow HTTP/1.1\r\nHost: x\r\n"
                     b"Authorization: Bearer " + key.encode() + b"\r\n"
                     b"Content-Type: text/plain\r\nContent-Length: 100000\r\n\r\n")
        started = time.monotonic()
        sock.settimeout(0.25)
        answer = b""
        while time.monotonic() - started < BODY_TIMEOUT_S + 5:
            try:  # one byte every 0.25 s: never silent for body_timeout_s, far too slow
                sock.sendall(b"1")
                piece = sock.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                break
            if not piece:
                break
            answer += piece
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    assert BODY_TIMEOUT_S * 0.9 <= elapsed < BODY_TIMEOUT_S + 3


@pytest.mark.parametrize("stalls", ["headers", "body"])
def test_a_kept_alive_connections_next_request_gets_its_own_full_time_then_408(
        edge: tuple[Server, str], stalls: str) -> None:
    """The timers of one request are not cancelled when it is answered; they must still
    give the next request on the same connection its whole time from its own start,
    no less (a timer left from the first request) and not much more."""
    srv, _ = edge
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_response(sock).startswith(b"HTTP/1.1 200 ")
        # Idle between requests (not timed by these timers), past half of the first
        # request's timers, so a timer left from it would fire early in the next one.
        time.sleep(HEADER_TIMEOUT_S * 0.6)
        if stalls == "headers":
            sock.sendall(b"POST /callbacks/" + PROVIDER.encode() + b" HTTP/1.1\r\nHost: x\r\n")
        else:
            sock.sendall(b"POST /callbacks/" + PROVIDER.encode() + b" HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: 100\r\n\r\n{")
        started = time.monotonic()
        answer = read_until_closed(sock, 10)
        elapsed = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
    limit = HEADER_TIMEOUT_S if stalls == "headers" else BODY_TIMEOUT_S
    assert limit * 0.9 <= elapsed < limit + 3, elapsed


def test_headers_over_the_limit_are_431_and_not_read(edge: tuple[Server, str]) -> None:
    srv, _ = edge
    fine = raw_request(srv.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: "
                       + b"a" * 15_000 + b"\r\nConnection: close\r\n\r\n")
    assert fine.startswith(b"HTTP/1.1 200 ")
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    status, body = status_and_json(raw_request(srv.port, big))
    assert status == 431 and body["error"] == "headers_too_large"
    assert "16384" in str(body["message"])

    # 8 MB of header: answered at once, and /healthz does not notice.
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nX-Huge: " + b"b" * 65536)
        started = time.monotonic()
        sent = 65536
        sock.settimeout(0.05)
        answer = b""
        while not answer and sent < 8_000_000 and time.monotonic() - started < 10:
            try:
                sock.sendall(b"b" * 65536)
                sent += 65536
            except (BrokenPipeError, ConnectionResetError):
                break
            except TimeoutError:
                pass
            with contextlib.suppress(TimeoutError, ConnectionResetError):
                answer = sock.recv(65536)
        answered_s = time.monotonic() - started
        health = httpx.get(srv.url + "/healthz", timeout=5)
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    assert answered_s < 2.0 and sent < 8_000_000
    assert health.status_code == 200


def test_bodies_past_the_inflight_budget_are_503_with_retry_after(
        edge: tuple[Server, str]) -> None:
    srv, key = edge
    line = b"+90532" + b"1" * 992 + b"\n"  # 999 bytes: few lines, many bytes
    held_body = line * 1900
    head = (f"POST /api/contacts/import?list=budget HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(held_body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as holder:
        holder.sendall(head + held_body[:-100_000])  # all but the last 100 kB: it waits
        wait_for(lambda: metric(srv, "appliance_http_body_bytes_held") >= 1_700_000, 10,
                 message="the first body to be held")
        with srv.client(key) as api:
            declared = api.post("/api/contacts/import?list=second", content=line * 1500,
                                headers={"Content-Type": "text/plain"})
            assert declared.status_code == 503, declared.text
            assert declared.json()["error"] == "server_busy"
            assert int(declared.headers["Retry-After"]) > 0

            def streamed() -> Iterator[bytes]:  # no Content-Length: refused where it crosses
                for _ in range(15):
                    yield line * 100

            crossing = api.post("/api/contacts/import?list=third", content=streamed(),
                                headers={"Content-Type": "text/plain"})
            assert crossing.status_code == 503 and crossing.json()["error"] == "server_busy"
            # Small bodies still fit beside it: a callback is stored.
            assert signed_callback(api).status_code == 200
            assert BODY_BUDGET - metric(srv, "appliance_http_body_bytes_held") < 1_500_000

            holder.sendall(held_body[-100_000:])
            done = read_response(holder)
            assert done.startswith(b"HTTP/1.1 202 "), done[:200]
            wait_for(lambda: metric(srv, "appliance_http_body_bytes_held") == 0, 10,
                     message="the budget to be given back")
            again = api.post("/api/contacts/import?list=second", content=line * 1500,
                             headers={"Content-Type": "text/plain"})
            assert again.status_code == 202, again.text


def test_declared_bodies_are_reserved_so_uploads_that_do_not_fit_together_are_refused_at_once(
        edge: tuple[Server, str]) -> None:
    srv, key = edge
    size = 1_900_000  # under the import's limit; two of them cross the budget

    def upload(list_name: str) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        sock.sendall((f"POST /api/contacts/import?list={list_name} HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {key}\r\nContent-Type: text/plain\r\n"
                      f"Content-Length: {size}\r\n\r\n").encode()
                     + b"+905321234567\n" * 700)  # 10 kB of it, and then we wait
        return sock

    first = upload("reserved")
    try:
        wait_for(lambda: metric(srv, "appliance_http_body_bytes_held") >= size, 10,
                 message="the first body's length to be reserved")
        others = [upload(f"late{i}") for i in range(5)]
        try:
            for sock in others:
                # Refused before its body came, well inside the body timeout (before: each
                # streamed until the edge gave up on it, 408).
                started = time.monotonic()
                status, body = status_and_json(read_response(sock, BODY_TIMEOUT_S * 0.8))
                assert (status, body["error"]) == (503, "server_busy"), body
                assert time.monotonic() - started < BODY_TIMEOUT_S * 0.8
        finally:
            for sock in others:
                sock.close()
        assert metric(srv, "appliance_http_body_bytes_held") == size
    finally:
        first.close()  # the client goes away mid-body: its reservation is given back
    wait_for(lambda: metric(srv, "appliance_http_body_bytes_held") == 0, 10,
             message="the reservation to be given back")
    # Refused while it streamed (the row limit): given back as well.
    lines = b"+905321234567\n" * 100_000
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall((f"POST /api/contacts/import?list=rows HTTP/1.1\r\nHost: x\r\n"
                      f"Authorization: Bearer {key}\r\nContent-Type: text/plain\r\n"
                      f"Content-Length: {len(lines)}\r\n\r\n").encode() + lines[:200_000])
        assert status_and_json(read_response(sock))[0] == 413
    wait_for(lambda: metric(srv, "appliance_http_body_bytes_held") == 0, 10,
             message="the reservation to be given back")


def test_the_row_limit_is_decided_while_the_body_streams(edge: tuple[Server, str]) -> None:
    srv, key = edge
    lines = b"+905321234567\n" * 100_000  # 1.4 MB, twenty times the row limit
    head = (f"POST /api/contacts/import?list=rows HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {key}\r\nContent-Type: text/plain\r\n"
            f"Content-Length: {len(lines)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
        sock.sendall(head + lines[:200_000])  # a seventh of it, and then we wait
        answer = read_response(sock)
    status, body = status_and_json(answer)
    assert status == 413 and body["error"] == "too_many_rows"
    assert body["at_least"] is True and body["limit"] == IMPORT_MAX_ROWS
    assert IMPORT_MAX_ROWS < int(str(body["submitted"])) <= 200_000 // 14
    assert "at least" in str(body["message"])

    with srv.client(key) as api:
        escaped = "\n".join(["+905321234567"] * (IMPORT_MAX_ROWS + 50))
        as_json = api.post("/api/contacts/import", json={"list": "rows", "text": escaped})
        assert as_json.status_code == 413 and as_json.json()["at_least"] is True
        exact = api.post("/api/contacts/import?list=rows",
                         content=b"\n".join([b"+905321234567"] * (IMPORT_MAX_ROWS + 1)),
                         headers={"Content-Type": "text/plain"})
        assert exact.status_code == 413
        assert exact.json()["submitted"] == IMPORT_MAX_ROWS + 1
        assert exact.json()["at_least"] is False
        assert api.get("/api/lists/rows").status_code == 404


def test_edge_settings_show_in_config_check(tmp_path: Path) -> None:
    from tests.harness import run_cli

    out = run_cli("config", "check", "--config", str(edge_config(tmp_path / "c.toml")),
                  "--data-dir", str(tmp_path / "d")).stdout
    for key in ("header_timeout_s", "body_timeout_s", "max_header_bytes",
                "max_inflight_body_bytes", "min_free_bytes"):
        assert f'"{key}"' in out
