"""The report intake's link frames: a callback sent as the fields of its raw body and
reports comes out on the server's side as the same dataclasses, field for field."""

from __future__ import annotations

import dataclasses

from appliance.reports.inbox import InboxReport, RawCallback
from appliance.reports.intake_link import callback_fields, callback_of, frame, frames


def test_a_callback_crosses_the_link_field_for_field() -> None:
    raw = RawCallback("gw", "POST", "application/json", "a=1", b'{"ref": "R-1"}')
    reports = [InboxReport("gw", "R-1", "p-9", "delivrd", 1_700_000_000_123, "DELIVERED",
                           "000", "pull"),
               InboxReport("gw", "", "p-10", "undeliv", 0, "FAILED")]
    raw_fields, report_fields = callback_fields(raw, reports)
    buffer = bytearray(frame(("store", 7, "gw", raw_fields, report_fields, None, 1.5, [], None))
                       + frame(("requests", [])))
    first, second = frames(buffer)
    assert not buffer and second == ("requests", [])
    assert callback_of(first) == (7, "gw", raw, reports, None, 1.5, [], None)


def test_the_fields_sent_are_every_field_in_the_order_declared() -> None:
    """A field added to either dataclass must be added to the frame: positional
    rebuilding would otherwise shift every field after it."""
    def distinct(cls: type) -> object:
        values = {f.name: (i if f.type == "int" else f"v{i}".encode() if f.type == "bytes"
                           else f"v{i}") for i, f in enumerate(dataclasses.fields(cls))}
        return cls(**values)

    raw, report = distinct(RawCallback), distinct(InboxReport)
    assert isinstance(raw, RawCallback) and isinstance(report, InboxReport)
    raw_fields, (report_fields,) = callback_fields(raw, [report])
    assert raw_fields == dataclasses.astuple(raw)
    assert report_fields == dataclasses.astuple(report)


def test_the_frames_of_one_turn_go_in_one_write_and_each_gets_its_own_outcome() -> None:
    """The intake's end (``Link``) writes the callbacks checked in one turn of its loop
    together, at the end of the turn, over a real socket pair; the server's answer
    settles each by its own number."""
    import asyncio
    import socket

    from appliance.web.intake_app import Link

    async def run() -> tuple[list[bytes], list[bool]]:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        loop = asyncio.get_running_loop()
        link = Link()
        await loop.connect_accepted_socket(lambda: link, ours)
        writes: list[bytes] = []
        assert link.transport is not None
        real_write = link.transport.write

        def write(data: bytes | bytearray | memoryview) -> None:
            writes.append(bytes(data))
            real_write(data)
        link.transport.write = write  # type: ignore[method-assign]
        futures = [link.store(("gw", (), [], None, None, [], None)) for _ in range(3)]
        assert not writes  # not yet: at the end of the turn
        theirs.setblocking(False)
        received = bytearray()
        while len(frames(bytearray(received))) < 3:
            received += await asyncio.wait_for(loop.sock_recv(theirs, 65536), 5)
        sent = frames(received)
        assert [(kind, ident) for kind, ident, *_ in sent] == [
            ("store", 1), ("store", 2), ("store", 3)]
        theirs.sendall(frame(("stored", [(3, True), (1, False), (2, True)])))
        outcomes = [await asyncio.wait_for(f, 5) for f in futures]
        theirs.close()
        return writes, outcomes

    writes, outcomes = asyncio.run(run())
    assert len(writes) == 1
    assert outcomes == [False, True, True]
