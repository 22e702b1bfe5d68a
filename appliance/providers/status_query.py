"""Asking a provider about messages it has not reported (ROUTE-2): the request and the
answer, and nothing else.

A kind that can be asked (its declaration says ``status_query=True``) gives its adapter
the :class:`StatusQuery` verbs. Like a wire format they do no I/O: the puller
(:mod:`appliance.reports.puller`) picks the messages, paces the requests by the
provider's ``requests_per_s``/``pull_rate_per_s``, carries each request over the
provider's own HTTP transport, stores the answer raw first (as a callback's body: a
``raw_reports`` row with ``method = "PULL"``), and files the reports it yields through
the inbox, where newer wins; so a pulled "delivered" and a late pushed "delivered" are
one fact.

An answer says, per message asked about, one of four things (:class:`PullVerdict`):
a report (final or not: it goes through the inbox like a pushed one), still pending
(the provider knows the message and has nothing new), an id it does not know, or
nothing readable. Only a report moves a message; the others are recorded as attempts.
:meth:`StatusQuery.read_status_answer` never raises: a malformed, truncated or HTML
answer, or a code the provider's documentation does not list, is an ``error`` verdict
for every message asked about, never a made-up state (DLR-8).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import httpx

from .callbacks import CallbackRequest, ParsedReport, ProviderPart
from .outcome import short


@dataclass(frozen=True)
class PartTarget:
    """One part of a message to ask about, for a kind that asks per part (SMPP)."""

    part: int
    provider_msg_id: str | None  # the part's id as filed (None: never learnt)
    state: str  # the part's state now


@dataclass(frozen=True)
class PullTarget:
    """One message to ask about."""

    ref: str  # our ref
    provider_msg_id: str | None  # the provider's id, when the submission gave one
    msisdn: str  # E.164, as sent
    submitted_at_ms: int
    # Its parts, for a kind that asks about each (``StatusQuery.asks_per_part``).
    parts: tuple[PartTarget, ...] = ()


class PullVerdict(StrEnum):
    """What an answer said about one message (``appliance_report_pulls_total``'s
    ``outcome`` label)."""

    FINAL = "final"  # a final report: the message closes through the inbox
    PENDING = "pending"  # known, not final (an intermediate report may come with it)
    UNKNOWN_ID = "unknown_id"  # the provider does not know this message
    ERROR = "error"  # no readable answer about it (timeout, 5xx, HTML, unknown code)


@dataclass(frozen=True)
class PullAnswer:
    """What one status request came to.

    ``reports`` are :class:`ParsedReport` values exactly as a callback would give them
    (with the ref where the provider echoes it, else the provider's id). ``verdicts``
    maps the ref of every message asked about to its :class:`PullVerdict`; a message
    missing from it is ``ERROR``. ``error`` says why the whole answer could not be read
    (then every message asked about is ``ERROR``).
    """

    reports: tuple[ParsedReport, ...] = ()
    verdicts: dict[str, PullVerdict] = field(default_factory=dict)
    error: str | None = None

    def verdict(self, ref: str) -> PullVerdict:
        return self.verdicts.get(ref, PullVerdict.ERROR)

    @classmethod
    def failed(cls, reason: str) -> PullAnswer:
        return cls(error=short(reason))


class StatusQuery(ProviderPart, ABC):
    """A provider that can be asked about messages: the verbs of its adapter.

    ``status_batch_max`` is how many messages one request may ask about (1 for an API
    that takes one id a request); the puller asks about at most
    ``min(status_batch_max, batch_max)`` at a time, and together only about messages
    of the same :meth:`status_batch_key` (an API whose query names one campaign).
    """

    status_batch_max: int = 1
    # It asks about each part of a message by the part's id (SMPP ``query_sm``): the
    # puller gives it each target's :attr:`PullTarget.parts`.
    asks_per_part: bool = False
    # How long after its sending the provider still answers about a message (Infobip's
    # logs: 48 hours); ``None``: for as long as the delivery window. The puller's last
    # ask falls within it.
    answers_within_s: float | None = None

    def ready(self) -> bool:
        """Whether it can ask now; ``False`` (a session not bound) leaves the due
        messages due, not asked (by default always ready)."""
        return True

    def status_batch_key(self, target: PullTarget) -> str:
        """Messages one request may ask about together share this key (by default
        all do). A request built from targets of several keys asks about those of the
        first key; the others get no verdict (``ERROR``) and are asked again."""
        return ""

    @abstractmethod
    def build_status_request(self, targets: Sequence[PullTarget]) -> httpx.Request:
        """The status request about ``targets`` (1 to ``status_batch_max`` of them),
        against ``settings.base_url``."""

    @abstractmethod
    def _read_status_answer(self, targets: Sequence[PullTarget],
                            answer: CallbackRequest) -> PullAnswer:
        """Kind-specific reading; may raise anything, the caller wraps it."""

    def read_status_answer(self, targets: Sequence[PullTarget], status_code: int,
                           answer: CallbackRequest) -> PullAnswer:
        """What the provider answered about ``targets``. ``answer`` is the answer as it
        was stored raw (``method = "PULL"``, the request's URL and query, the answer's
        content type and body). Never raises: a non-2xx or an answer that cannot be read
        is :meth:`PullAnswer.failed`."""
        if not 200 <= status_code < 300:
            return PullAnswer.failed(f"{self.kind} status http {status_code}")
        try:
            return self._read_status_answer(targets, answer)
        except RecursionError:
            return PullAnswer.failed("nested too deeply")
        except Exception as exc:
            return PullAnswer.failed(f"{type(exc).__name__}: {exc}")


@dataclass(frozen=True)
class SessionReply:
    """One answer that came over a session (an SMPP ``query_sm_resp``): kept raw as it
    came (``query`` says what was asked), then read into ``answer``."""

    query: str
    content_type: str
    body: bytes
    answer: PullAnswer


@dataclass(frozen=True)
class SessionAnswers:
    """What asking over a session came to: every reply, and the verdict per ref (a ref
    missing from ``verdicts`` is ``ERROR``). No reply at all: nothing was answered."""

    replies: tuple[SessionReply, ...] = ()
    verdicts: dict[str, PullVerdict] = field(default_factory=dict)


class SessionStatusQuery(StatusQuery):
    """A status query carried over the provider's own session (SMPP ``query_sm``), not
    as an HTTP request: :meth:`ask` does the I/O, on the session's window and rate, and
    never raises. The HTTP verbs do not apply."""

    def build_status_request(self, targets: Sequence[PullTarget]) -> httpx.Request:
        raise NotImplementedError(f"{self.kind} is asked over its session")

    def _read_status_answer(self, targets: Sequence[PullTarget],
                            answer: CallbackRequest) -> PullAnswer:
        raise NotImplementedError(f"{self.kind} is asked over its session")

    @abstractmethod
    async def ask(self, targets: Sequence[PullTarget]) -> SessionAnswers:
        """Ask about ``targets`` over the session; every reply, kept raw by the caller."""


def status_query_of(part: object) -> StatusQuery | None:
    """``part`` as a :class:`StatusQuery`, or ``None`` when its kind cannot be asked."""
    return part if isinstance(part, StatusQuery) else None
