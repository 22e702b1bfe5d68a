"""The transport of the HTTP provider kinds: keep-alive connections and the rate.

The wire format builds each submission as an ``httpx.Request`` and reads the answer as
an ``httpx.Response`` (:class:`~appliance.providers.base.WireFormat`); the transport
carries it over aiohttp: one ``ClientSession`` per provider with a pool of at most
``concurrency`` keep-alive connections, a submission holding one for its request and
answer. (httpx's own client costs ~600-750 µs of CPU a request on this kind of
machine, aiohttp's ~100 µs: with a fast provider the client was most of the sender's
time; see docs/benchmarks.md, "Sending".) The answer is handed to the wire format as
it came, headers and undecoded body, so the wire formats do not change. Submissions
share the provider's token bucket (``rate_per_s``). Every request carries
``User-Agent: appliance/<version>`` (:mod:`appliance.outgoing_http`). A ``POST`` is
never retried by aiohttp on a dropped keep-alive connection (it retries only
idempotent methods), nor redirected.

Only the transport knows whether bytes went out; the exception type tells it
(:func:`classify_transport_error`):

* the connection could not be made (refused, DNS, TLS handshake, proxy, connect
  timeout), a bad URL, a request that could not be built: the request never left the
  process -> ``RETRY``;
* anything once the connection was there (read timeout, the provider hanging up, a
  reset, a broken answer, the overall deadline): the provider may have taken the
  message -> ``UNCERTAIN``.

Before the connection is there no byte of the request can have left, whatever went
wrong: an error then (a deadline that ends at once, anything unforeseen) is ``RETRY``,
never "outcome unknown". A submission knows it from aiohttp's connection signals
(:class:`_Exchange`).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import urllib.request
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import httpx

from appliance.config import ProviderSettings
from appliance.outgoing_http import USER_AGENT
from appliance.rate import TokenBucket

from .base import Outcome, OutgoingMessage, SubmitResult, Transport, WireFormat, short
from .batch import batch_wire_of

if TYPE_CHECKING:
    import aiohttp

# Made by the client itself from the URL and the body.
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding"})


class _Errors(NamedTuple):
    """The exception classes the classification knows, aiohttp's among them.

    Built at the first error or the first request, not at import: aiohttp (with the
    certificate store its connector module loads) is a fifth of a start's imports, and a
    server that has not sent yet does not need it (docs/benchmarks.md, "Operations")."""

    never_sent: tuple[type[Exception], ...]
    # Of those, the ones that say the provider cannot be reached now (an outage, not a
    # request of ours it refused): see Outcome.unreached.
    unreached: tuple[type[Exception], ...]
    # aiohttp's exceptions under the names docs/providers.md gives them (the error text
    # users see), first match wins.
    names: tuple[tuple[type[BaseException], str], ...]


@functools.cache
def _errors() -> _Errors:
    import aiohttp

    return _Errors(
        never_sent=(
            httpx.ConnectError,
            httpx.ConnectTimeout,
            httpx.PoolTimeout,
            httpx.ProxyError,
            httpx.UnsupportedProtocol,
            httpx.InvalidURL,
            httpx.LocalProtocolError,
            aiohttp.ClientConnectorError,  # refused, DNS, TLS, proxy connection
            aiohttp.ConnectionTimeoutError,
            aiohttp.InvalidURL,
            aiohttp.NonHttpUrlClientError,
        ),
        unreached=(
            httpx.ConnectError,
            httpx.ConnectTimeout,
            aiohttp.ClientConnectorError,
            aiohttp.ConnectionTimeoutError,
        ),
        names=(
            (aiohttp.ClientConnectorError, "ConnectError"),
            (aiohttp.ConnectionTimeoutError, "ConnectTimeout"),
            (aiohttp.InvalidURL, "InvalidURL"),
            (aiohttp.NonHttpUrlClientError, "UnsupportedProtocol"),
            (aiohttp.ServerDisconnectedError, "RemoteProtocolError"),
            (aiohttp.ClientPayloadError, "RemoteProtocolError"),
            (aiohttp.ClientResponseError, "RemoteProtocolError"),
            (TimeoutError, "ReadTimeout"),  # aiohttp's SocketTimeoutError, and the deadline
            (aiohttp.ClientOSError, "ReadError"),
        ),
    )


def _name(exc: Exception) -> str:
    for kind, name in _errors().names:
        if isinstance(exc, kind):
            return name
    return type(exc).__name__


def classify_transport_error(exc: Exception) -> Outcome:
    """Map an exception raised while sending a submission to an :class:`Outcome`.

    Anything never sent is ``RETRY``; anything possibly received is ``UNCERTAIN``.
    """
    name = _name(exc)
    errors = _errors()
    if isinstance(exc, errors.unreached):
        return Outcome(SubmitResult.RETRY, error=f"not sent: {name}", unreached=True)
    if isinstance(exc, errors.never_sent):
        return Outcome(SubmitResult.RETRY, error=f"not sent: {name}")
    # Read timeouts, the provider hanging up, resets, a broken answer, the deadline and
    # anything unforeseen: the provider may hold the message.
    return Outcome(SubmitResult.UNCERTAIN, error=f"outcome unknown: {name}")


class _Exchange:
    """One submission's progress: whether it got a connection (only then can a byte of
    it have left), set by aiohttp's connection signals through ``trace_request_ctx``."""

    __slots__ = ("connected",)

    def __init__(self) -> None:
        self.connected = False


async def _on_connection(session: aiohttp.ClientSession, ctx: Any, params: object) -> None:
    exchange = ctx.trace_request_ctx
    if isinstance(exchange, _Exchange):
        exchange.connected = True


def _connection_signals() -> aiohttp.TraceConfig:
    import aiohttp

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(_on_connection)
    trace.on_connection_reuseconn.append(_on_connection)
    return trace


def outcome_of_error(exc: Exception, connected: bool) -> Outcome:
    """:func:`classify_transport_error`, except that before a connection was made nothing
    can have been sent: ``RETRY`` whatever the error."""
    outcome = classify_transport_error(exc)
    if outcome.result is SubmitResult.UNCERTAIN and not connected:
        return Outcome(SubmitResult.RETRY, error=f"not sent: {_name(exc)} before connecting")
    return outcome


class HttpTransport(Transport):
    """Submissions of one HTTP provider over its own pool of keep-alive connections.

    Two rates bound it: ``rate_per_s`` messages a second (a batch takes one token a
    message) and ``requests_per_s`` requests a second, sends, pulls and credit queries
    together (the provider's published limit; 0: none)."""

    def __init__(self, wire: WireFormat, settings: ProviderSettings, timeout_s: float,
                 requests_per_s: float = 0.0) -> None:
        self.wire = wire
        self.timeout_s = timeout_s
        self.concurrency = max(1, settings.concurrency)
        self.bucket = TokenBucket(settings.rate_per_s) if settings.rate_per_s > 0 else None
        self.requests_per_s = requests_per_s
        self.requests = TokenBucket(requests_per_s, burst=1.0) if requests_per_s > 0 else None
        self.requests_made = 0
        self.batch = batch_wire_of(wire)
        self.batch_max = max(1, settings.batch_max) if self.batch is not None else 1
        self._session: aiohttp.ClientSession | None = None
        self._slots: asyncio.Semaphore | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}
        self.in_flight = 0
        self._reserved = 0  # tokens taken by reserve() that no submission used yet

    def _client(self) -> tuple[aiohttp.ClientSession, asyncio.Semaphore]:
        """The session and its slots; taking a slot is taking a connection. Made at the
        first request, with aiohttp's import (see :class:`_Errors`)."""
        if self._session is None or self._slots is None:
            import aiohttp
            import certifi

            t = self.timeout_s
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self.concurrency, limit_per_host=0, keepalive_timeout=30.0,
                    ssl=ssl.create_default_context(cafile=certifi.where())),
                # Per phase, as the connection goes: a connect that times out sent
                # nothing; a read that times out may follow a request the provider has.
                timeout=aiohttp.ClientTimeout(total=None, connect=t, sock_connect=t,
                                              sock_read=t),
                headers={"User-Agent": USER_AGENT},
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,  # the answer goes to httpx undecoded, as it came
                # The proxy from the environment is looked up once per address
                # (_proxy): aiohttp's trust_env would look up it and ~/.netrc in a
                # thread on every request.
                trust_env=False,
                trace_configs=[_connection_signals()],
            )
            self._slots = asyncio.Semaphore(self.concurrency)
        return self._session, self._slots

    def _proxy(self, url: httpx.URL) -> str | None:
        """The proxy the environment names for this address (``HTTP_PROXY``,
        ``HTTPS_PROXY``, ``NO_PROXY``), as httpx honoured them."""
        key = (url.scheme, url.host)
        if key not in self._proxies:
            bypass = bool(urllib.request.proxy_bypass(url.host))
            self._proxies[key] = None if bypass else urllib.request.getproxies().get(url.scheme)
        return self._proxies[key]

    async def reserve(self, count: int = 1) -> None:
        """Wait for ``count`` messages' tokens and one request's: the next submission
        (one message, or a batch of ``count``) then goes at once."""
        if self.bucket is None and self.requests is None:
            return
        if self.bucket is not None:
            await self.bucket.acquire(count)
        if self.requests is not None:
            await self.requests.acquire()
        self._reserved += 1

    def _paid(self) -> bool:
        """Whether reserve() took this submission's tokens (else it takes them itself)."""
        paid = self._reserved > 0
        if paid:
            self._reserved -= 1
        return paid

    async def _pace(self, paid: bool, count: int) -> None:
        if paid:
            return
        if self.bucket is not None:
            await self.bucket.acquire(count)
        if self.requests is not None:
            await self.requests.acquire()

    async def submit(self, msg: OutgoingMessage) -> Outcome:
        paid = self._paid()
        if msg.skip_parts:
            # One request carries the whole text: some parts cannot be sent alone, and
            # sending all would repeat the ones the provider has.
            return Outcome(SubmitResult.REJECTED,
                           error="the provider has some parts already; an HTTP submission"
                                 " cannot send only the others")
        try:
            request = self.wire.build_request(msg)
            body = request.read()
            headers = [(k, v) for k, v in request.headers.multi_items()
                       if k.lower() not in _OWN_HEADERS]
        except Exception as exc:  # nothing went out: safe to try again later
            return Outcome(SubmitResult.RETRY, error=short(f"cannot build request: {exc}"))
        session, slots = self._client()
        async with slots:
            self.in_flight += 1
            try:
                await self._pace(paid, 1)
                self.requests_made += 1
                exchange = _Exchange()
                try:
                    response = await self._send(session, request, headers, body, exchange)
                except Exception as exc:
                    return outcome_of_error(exc, exchange.connected)
            finally:
                self.in_flight -= 1
        try:
            return self.wire.interpret_response(response)
        except Exception as exc:  # the provider answered something: it may have it
            return Outcome(SubmitResult.UNCERTAIN, error=short(f"unreadable answer: {exc}"))

    async def submit_batch(self, msgs: Sequence[OutgoingMessage]) -> list[Outcome]:
        """Submit ``msgs`` (one text, at most ``batch_max``) in one request; one outcome
        per message, in order. Never raises: a request that never left is ``RETRY`` for
        every message, one that may have reached the provider and got no readable answer
        ``UNCERTAIN`` for every message (the exposure of a batch: ``batch_max``)."""
        paid = self._paid()
        if self.batch is None or len(msgs) == 1:
            if paid:
                self._reserved += 1
            return [await self.submit(m) for m in msgs]
        wire = self.batch
        try:
            request = wire.build_batch_request(msgs)
            body = request.read()
            headers = [(k, v) for k, v in request.headers.multi_items()
                       if k.lower() not in _OWN_HEADERS]
        except Exception as exc:  # nothing went out: safe to try again later
            error = short(f"cannot build request: {exc}")
            return [Outcome(SubmitResult.RETRY, error=error) for _ in msgs]
        session, slots = self._client()
        async with slots:
            self.in_flight += 1
            try:
                await self._pace(paid, len(msgs))
                self.requests_made += 1
                exchange = _Exchange()
                try:
                    response = await self._send(session, request, headers, body, exchange)
                except Exception as exc:
                    outcome = outcome_of_error(exc, exchange.connected)
                    return [outcome for _ in msgs]
            finally:
                self.in_flight -= 1
        return wire.interpret_batch_response(msgs, response)

    async def exchange(self, request: httpx.Request) -> httpx.Response:
        """One request that is not a submission (a status pull, ROUTE-2; a credit query)
        over the same pool of connections as submissions, bounded by the same timeouts
        and out of the same ``requests_per_s`` (the puller also paces its own by
        ``pull_rate_per_s``). Raises on a timeout or a failed connection."""
        body = request.read()
        headers = [(k, v) for k, v in request.headers.multi_items()
                   if k.lower() not in _OWN_HEADERS]
        session, slots = self._client()
        async with slots:
            if self.requests is not None:
                await self.requests.acquire()
            self.requests_made += 1
            return await self._send(session, request, headers, body, _Exchange())

    async def _send(self, session: aiohttp.ClientSession, request: httpx.Request,
                    headers: list[tuple[str, str]], body: bytes,
                    exchange: _Exchange) -> httpx.Response:
        # A last bound on the whole exchange (a provider answering a byte at a time);
        # it can only fire once the request is out, so it is UNCERTAIN.
        async with asyncio.timeout(self.timeout_s * 3):
            async with session.request(
                    request.method, str(request.url), headers=headers, data=body or None,
                    allow_redirects=False, proxy=self._proxy(request.url),
                    trace_request_ctx=exchange) as answer:
                content = await answer.read()
                return httpx.Response(answer.status, headers=list(answer.raw_headers),
                                      content=content, request=request)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
        self._session = None
        self._slots = None

    def status(self) -> Mapping[str, float | str | bool]:
        return {"in_flight": float(self.in_flight), "concurrency": float(self.concurrency)}
