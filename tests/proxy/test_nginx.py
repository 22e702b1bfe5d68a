"""A real nginx, started with what ``appliance proxy-config nginx --standalone`` prints,
in front of a real ``appliance serve`` with its report intake (EDGE-1, IMP-2, issue:
"Behind a real proxy"). Every answer below is what a client of the proxy sees."""

from __future__ import annotations

import json
import re
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
from twilio.request_validator import RequestValidator

from tests.edge.support import read_response, status_and_json
from tests.harness import Server, create_account, db_rows, free_port, wait_for
from tests.proxy.support import PUBLIC, Nginx, make_certificate, needs_nginx
from tests.reports.support import SECRET, post_report
from tests.web.console_support import PASSWORD, create_user, csrf_of

pytestmark = needs_nginx

TW_TOKEN = "12345-auth-token"
TW_SID = "AC" + "0" * 32
HEADER_TIMEOUT_S = 2
MAX_BYTES = 64 * 1024 * 1024  # the default: the proxy must let such a body through
MAX_ROWS = 1_000_000  # the default


def write_config(path: Path, port: int, intake_port: int, public_url: str) -> Path:
    path.write_text(f"""
port = {port}
{f'public_url = "{public_url}"' if public_url else ''}

[http]
header_timeout_s = {HEADER_TIMEOUT_S}
body_timeout_s = 5

[reports]
intake_port = {intake_port}

[providers.gw]
kind = "http"
base_url = "http://127.0.0.1:9"
secret = "{SECRET}"

[providers.tw]
kind = "twilio"
base_url = "https://api.twilio.com"
account_sid = "{TW_SID}"
auth_token = "{TW_TOKEN}"
sender = "+15005550006"
""")
    return path


class Stack:
    """``appliance serve`` (with its report intake) behind nginx."""

    def __init__(self, root: Path, public_url: str, *nginx_args: str) -> None:
        (root / "data").mkdir(parents=True)
        self.intake_port = free_port()
        self.server = Server(root / "data", config=root / "appliance.toml")
        self.config = write_config(root / "appliance.toml", self.server.port,
                                   self.intake_port, public_url)
        self.nginx = Nginx.printed(root / "nginx", self.config, *nginx_args)

    def start(self) -> Stack:
        self.server.start()
        self.nginx.start()
        return self

    def stop(self) -> None:
        self.nginx.stop()
        self.server.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    running = Stack(tmp_path_factory.mktemp("proxy"), f"https://{PUBLIC}",
                    "--server-name", PUBLIC).start()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def key(stack: Stack) -> str:
    return create_account(stack.server.data_dir)


def proxied(stack: Stack, key: str | None = None) -> httpx.Client:
    headers = {"Host": PUBLIC, **({"Authorization": f"Bearer {key}"} if key else {})}
    return httpx.Client(base_url=stack.nginx.url, headers=headers, timeout=60)


def numbers(count: int, start: int = 0) -> Iterator[bytes]:
    for i in range(start, start + count):
        yield b"+9053%08d\n" % i


# -- imports -------------------------------------------------------------------------------


def test_a_3_6_mb_json_paste_is_accepted_and_imported_exactly(stack: Stack, key: str) -> None:
    lines = 80_000
    text = "".join(f"+9053{i:08d},Contact {i:08d} of the list pasted in\n" for i in range(lines))
    body = json.dumps({"list": "pasted", "text": text, "region": "TR"}).encode()
    assert len(body) > 3_600_000  # past nginx's stock 1 MB client_max_body_size
    with proxied(stack, key) as client:
        answer = client.post("/api/contacts/import", content=body,
                             headers={"Content-Type": "application/json"})
        assert answer.status_code == 202, answer.text
        assert answer.json()["total"] == lines
        poll = answer.json()["poll"]
        done = wait_for(lambda: (j := client.get(poll).json())["state"] == "DONE" and j,
                        120, interval=0.2, message="the import to finish")
        assert (done["inserted"], done["duplicates"], done["rejected"]) == (lines, 0, 0)
        assert client.get("/api/lists/pasted").json()["contacts"] == lines


def send_streamed(port: int, head: bytes, pieces: Iterator[bytes]) -> tuple[bytes, int]:
    """Send ``head`` then ``pieces`` until an answer is readable (or the peer stops
    taking the body); return the answer and how many body bytes were sent by then."""
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        for piece in pieces:
            readable, _, _ = select.select([sock], [], [], 0)
            if readable:
                break
            try:
                sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += len(piece)
        return read_response(sock, 30), sent


def request_head(path: str, key: str, ctype: str, length: int) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: {PUBLIC}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: {ctype}\r\nContent-Length: {length}\r\n\r\n").encode()


def in_pieces(lines: Iterator[bytes], size: int = 256 * 1024) -> Iterator[bytes]:
    buffer = bytearray()
    for line in lines:
        buffer += line
        if len(buffer) >= size:
            yield bytes(buffer)
            buffer.clear()
    if buffer:
        yield bytes(buffer)


def test_two_million_lines_get_our_too_many_rows_before_the_body_is_sent(
        stack: Stack, key: str) -> None:
    lines = 2_000_000
    total = len(b"+905300000000\n") * lines
    assert total < MAX_BYTES  # under the size limit: the row limit is what refuses it
    head = request_head("/api/contacts/import?list=huge&region=TR", key, "text/plain", total)
    answer, sent = send_streamed(stack.nginx.port, head, in_pieces(numbers(lines)))
    status, body = status_and_json(answer)
    assert (status, body["error"], body["at_least"]) == (413, "too_many_rows", True), body
    submitted = body["submitted"]
    assert body["limit"] == MAX_ROWS and isinstance(submitted, int)
    assert MAX_ROWS < submitted <= lines
    # Answered while the body streamed through nginx: the client had not sent it all.
    assert sent < total, (sent, total)
    assert db_rows(stack.server.data_dir,
                   "SELECT count(*) FROM import_jobs j JOIN lists l ON l.id = j.list_id"
                   " WHERE l.name = 'huge'")[0][0] == 0


def test_a_body_past_max_bytes_gets_our_json_413_not_nginx_html(stack: Stack, key: str) -> None:
    # Just past our limit: nginx lets it through (its limit has room), we refuse it.
    size = MAX_BYTES + 1000
    head = request_head("/api/contacts/import?list=big&region=TR", key, "text/plain", size)
    answer, sent = send_streamed(stack.nginx.port, head, in_pieces(numbers(size // 14 + 1)))
    status, body = status_and_json(answer)
    assert re.search(rb"(?im)^content-type: application/json", answer)
    assert (status, body["error"], body["limit"]) == (413, "payload_too_large", MAX_BYTES)
    assert str(body["message"]).startswith("the list is larger") and sent < size  # ours
    # Far past it: nginx's own refusal, in our shape all the same.
    far = MAX_BYTES * 2
    head = request_head("/api/contacts/import?list=big&region=TR", key, "text/plain", far)
    answer, _ = send_streamed(stack.nginx.port, head, iter([b"x" * 1024]))
    status, body = status_and_json(answer)
    assert (status, body["error"], body["limit"]) == (413, "payload_too_large", MAX_BYTES)
    assert str(body["message"]).startswith("the request is larger")  # nginx's


# -- reports -------------------------------------------------------------------------------


def stored(stack: Stack, ref: str) -> int:
    return int(db_rows(stack.server.data_dir,
                       "SELECT count(*) FROM report_inbox WHERE ref = ?", (ref,))[0][0])


def test_signed_callbacks_reach_the_report_intake_and_are_stored(stack: Stack) -> None:
    with proxied(stack) as client:
        for i in range(5):
            answer = post_report(client, {"ref": f"PROXIED{i}", "status": "delivered",
                                          "reported_at": "2026-01-01T00:00:00Z"})
            assert answer.status_code in (200, 202, 204), answer.text
        forged = post_report(client, {"ref": "FORGED", "status": "delivered"}, secret="nope")
        assert forged.status_code == 401 and forged.json()["error"] == "unauthorized"
    for i in range(5):
        assert stored(stack, f"PROXIED{i}") == 1
    assert stored(stack, "FORGED") == 0
    # nginx's log names the process that answered: the intake's port, never the server's.
    callbacks = [line for line in stack.nginx.access_log().splitlines() if "/callbacks/" in line]
    assert len(callbacks) == 6
    assert all(f"upstream=127.0.0.1:{stack.intake_port} " in line for line in callbacks)


def test_a_twilio_callback_signed_for_the_public_https_url_validates(stack: Stack) -> None:
    sid = "SM" + "1" * 32
    fields = [("AccountSid", TW_SID), ("ApiVersion", "2010-04-01"), ("From", "+15005550006"),
              ("MessageSid", sid), ("MessageStatus", "delivered"), ("SmsSid", sid),
              ("SmsStatus", "delivered"), ("To", "+905321234567")]
    path = "/callbacks/tw?ref=TWPROXIED"
    signature = RequestValidator(TW_TOKEN).compute_signature(f"https://{PUBLIC}{path}",
                                                             dict(fields))
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    with proxied(stack) as client:
        good = client.post(path, content=urlencode(fields),
                           headers={**form, "X-Twilio-Signature": signature})
        assert good.status_code in (200, 202, 204), good.text
        wrong = client.post(path.replace("TWPROXIED", "OTHER"), content=urlencode(fields),
                            headers={**form, "X-Twilio-Signature": signature})
        assert wrong.status_code == 401
    assert stored(stack, "TWPROXIED") == 1


# -- slow clients --------------------------------------------------------------------------


def open_connections(stack: Stack) -> int:
    text = httpx.get(stack.server.url + "/metrics", timeout=10).text
    found = re.search(r"(?m)^appliance_http_connections_open (\d+)", text)
    assert found, "no appliance_http_connections_open"
    return int(found.group(1))


def test_a_slowloris_against_nginx_never_reaches_the_appliance(stack: Stack) -> None:
    before = open_connections(stack)
    slow: list[socket.socket] = []
    try:
        for _ in range(300):
            sock = socket.create_connection(("127.0.0.1", stack.nginx.port), timeout=5)
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: " + PUBLIC.encode() + b"\r\nX-a: ")
            slow.append(sock)
        # They hold nginx, not us: a request through nginx is answered at once...
        with proxied(stack) as client:
            assert client.get("/healthz").status_code == 200
        # ...and the appliance holds no more connections than nginx's keepalive pool.
        assert open_connections(stack) <= before + 16 + 1
        # nginx drops them at [http] header_timeout_s, as the appliance would.
        started = time.monotonic()
        for sock in slow:
            sock.settimeout(HEADER_TIMEOUT_S + 10)
            try:
                sock.sendall(b"b")  # a trickle, not a header line: not enough to finish
                got = sock.recv(1024)
            except (ConnectionResetError, BrokenPipeError, TimeoutError):
                got = b""
            assert b"200 OK" not in got
        assert time.monotonic() - started < HEADER_TIMEOUT_S + 10
    finally:
        for sock in slow:
            sock.close()


# -- console cookies behind TLS ------------------------------------------------------------


def sign_in_cookie(client: httpx.Client) -> str:
    form = client.get("/login")
    assert form.status_code == 200, form.text
    answer = client.post("/login", data={"csrf_token": csrf_of(form.text), "username": "alice",
                                         "password": PASSWORD})
    assert answer.status_code == 303, answer.text
    [cookie] = [v for k, v in answer.headers.multi_items()
                if k == "set-cookie" and v.startswith("appliance_session=")]
    return cookie


def test_the_session_cookie_is_secure_when_nginx_says_https(
        tmp_path: Path) -> None:
    cert, key = make_certificate(tmp_path)
    # No https public_url: only what nginx forwards can make the cookie Secure.
    tls = Stack(tmp_path / "tls", "", "--server-name", PUBLIC,
                "--tls-cert", str(cert), "--tls-key", str(key)).start()
    try:
        create_user(tls.server.data_dir)
        with httpx.Client(base_url=f"https://127.0.0.1:{tls.nginx.port}", verify=False,
                          headers={"Host": PUBLIC}, timeout=30) as client:
            assert "; secure" in sign_in_cookie(client).lower()
        with httpx.Client(base_url=tls.server.url, timeout=30) as direct:
            assert "; secure" not in sign_in_cookie(direct).lower()
    finally:
        tls.stop()
