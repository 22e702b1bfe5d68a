"""Many messages in one request, for the kinds whose API takes them (ROUTE-1).

A kind whose declaration says ``many_per_request=True`` gives its adapter the
:class:`BatchWireFormat` verbs beside its one-message ones. Like a wire format they do
no I/O. The sender hands a batch only messages to the same provider with the same text
(after personalisation), the same encoding and the same İYS recipient type, at most
``batch_max`` of them (per provider, default 100); the transport carries the one request.

A batch's outcome is per message, from the money point of view as for one message: an
answer that says which numbers were taken gives each its own outcome; one that cannot be
read, a timeout or a kill once the request may have left makes the whole batch
``UNCERTAIN``. The exposure of an uncertain batch is ``concurrency × batch_max``
messages (``docs/providers.md``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import httpx

from .callbacks import ProviderPart
from .outcome import Outcome, OutgoingMessage, SubmitResult, short


class BatchWireFormat(ProviderPart, ABC):
    """An HTTP provider's request for many messages of one text, and its answer."""

    @abstractmethod
    def build_batch_request(self, msgs: Sequence[OutgoingMessage]) -> httpx.Request:
        """One submit request for ``msgs`` (2 to ``batch_max`` of them, one text)."""

    @abstractmethod
    def _interpret_batch_response(self, msgs: Sequence[OutgoingMessage],
                                  response: httpx.Response) -> list[Outcome]:
        """Kind-specific reading: one outcome per message, in ``msgs``' order."""

    def interpret_batch_response(self, msgs: Sequence[OutgoingMessage],
                                 response: httpx.Response) -> list[Outcome]:
        """One :class:`Outcome` per message, in order. Never raises: an answer that
        cannot be read (or gives the wrong number of outcomes) makes every message
        ``UNCERTAIN``; the request reached the provider."""
        try:
            out = self._interpret_batch_response(msgs, response)
        except Exception as exc:
            return _all(msgs, f"{self.kind} batch answer unreadable: {type(exc).__name__}")
        if len(out) != len(msgs):
            return _all(msgs, f"{self.kind} batch answer names {len(out)} of {len(msgs)}")
        return out


def batch_validity_s(msgs: Sequence[OutgoingMessage]) -> int | None:
    """The validity (ROUTE-4) of a request whose kind takes one for all its messages: the
    shortest of theirs (the sender batches messages with a validity apart from those
    without), so none is sent later than its own allows."""
    found = [m.validity_s for m in msgs if m.validity_s is not None]
    return min(found) if found else None


def _all(msgs: Sequence[OutgoingMessage], error: str) -> list[Outcome]:
    return [Outcome(SubmitResult.UNCERTAIN, error=short(error)) for _ in msgs]


def batch_wire_of(part: object) -> BatchWireFormat | None:
    """``part`` as a :class:`BatchWireFormat`, or ``None`` when its kind sends one
    message a request."""
    return part if isinstance(part, BatchWireFormat) else None
