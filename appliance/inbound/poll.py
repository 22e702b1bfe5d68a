"""Asking for inbound (MO) messages where the provider keeps them until asked (OPS-4,
ROUTE-1): the inbound half of the puller's loop.

A provider whose kind gives it an :class:`~appliance.providers.inbound_query.
InboundQuery` (Netgsm's ``gelensms``) never pushes an inbound message, so a STOP sent
to it would otherwise never reach the suppression list. Every ``inbound_poll_s`` (per
provider, default 60) the puller's loop (:mod:`appliance.reports.puller`) asks each
such provider for the messages it received in a time window, over the provider's own
transport (so out of its ``requests_per_s``, with sends, pulls and credit queries),
one request at a time:

* **The window.** From the last window's end (the cursor, in ``appliance_state`` under
  ``inbound_poll.<provider>``) less :data:`OVERLAP_MS` (a provider's clock a little
  behind ours, a minute-resolution query, a message received while the last answer
  was being written: all listed again rather than lost) to now. The first ask looks
  back :data:`FIRST_LOOKBACK_MS`; a window longer than the kind allows
  (``inbound_window_max_s``, Netgsm 30 days) is asked in parts, oldest first.
* **Stored as a pushed inbound is.** An answer that lists messages the appliance does
  not have yet is one write unit: the answer raw in ``raw_inbound`` (``method =
  "PULL"``, the window as the query), then those messages filed exactly as at
  ``/inbound/NAME`` (:func:`appliance.inbound.store.receive_request`: the accounts
  they are for, a STOP or RET suppressing the sender), then the cursor moved. The
  write unit commits all three or none.
* **Once each.** A message listed again (the overlap, or a window asked twice after a
  crash) has the provider id it had (Netgsm: a digest of number, time and text), the
  key ``inbound_messages`` is unique on; it is left out before filing, so it is one
  inbound message and an answer of known messages alone stores nothing but the cursor.
* **An answer that cannot be read** (an HTML page, a line out of the documented shape,
  a code that is not "none") is kept raw with ``parsed = 0`` and the reason, logged,
  and the cursor stays: the same window is asked again at the next poll. No answer at
  all (a timeout) is logged; the cursor stays.

The poll is no loop of its own: :meth:`InboundPoller.step` is the inbound half of
each step of the puller's loop, which runs the status pulls and then this, each half
on its own schedule and each half's failures caught apart, so one failing never skips
the other. An ask whose storing fails is logged and that provider is asked again at
its next turn, after ``inbound_poll_s``. An inbound query that hangs holds the status
pulls for at most the exchange's bound (three times ``[sending] submit_timeout_s``).
Through that loop it shares the status pulls' rate (the transport's
``requests_per_s``), their raw-first storing and, on PostgreSQL, their one process at
a time (the puller's ``Runtime.singleton``) (``docs/providers.md``, "Asking the
provider").
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

import httpx

from appliance.inbound.store import InboundReceipt, InboundRules, receive_request
from appliance.providers.callbacks import CallbackRequest, InboundMessage
from appliance.providers.inbound_query import InboundAnswer, InboundQuery
from appliance.providers.outcome import short
from appliance.providers.registry import Providers
from appliance.providers.transport import Provider
from appliance.reports.inbox import RawCallback
from appliance.runtime import Runtime
from appliance.scheduler import log_failure
from appliance.store.connection import Connection

log = logging.getLogger("appliance.inbound")
PREFIX = "inbound_poll."  # appliance_state key of a provider's cursor
METHOD = "PULL"  # raw_inbound.method of a fetched answer
OVERLAP_MS = 5 * 60_000
FIRST_LOOKBACK_MS = 24 * 3_600_000
MASK = "***"


@dataclass
class PollLane:
    """One provider as the loop asks it."""

    name: str
    provider: Provider
    query: InboundQuery
    every_s: float
    secrets: tuple[str, ...]  # the table's secret values, kept out of the raw rows
    due_at: float = 0.0  # monotonic time of the next ask


@dataclass(frozen=True)
class Polled:
    """What one ask came to."""

    until_ms: int | None  # the cursor after it (None: not moved)
    receipt: InboundReceipt | None  # the stored answer, when one was stored
    error: str | None = None
    behind: bool = False  # a part of a longer window: the next part is due at once


def cursor(conn: Connection, provider: str) -> int | None:
    """The end of the last window read (epoch ms), ``None`` before the first."""
    row = conn.execute("SELECT value FROM appliance_state WHERE key = ?",
                       (PREFIX + provider,)).fetchone()
    if row is None:
        return None
    try:
        return int(json.loads(str(row[0]))["until_ms"])
    except (ValueError, KeyError, TypeError):
        return None


def _move_cursor(conn: Connection, provider: str, until_ms: int, now_ms: int) -> None:
    conn.execute(
        "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at",
        (PREFIX + provider, json.dumps({"until_ms": until_ms}), now_ms))


def _new_only(conn: Connection, provider: str,
              messages: Sequence[InboundMessage]) -> list[InboundMessage]:
    """The messages not filed yet (by the provider's id); each once."""
    fresh: list[InboundMessage] = []
    seen: set[str] = set()
    for msg in messages:
        key = msg.provider_msg_id
        if key is not None:
            if key in seen or conn.execute(
                    "SELECT 1 FROM inbound_messages WHERE provider = ? AND provider_msg_id = ?",
                    (provider, key)).fetchone() is not None:
                continue
            seen.add(key)
        fresh.append(msg)
    return fresh


def store_answer(conn: Connection, rules: InboundRules, raw: RawCallback,
                 answer: InboundAnswer, until_ms: int, now_ms: int) -> Polled:
    """One answer's write unit: kept raw and filed when it lists something new or
    cannot be read; the cursor moved to ``until_ms`` unless it cannot be read."""
    if answer.error is not None:
        kept = receive_request(conn, rules, raw, [], answer.error, now_ms)
        return Polled(None, kept, answer.error)
    fresh = _new_only(conn, raw.provider, answer.messages)
    receipt = receive_request(conn, rules, raw, fresh, None, now_ms) if fresh else None
    if receipt is not None and receipt.error is not None:  # kept raw, not filed
        return Polled(None, receipt, receipt.error)
    _move_cursor(conn, raw.provider, until_ms, now_ms)
    return Polled(until_ms, receipt)


class InboundPoller:
    """The poll's state: its lanes, and the answers it stored (this process's)."""

    def __init__(self, appliance: Runtime, lanes: list[PollLane]) -> None:
        self.appliance = appliance
        self.lanes = {lane.name: lane for lane in lanes}
        self.rules = InboundRules.from_settings(appliance.settings)
        self.asked = 0

    async def step(self) -> float:
        """Ask each provider whose turn it is; the seconds until the next one's turn.
        An ask that fails (its storing: the query's own failures are answers) is
        logged, and that provider waits its turn like any other."""
        wait = min((lane.every_s for lane in self.lanes.values()), default=60.0)
        for lane in self.lanes.values():
            now = time.monotonic()
            if now >= lane.due_at:
                try:
                    polled = await self.ask(lane)
                except Exception as exc:  # the next provider, and the status pulls, go on
                    polled = Polled(None, None, log_failure(
                        log, f"inbound poll of provider {lane.name}", lane.name, exc))
                moved_on = polled.behind and polled.until_ms is not None
                lane.due_at = time.monotonic() + (0.0 if moved_on else lane.every_s)
            wait = min(wait, max(0.0, lane.due_at - time.monotonic()))
        return wait

    async def ask(self, lane: PollLane) -> Polled:
        """One inbound query over the lane's next window, its answer stored."""
        store = self.appliance.store
        now_ms = self.appliance.now_ms()
        last = await store.readers.run(lambda c: cursor(c, lane.name))
        since = now_ms - FIRST_LOOKBACK_MS if last is None else last - OVERLAP_MS
        since = min(since, now_ms - OVERLAP_MS)  # a clock set back: never a window ahead
        until = min(now_ms, since + int(lane.query.inbound_window_max_s * 1000))
        self.asked += 1
        try:
            request = lane.query.build_inbound_request(since, until)
            response = await lane.provider.transport.exchange(request)
        except Exception as exc:  # no answer: the same window next time
            error = short(f"{type(exc).__name__}: {exc}")
            log.warning("provider %s: inbound query failed: %s", lane.name, error)
            return Polled(None, None, error)
        raw, answer = read_answer(lane, request, response, since, until)
        stored_at = self.appliance.now_ms()
        polled = await store.writer.run(
            lambda c: store_answer(c, self.rules, raw, answer, until, stored_at))
        note(lane.name, polled)
        return replace(polled, behind=until < now_ms)


def read_answer(lane: PollLane, request: httpx.Request, response: httpx.Response,
                since_ms: int, until_ms: int) -> tuple[RawCallback, InboundAnswer]:
    """The answer as it is kept raw (the window as its query, the request's own query
    without the table's secrets) and as the kind reads it (never raises)."""
    asked = request.url.query.decode("utf-8", "replace")
    for secret in lane.secrets:
        asked = asked.replace(secret, MASK)
    query = f"since_ms={since_ms}&until_ms={until_ms}" + (f"&{asked}" if asked else "")
    raw = RawCallback(provider=lane.name, method=METHOD,
                      content_type=response.headers.get("content-type", ""), query=query,
                      body=response.content)
    seen = CallbackRequest(method=METHOD, url=str(request.url), query=query,
                           headers=dict(response.headers), body=response.content)
    return raw, lane.query.read_inbound_answer(response.status_code, seen)


def note(name: str, polled: Polled) -> None:
    """The log lines of an ask: an answer kept raw unread, the opt-outs it brought."""
    receipt = polled.receipt
    if polled.error is not None:
        raw = f" (raw_inbound {receipt.raw_id})" if receipt is not None else ""
        log.warning("provider %s: inbound answer kept raw, not read%s: %s", name, raw,
                    polled.error)
        return
    if receipt is None:
        return
    log.info("inbound messages fetched", extra={"provider": name,
                                                "messages": len(receipt.results)})
    for result in receipt.results:
        if result.keyword is not None and not result.duplicate:
            log.info("opt-out received", extra={
                "provider": name, "inbound_id": result.inbound_id, "keyword": result.keyword,
                "accounts": len(result.suppressed_for)})


def lanes_of(providers: Providers) -> list[PollLane]:
    """A lane for every configured provider whose inbound messages are asked for."""
    lanes: list[PollLane] = []
    for name, provider in providers.all().items():
        query = provider.inbound_query
        kind = providers.kinds.get(provider.kind)
        if query is None or kind is None:
            continue
        secret_names = {o.name for o in kind.options if o.secret}
        secrets = tuple(sorted((str(v) for k, v in provider.settings.options.items()
                                if k in secret_names and v), key=len, reverse=True))
        lanes.append(PollLane(name, provider, query, provider.settings.inbound_poll_s,
                              secrets))
    return lanes


def poller(appliance: Runtime, providers: Providers) -> InboundPoller | None:
    """The poll over every provider it asks, ``None`` when there is none; the puller's
    loop runs it (:func:`appliance.reports.puller.install` is given it)."""
    poll = InboundPoller(appliance, lanes_of(providers))
    return poll if poll.lanes else None
