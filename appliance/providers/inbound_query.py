"""Fetching inbound (MO) messages from a provider that offers them only by asking.

Some aggregators never push an inbound message: they keep it until asked (Netgsm's
inbound query). A kind whose provider does gives its adapter the :class:`InboundQuery`
verbs, and its declaration says ``inbound_query=True``. Like a wire format they do no
I/O: the poll that asks (:mod:`appliance.inbound.poll`, run by the puller's loop, the
one that pulls reports) carries the request over the provider's transport out of its
``requests_per_s``, stores the answer raw first (as an inbound webhook's body), and
files the messages it yields as the inbound route does
(:class:`~appliance.providers.callbacks.InboundMessage`: suppression on STOP/RET). A
provider that lists a message in every answer whose window holds it gives the same
``provider_msg_id`` each time, so a window asked twice files it once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import httpx

from .callbacks import CallbackRequest, InboundMessage, ProviderPart
from .outcome import short


@dataclass(frozen=True)
class InboundAnswer:
    """What one inbound query came to: the messages, or why none could be read
    (``error``; then the window is asked again)."""

    messages: tuple[InboundMessage, ...] = ()
    error: str | None = None

    @classmethod
    def failed(cls, reason: str) -> InboundAnswer:
        return cls(error=short(reason))


class InboundQuery(ProviderPart, ABC):
    """A provider whose inbound messages are fetched by asking, over a time window
    (asked by :mod:`appliance.inbound.poll`, in the puller's loop).
    ``inbound_window_max_s``: the longest window one query may name; a longer one is
    asked in parts."""

    inbound_window_max_s: float = 7 * 86_400.0

    @abstractmethod
    def build_inbound_request(self, since_ms: int, until_ms: int) -> httpx.Request:
        """The query for the messages received from ``since_ms`` to ``until_ms`` (epoch
        ms), against ``settings.base_url``."""

    @abstractmethod
    def _read_inbound_answer(self, answer: CallbackRequest) -> InboundAnswer:
        """Kind-specific reading; may raise anything, the caller wraps it."""

    def read_inbound_answer(self, status_code: int, answer: CallbackRequest) -> InboundAnswer:
        """The messages the answer lists (``answer`` as it was stored raw). Never
        raises: a non-2xx or an answer that cannot be read is
        :meth:`InboundAnswer.failed`."""
        if not 200 <= status_code < 300:
            return InboundAnswer.failed(f"{self.kind} inbound http {status_code}")
        try:
            return self._read_inbound_answer(answer)
        except RecursionError:
            return InboundAnswer.failed("nested too deeply")
        except Exception as exc:
            return InboundAnswer.failed(f"{type(exc).__name__}: {exc}")


def inbound_query_of(part: object) -> InboundQuery | None:
    """``part`` as an :class:`InboundQuery`, or ``None`` when its provider pushes its
    inbound messages (or has none)."""
    return part if isinstance(part, InboundQuery) else None
