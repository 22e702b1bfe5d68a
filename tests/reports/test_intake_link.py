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
