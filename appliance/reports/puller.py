"""The puller (ROUTE-2): asks each provider that can be asked about the messages it has
not reported, one loop for every such kind.

A provider is asked when its kind declares a status query
(:class:`~appliance.providers.status_query.StatusQuery`) and its table leaves ``pull``
on (the default for such kinds but ``smpp``, whose ``query_sm`` is off until set).
Each step, for each such provider whose pace allows a
request now: the messages whose ask is due (:func:`appliance.reports.pull_schedule.due`,
oldest submission first), at most ``min(status_batch_max, batch_max)`` of them, are
recorded as asked in one write unit (which re-checks that each is still open: a final
message is never asked about), the kind builds one status request, the provider's own
transport carries it, and the answer is stored raw first and read through the inbox
(:mod:`appliance.reports.pull_answers`). A kind asked over its own session
(:class:`~appliance.providers.status_query.SessionStatusQuery`: SMPP ``query_sm``) does
the asking itself, and each of its replies is stored the same way; while its session
is not bound nothing is asked. Requests go out at most ``pull_rate_per_s`` a
second per provider, and never faster than its ``requests_per_s`` (the kind's
published limit when unset) nor than the kind's published limit of status queries
(``status_queries_per_s``: Netgsm 10 a minute, Verimor 20), whatever
``pull_rate_per_s`` says: the smallest wins. They go evenly spaced, one at a time.
A batch that is not full waits up to :func:`fill_wait_s` (a tenth of ``pull_after_s``,
at most a second) for more messages to fall due: a campaign's messages fall due as
fast as they were sent, and asking about each few at once would spend a request on
them (the figure is in ``docs/benchmarks.md``, "Pulls").

The same loop polls for inbound messages where a provider keeps them until asked
(Netgsm: :mod:`appliance.inbound.poll`, handed to :func:`install`). Each step runs the
two halves one after the other, each on its own schedule (the status pulls: each
message's due time and backoff, each provider's pace; the inbound poll: each provider
every ``inbound_poll_s``), and sleeps until the earlier of the two is due (or until woken,
through the loop's handle). Each half's failures are caught and logged apart, so a
failing inbound poll never skips the status pulls, nor they it. The halves take turns:
an inbound query that hangs holds the status pulls for at most the exchange's bound
(three times ``[sending] submit_timeout_s``), and both go out of the provider's
``requests_per_s``.

On PostgreSQL the loop, both halves, runs in one process at a time
(``Runtime.singleton``). Its counts (``appliance_report_pulls_total{provider,outcome}``,
one per message asked about) are this process's.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import httpx

from appliance.config import ProviderSettings
from appliance.providers.callbacks import CallbackRequest
from appliance.providers.kind import ProviderKind
from appliance.providers.outcome import short
from appliance.providers.registry import Providers
from appliance.providers.status_query import (
    PullAnswer,
    PullTarget,
    PullVerdict,
    SessionAnswers,
    SessionStatusQuery,
    StatusQuery,
)
from appliance.providers.transport import Provider
from appliance.reports import pull_answers
from appliance.reports.cutoff import HOUR_MS
from appliance.reports.inbox import RawCallback
from appliance.reports.pull_schedule import Pacing, due, record_asks
from appliance.runtime import Runtime
from appliance.scheduler import Wake, log_failure

log = logging.getLogger("appliance.reports")
LOOP = "puller"
POLL_S = 1.0  # longest wait between looks for due messages
FILL_SHARE = 0.1  # of pull_after_s: how long a batch that is not full waits to fill
FILL_MAX_S = 1.0
MASK = "***"


def pulls_on(provider: Provider, kind: ProviderKind) -> bool:
    """Whether the puller asks this provider: its kind can be asked and its table's
    ``pull`` says so (unset: the kind's default, on for every such kind but ``smpp``)."""
    if provider.status is None or not kind.status_query:
        return False
    pull = provider.settings.pull
    return kind.pull_by_default if pull is None else pull


def pull_rate(settings: ProviderSettings, kind: ProviderKind) -> float:
    """Status requests a second: ``pull_rate_per_s``, within ``requests_per_s`` (the
    table's, else the kind's published limit; 0: none) and within the kind's published
    limit of status queries (``status_queries_per_s``; 0: none): the smallest wins."""
    bounds = (settings.pull_rate_per_s, settings.requests_per_s or kind.requests_per_s,
              kind.status_queries_per_s)
    return min(b for b in bounds if b > 0)


@dataclass
class PullLane:
    """One provider as the puller asks it."""

    name: str
    provider: Provider
    query: StatusQuery
    batch: int
    interval_s: float  # between two requests
    secrets: tuple[str, ...]  # the table's secret values, kept out of the raw rows
    free_at: float = 0.0  # monotonic time the next request may go
    partial_since: float | None = None  # monotonic time a batch not full was first due


def fill_wait_s(lane: PullLane) -> float:
    """How long a batch that is not full may wait for more messages to fall due."""
    return min(FILL_MAX_S, FILL_SHARE * lane.provider.settings.pull_after_s)


class InboundPoll(Protocol):
    """The loop's other half: the inbound poll
    (:class:`appliance.inbound.poll.InboundPoller`, given by the composition root)."""

    async def step(self) -> float:
        """Ask each provider whose turn it is; the seconds until the next one's turn."""
        ...


class Puller:
    """The loop's state: its lanes and its counts, and the inbound poll it runs too."""

    def __init__(self, appliance: Runtime, lanes: list[PullLane],
                 inbound: InboundPoll | None = None) -> None:
        self.appliance = appliance
        self.lanes = {lane.name: lane for lane in lanes}
        self.inbound = inbound
        self.counts: Counter[tuple[str, str]] = Counter()  # (provider, outcome)
        self.requests: Counter[str] = Counter()  # status requests made, by provider
        self.wake: Wake | None = None

    def asks(self, provider: str) -> bool:
        """Whether ``provider`` is asked about its messages (``POST .../pull`` needs it)."""
        return provider in self.lanes

    def pacing(self, lane: PullLane) -> Pacing:
        """The lane's schedule: the delivery window, or the time the provider answers
        about a message when that is shorter (its last ask falls within it)."""
        window_ms = int(self.appliance.settings.sending.delivery_window_hours * HOUR_MS)
        within = lane.query.answers_within_s
        if within is not None:
            window_ms = min(window_ms, int(within * 1000))
        return Pacing(after_ms=int(lane.provider.settings.pull_after_s * 1000),
                      window_ms=window_ms)

    async def step(self) -> float | None:
        """One step of the loop: the status pulls, then the inbound poll, each caught
        apart; the wait until the earlier of the two is due."""
        waits: list[float] = []
        if self.lanes:
            try:
                waits.append(await self.pull_step())
            except Exception as exc:  # the inbound poll still goes; pulls look again soon
                log_failure(log, "status pulls", LOOP, exc)
                waits.append(POLL_S)
        if self.inbound is not None:
            try:
                waits.append(await self.inbound.step())
            except Exception as exc:  # each provider's failures are its own: a last guard
                log_failure(log, "inbound poll", LOOP, exc)
        return min(waits, default=None)

    async def pull_step(self) -> float:
        """Ask each provider whose pace allows a request now; the wait until one may."""
        wait = POLL_S
        for lane in self.lanes.values():
            now = time.monotonic()
            if now < lane.free_at:
                wait = min(wait, lane.free_at - now)
                continue
            if await self.ask(lane):
                wait = min(wait, max(0.0, lane.free_at - time.monotonic()))
        return wait

    async def ask(self, lane: PullLane) -> bool:
        """One status request about the lane's due messages; ``False`` when none is due."""
        if not lane.query.ready():
            return False  # a session not bound: the due messages wait, not asked
        store = self.appliance.store
        now_ms = self.appliance.now_ms()
        pacing = self.pacing(lane)
        ids = await store.readers.run(lambda c: due(c, lane.name, now_ms, pacing, lane.batch))
        if not ids:
            lane.partial_since = None
            return False
        if len(ids) < lane.batch:  # let it fill a little: one request for more of them
            now = time.monotonic()
            if lane.partial_since is None:
                lane.partial_since = now
            until = lane.partial_since + fill_wait_s(lane)
            if now < until:
                lane.free_at = max(lane.free_at, until)
                return True
        lane.partial_since = None
        targets = await store.writer.run(
            lambda c: record_asks(c, lane.name, ids, now_ms, pacing, lane.query))
        if not targets:
            return True  # closed meanwhile: look again at once
        lane.free_at = max(time.monotonic(), lane.free_at) + lane.interval_s
        self.requests[lane.name] += 1
        query = lane.query
        stored = await (self._ask_session(lane, query, targets)
                        if isinstance(query, SessionStatusQuery)
                        else self._request(lane, targets))
        for outcome in stored.outcomes.values():
            self.counts[(lane.name, outcome)] += 1
        return True

    async def _request(self, lane: PullLane,
                       targets: list[PullTarget]) -> pull_answers.StoredAnswer:
        store = self.appliance.store
        try:
            request = lane.query.build_status_request(targets)
            response = await lane.provider.transport.exchange(request)
        except Exception as exc:  # no answer: an attempt for each, never a state
            log.warning("provider %s: status request failed: %s", lane.name,
                        short(f"{type(exc).__name__}: {exc}"))
            return await store.writer.run(
                lambda c: pull_answers.store_no_answer(c, lane.name, targets))
        raw, answer = read_answer(lane, targets, request, response)
        now_ms = self.appliance.now_ms()
        return await store.writer.run(
            lambda c: pull_answers.store_answer(c, lane.name, raw, answer, targets, now_ms))


    async def _ask_session(self, lane: PullLane, query: SessionStatusQuery,
                           targets: list[PullTarget]) -> pull_answers.StoredAnswer:
        """Ask over the provider's session; each reply stored raw, then read."""
        try:
            answers = await query.ask(targets)
        except Exception as exc:  # never a state: an attempt for each
            log.warning("provider %s: status query failed: %s", lane.name,
                        short(f"{type(exc).__name__}: {exc}"))
            answers = SessionAnswers()
        replies = [(RawCallback(provider=lane.name, method=pull_answers.METHOD,
                                content_type=r.content_type, query=r.query, body=r.body),
                    r.answer) for r in answers.replies]
        outcomes = {t.ref: answers.verdicts.get(t.ref, PullVerdict.ERROR).value
                    for t in targets}
        now_ms = self.appliance.now_ms()
        return await self.appliance.store.writer.run(
            lambda c: pull_answers.store_replies(c, lane.name, replies, outcomes, now_ms))


def read_answer(lane: PullLane, targets: list[PullTarget], request: httpx.Request,
                response: httpx.Response) -> tuple[RawCallback, PullAnswer]:
    """The answer as it is kept raw (the request's query without the table's secrets)
    and as the kind reads it (never raises)."""
    query = request.url.query.decode("utf-8", "replace")
    for secret in lane.secrets:
        query = query.replace(secret, MASK)
    content_type = response.headers.get("content-type", "")
    raw = RawCallback(provider=lane.name, method=pull_answers.METHOD,
                      content_type=content_type, query=query, body=response.content)
    seen = CallbackRequest(method=pull_answers.METHOD, url=str(request.url), query=query,
                           headers=dict(response.headers), body=response.content)
    return raw, lane.query.read_status_answer(targets, response.status_code, seen)


def lanes_of(providers: Providers, kinds: Mapping[str, ProviderKind]) -> list[PullLane]:
    """A lane for every configured provider the puller asks."""
    lanes: list[PullLane] = []
    for name, provider in providers.all().items():
        kind = kinds.get(provider.kind)
        query = provider.status
        if kind is None or query is None or not pulls_on(provider, kind):
            continue
        secret_names = {o.name for o in kind.options if o.secret}
        secrets = tuple(sorted((str(v) for k, v in provider.settings.options.items()
                                if k in secret_names and v), key=len, reverse=True))
        lanes.append(PullLane(
            name=name, provider=provider, query=query,
            batch=max(1, min(query.status_batch_max, provider.settings.batch_max)),
            interval_s=1.0 / pull_rate(provider.settings, kind), secrets=secrets))
    return lanes


def install(appliance: Runtime, providers: Providers,
            inbound: InboundPoll | None = None) -> Puller:
    """The puller over every provider it asks about messages, running ``inbound`` too
    (the inbound poll over every provider asked for inbound messages, ``None`` when
    there is none); its loop is registered only when there is one of either (on
    PostgreSQL in one process at a time)."""
    puller = Puller(appliance, lanes_of(providers, providers.kinds), inbound)
    if puller.lanes or inbound is not None:
        puller.wake = appliance.scheduler.add(LOOP, appliance.singleton(LOOP, puller.step),
                                              interval_s=POLL_S)
    return puller
