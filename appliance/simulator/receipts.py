"""Pushing the simulated provider's receipts to the appliance, as a provider's webhook
queue does: in background tasks, over a few one-connection clients, retried on
anything but a ``2xx``, and counted (what was pushed, taken, given up, still pending)
for the simulator's ``GET /_sim/stats``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import httpx

from appliance.outgoing_http import async_client
from appliance.simulator.behaviour import Behaviour


@dataclass
class RefStats:
    received: int = 0  # submissions that reached us with this client-ref
    received_ms: list[int] = field(default_factory=list)  # when each arrived (wall clock)
    accepted: int = 0  # of those, answered with status 0 for at least one part
    message_id: str = ""  # the first part's id
    message_ids: list[str] = field(default_factory=list)  # one per part taken, in order
    parts: int = 0  # parts the last accepted submission was split into
    final: str | None = None  # the message's final word: its worst part's (None: silent)
    part_finals: list[str] = field(default_factory=list)  # each reported part's final word
    reports: list[str] = field(default_factory=list)  # status words pushed, in push order
    delivered: int = 0  # receipts acknowledged with a 2xx
    final_acked: bool = False  # every part's final receipt was taken at least once
    finals_waiting: set[str] = field(default_factory=set)  # part ids whose final is not taken
    # What a status request (GET /sms/status) answers: each part's final receipt, once
    # known (``known_at``, wall clock); none for a silent message (the network never
    # told the provider). ``pushed``: its receipts are pushed too.
    pull_receipts: list[dict[str, str]] = field(default_factory=list)
    known_at: float = 0.0
    pushed: bool = True
    callback: str = ""  # where its receipts go (POST /_sim/push_now pushes them there)
    pulls: int = 0  # status requests that asked about it


@dataclass
class Receipt:
    url: str
    params: dict[str, str]
    ref: str
    final: bool = False


class ReceiptPush:
    """The receipts on their way; ``refs`` (shared with the server) records what each
    client-ref's receipts became."""

    def __init__(self, behaviour: Behaviour, refs: dict[str, RefStats]) -> None:
        self.behaviour = behaviour
        self.refs = refs
        self.delivery_status: Counter[str] = Counter()
        self.reports_pushed = 0
        self.reports_acknowledged = 0
        self.reports_given_up = 0
        self.pending = 0
        self.last_report_ms = 0
        self.last_final_report_ms = 0  # when the last ref's first final receipt was taken
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle: asyncio.Queue[httpx.AsyncClient] | None = None
        self._clients: list[httpx.AsyncClient] = []

    def idle_clients(self) -> asyncio.Queue[httpx.AsyncClient]:
        """One-connection clients for pushing receipts; taking one is taking a slot."""
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(max(1, self.behaviour.report_concurrency)):
                client = async_client(
                    timeout=10.0,
                    limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))
                self._clients.append(client)
                self._idle.put_nowait(client)
        return self._idle

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=2)
        for client in self._clients:
            await client.aclose()
        self._clients.clear()
        self._idle = None

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def in_sequence(self, receipts: list[Receipt], delay_s: float) -> None:
        """Push ``receipts`` one after the other, each once the previous was taken."""
        self.pending += len(receipts)

        async def run() -> None:
            await asyncio.sleep(delay_s)
            for receipt in receipts:
                await self.push(receipt, inline=False, counted=True)

        self._spawn(run())

    def later(self, receipt: Receipt, delay_s: float) -> None:
        """Push ``receipt`` in ``delay_s`` seconds, in the background."""
        self.pending += 1

        async def run() -> None:
            await asyncio.sleep(delay_s)
            await self.push(receipt, inline=False, counted=True)

        self._spawn(run())

    async def push(self, receipt: Receipt, inline: bool, counted: bool = False,
                   tries: int | None = None) -> bool:
        """Deliver one receipt, retrying on errors and non-2xx answers (``tries`` times,
        default ``report_retries``); whether it was taken."""
        if inline and not counted:
            self.pending += 1
        b = self.behaviour
        idle = self.idle_clients()
        delay = 0.2
        attempts = max(1, b.report_retries if tries is None else tries)
        try:
            for attempt in range(attempts):
                self.reports_pushed += 1
                client = await idle.get()
                try:
                    resp = await self.send(client, receipt)
                    code = str(resp.status_code)
                except httpx.HTTPError as exc:
                    code = type(exc).__name__
                finally:
                    idle.put_nowait(client)
                self.delivery_status[code] += 1
                if code.startswith("2"):
                    self._taken(receipt)
                    return True
                if attempt + 1 < attempts:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 5.0)
            if tries is None:
                self.reports_given_up += 1
            return False
        finally:
            self.pending -= 1

    def _taken(self, receipt: Receipt) -> None:
        self.reports_acknowledged += 1
        self.last_report_ms = time.time_ns() // 1_000_000
        stats = self.refs.get(receipt.ref)
        if stats is not None:
            stats.delivered += 1
            if receipt.final:
                stats.finals_waiting.discard(receipt.params["messageId"])
                if not stats.finals_waiting and not stats.final_acked:
                    stats.final_acked = True
                    self.last_final_report_ms = self.last_report_ms

    async def send(self, client: httpx.AsyncClient, receipt: Receipt) -> httpx.Response:
        """One request carrying ``receipt`` in the behaviour's ``report_format``."""
        fmt = self.behaviour.report_format
        if fmt == "json":
            return await client.post(receipt.url, content=json.dumps(receipt.params),
                                     headers={"Content-Type": "application/json"})
        if fmt == "get":
            return await client.get(receipt.url, params=receipt.params)
        return await client.post(receipt.url, data=receipt.params)
