"""What the edge tests share: a server with small limits, raw sockets, a signed callback."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import httpx

from tests.reports.support import PROVIDER, SECRET, post_report

HEADER_TIMEOUT_S = 1.5
BODY_TIMEOUT_S = 1.5
BODY_BUDGET = 3_000_000
IMPORT_MAX_BYTES = 2_000_000
IMPORT_MAX_ROWS = 5_000


def edge_config(path: Path, *, min_free_bytes: int = 0, extra: str = "") -> Path:
    """A config with small edge limits and one signed ``http`` provider."""
    path.write_text(f"""
[http]
header_timeout_s = {HEADER_TIMEOUT_S}
body_timeout_s = {BODY_TIMEOUT_S}
max_header_bytes = 16384
max_inflight_body_bytes = {BODY_BUDGET}

[import]
max_bytes = {IMPORT_MAX_BYTES}
max_rows = {IMPORT_MAX_ROWS}

[storage]
min_free_bytes = {min_free_bytes}

[providers.{PROVIDER}]
kind = "http"
base_url = "http://127.0.0.1:9"
secret = "{SECRET}"
{extra}
""")
    return path


def signed_callback(client: httpx.Client, ref: str = "NOSUCHREF0000000") -> httpx.Response:
    """A report for a message we do not have: stored in the inbox, answered 2xx."""
    return post_report(client, {"ref": ref, "status": "delivered",
                                "reported_at": "2026-01-01T00:00:00Z"})


def raw_request(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """Send ``data`` on a fresh socket; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_until_closed(sock, timeout)


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    deadline = time.monotonic() + timeout
    got = b""
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            piece = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            break
        if not piece:
            break
        got += piece
    return got


def read_response(sock: socket.socket, timeout: float = 10.0) -> bytes:
    """One HTTP response (headers and its Content-Length of body) from ``sock``."""
    sock.settimeout(timeout)
    got = b""
    while b"\r\n\r\n" not in got:
        piece = sock.recv(65536)
        if not piece:
            return got
        got += piece
    head, _, body = got.partition(b"\r\n\r\n")
    found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    length = int(found.group(1)) if found else 0
    while len(body) < length:
        piece = sock.recv(65536)
        if not piece:
            break
        body += piece
    return head + b"\r\n\r\n" + body


def status_and_json(answer: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)
