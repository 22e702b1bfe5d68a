"""The transport of the HTTP provider kinds: keep-alive connections and the rate.

``concurrency`` keep-alive ``httpx.AsyncClient`` objects of one connection each,
checked out one per submission, so the set of clients is the concurrency cap. (One
shared client with N connections costs a readiness probe of every pooled connection on
each request; measured on two cores, 32 connections in one client gave 48
submissions/s against 102/s for 32 one-connection clients.) Submissions share the
provider's token bucket (``rate_per_s``). Every request carries
``User-Agent: appliance/<version>`` (:mod:`appliance.outgoing_http`).

Only the transport knows whether bytes went out; httpx tells it through the exception
type (:func:`classify_transport_error`):

* ``httpx.ConnectError`` (and ``ConnectTimeout``, ``PoolTimeout``, proxy failures, a
  bad URL): the request never left the process -> ``RETRY``.
* ``httpx.TimeoutException`` once the request was being written or had been written
  (``WriteTimeout``, ``ReadTimeout``), ``RemoteProtocolError``, ``ReadError``,
  ``WriteError``: the provider may have taken the message -> ``UNCERTAIN``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx

from appliance.config import ProviderSettings
from appliance.outgoing_http import async_client
from appliance.sending.rate import TokenBucket

from .base import Outcome, OutgoingMessage, SubmitResult, Transport, WireFormat, short


def classify_transport_error(exc: Exception) -> Outcome:
    """Map an exception raised while sending a submission to an :class:`Outcome`.

    Anything never sent is ``RETRY``; anything possibly received is ``UNCERTAIN``.
    """
    name = type(exc).__name__
    never_sent = (
        httpx.ConnectError,
        httpx.ConnectTimeout,
        httpx.PoolTimeout,
        httpx.ProxyError,
        httpx.UnsupportedProtocol,
        httpx.InvalidURL,
        httpx.LocalProtocolError,
    )
    if isinstance(exc, never_sent):
        return Outcome(SubmitResult.RETRY, error=f"not sent: {name}")
    # WriteTimeout, ReadTimeout, ReadError, WriteError, RemoteProtocolError and anything
    # unforeseen: the provider may hold the message.
    return Outcome(SubmitResult.UNCERTAIN, error=f"outcome unknown: {name}")


class HttpTransport(Transport):
    """Submissions of one HTTP provider over its own pool of connections."""

    def __init__(self, wire: WireFormat, settings: ProviderSettings, timeout_s: float) -> None:
        self.wire = wire
        self.timeout_s = timeout_s
        self.concurrency = max(1, settings.concurrency)
        self.bucket = TokenBucket(settings.rate_per_s) if settings.rate_per_s > 0 else None
        self._idle: asyncio.Queue[httpx.AsyncClient] | None = None
        self._clients: list[httpx.AsyncClient] = []
        self.in_flight = 0
        self._reserved = 0  # tokens taken by reserve() that no submission used yet

    def _pool(self) -> asyncio.Queue[httpx.AsyncClient]:
        """The idle connections; taking one is taking a concurrency slot."""
        if self._idle is None:
            self._idle = asyncio.Queue()
            for _ in range(self.concurrency):
                client = async_client(
                    timeout=httpx.Timeout(self.timeout_s),
                    limits=httpx.Limits(max_connections=1, max_keepalive_connections=1),
                    follow_redirects=False,
                )
                self._clients.append(client)
                self._idle.put_nowait(client)
        return self._idle

    async def reserve(self) -> None:
        if self.bucket is not None:
            await self.bucket.acquire()
            self._reserved += 1

    async def submit(self, msg: OutgoingMessage) -> Outcome:
        paid = self._reserved > 0  # a token reserve() took for this submission
        if paid:
            self._reserved -= 1
        if msg.skip_parts:
            # One request carries the whole text: some parts cannot be sent alone, and
            # sending all would repeat the ones the provider has.
            return Outcome(SubmitResult.REJECTED,
                           error="the provider has some parts already; an HTTP submission"
                                 " cannot send only the others")
        try:
            request = self.wire.build_request(msg)
        except Exception as exc:  # nothing went out: safe to try again later
            return Outcome(SubmitResult.RETRY, error=short(f"cannot build request: {exc}"))
        idle = self._pool()
        client = await idle.get()
        self.in_flight += 1
        try:
            if not paid and self.bucket is not None:
                await self.bucket.acquire()
            try:
                response = await client.send(request)
            except Exception as exc:
                return classify_transport_error(exc)
        finally:
            self.in_flight -= 1
            idle.put_nowait(client)
        try:
            return self.wire.interpret_response(response)
        except Exception as exc:  # the provider answered something: it may have it
            return Outcome(SubmitResult.UNCERTAIN, error=short(f"unreadable answer: {exc}"))

    async def close(self) -> None:
        for client in self._clients:
            await client.aclose()
        self._clients.clear()
        self._idle = None

    def status(self) -> Mapping[str, float | str | bool]:
        return {"in_flight": float(self.in_flight), "concurrency": float(self.concurrency)}
