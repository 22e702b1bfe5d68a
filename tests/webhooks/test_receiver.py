"""The test receiver itself: a request cut short is not recorded as one.

A sender killed with ``kill -9`` between writing a POST's headers and its body leaves
the receiver a request with no body. A real HTTP server drops it; so does the test
receiver, or the signature check of every request it recorded would fail on bytes the
appliance never finished sending.
"""

from __future__ import annotations

import socket

from appliance.webhooks.signature import sign
from tests.harness import wait_for
from tests.webhooks.support import SECRET, Receiver, signed


def raw_post(port: int, head_body: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(head_body)
        conn.shutdown(socket.SHUT_WR)
        conn.recv(4096)  # until the receiver is done with it and closes


def test_a_post_cut_short_is_not_recorded_and_a_whole_one_is() -> None:
    receiver = Receiver().start()
    try:
        body = b'{"event_id":"evt_1","ref":"r","state":"QUEUED","previous":null}'
        head = ("POST /hooks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"X-Appliance-Signature: {sign(body, SECRET)}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        raw_post(receiver.port, head + body[:10])
        raw_post(receiver.port, head + body)
        wait_for(lambda: len(receiver.all()) >= 1, 5, message="the whole POST")
        got = receiver.all()
        assert [r.body for r in got] == [body]
        assert signed(got[0]) and got[0].taken
    finally:
        receiver.stop()
