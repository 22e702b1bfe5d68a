"""One outbox event as it is POSTed: ``message.status`` or ``inbound.received``.

A status event (OPS-5) says a message's state changed: ``{"event_id", "type", "ref",
"state", "previous", "at", "campaign_id"}``. An inbound event (TEAM-3) forwards an
inbound message to the receiver of an account it is listed to: ``{"event_id", "type",
"from", "to", "text", "provider", "received_at"}``. The body is compact UTF-8 JSON, the
bytes the signature covers; it is built from the stored row each time it is POSTed, and
is the same bytes every time (a receiver dedupes on ``event_id``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from appliance.clock import iso

STATUS: Final = "message.status"
INBOUND: Final = "inbound.received"
DEFAULT_RECEIVER: Final = 0  # the [webhooks] receiver; an account's is its account id


@dataclass(frozen=True)
class InboundFields:
    """What an ``inbound.received`` event tells of its inbound message."""

    sender: str  # "from": the number (E.164) or name it came from
    to: str
    text: str
    provider: str
    received_at: int


@dataclass(frozen=True)
class Event:
    """One outbox row: an event to deliver."""

    id: int  # the outbox row: the order events were written in
    event_id: str
    message_id: int  # 0 for an inbound event
    ref: str
    state: str
    previous: str | None
    campaign_id: int | None
    at: int
    attempts: int = 0
    next_try_at: int | None = None
    last_error: str | None = None
    receiver: int = DEFAULT_RECEIVER
    inbound: InboundFields | None = None

    @property
    def type(self) -> str:
        return STATUS if self.inbound is None else INBOUND

    def payload(self) -> dict[str, Any]:
        if self.inbound is not None:
            i = self.inbound
            return {"event_id": self.event_id, "type": INBOUND, "from": i.sender, "to": i.to,
                    "text": i.text, "provider": i.provider, "received_at": iso(i.received_at)}
        return {"event_id": self.event_id, "type": STATUS, "ref": self.ref,
                "state": self.state, "previous": self.previous, "at": iso(self.at),
                "campaign_id": self.campaign_id}

    def body(self) -> bytes:
        """The request body: compact UTF-8 JSON, the bytes the signature covers."""
        return json.dumps(self.payload(), separators=(",", ":"), ensure_ascii=False).encode()


# The columns an Event is read from: the outbox row ``w``, and the inbound message
# ``i`` (LEFT JOIN inbound_messages i ON i.id = w.inbound_id) an inbound event forwards.
EVENT_COLUMNS: Final = (
    "w.id, w.event_id, w.message_id, w.ref, w.state, w.previous, w.campaign_id, w.at,"
    " w.attempts, w.next_try_at, w.last_error, w.receiver, w.inbound_id, i.msisdn,"
    " i.to_number, i.text, i.provider, i.received_at")
EVENT_FROM: Final = ("webhook_outbox w LEFT JOIN inbound_messages i"
                     " ON i.id = w.inbound_id")


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def event_of(row: Any) -> Event:
    """The :class:`Event` of a row of :data:`EVENT_COLUMNS`."""
    inbound = None
    if row[12] is not None:
        inbound = InboundFields(str(row[13] or ""), str(row[14] or ""), str(row[15] or ""),
                                str(row[16] or ""), int(row[17] or 0))
    return Event(int(row[0]), str(row[1]), int(row[2]), str(row[3]), str(row[4]),
                 _opt_str(row[5]), _opt_int(row[6]), int(row[7]), int(row[8]),
                 _opt_int(row[9]), _opt_str(row[10]), int(row[11]), inbound)
