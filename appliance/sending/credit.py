"""The providers' credit: asked where the kind's API tells it (ROUTE-1).

A kind with a balance query gives its provider a :class:`~appliance.providers.credit.
CreditQuery`. The ``credit`` loop asks each such provider every ``[sending]
credit_interval_s`` (and a lane held for ``no_credit`` asks at each of its retries,
:mod:`appliance.sending.provider_holds`), over the provider's own transport and so out
of its ``requests_per_s``. The last answer is kept in ``appliance_state`` (key
``provider_credit.<provider>``, JSON), so every process's ``/metrics``
(``appliance_provider_credit{provider}``) and dashboard show the same figure, and on
PostgreSQL the loop runs in one process at a time. A query that fails keeps the last
figure read and records the error beside it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from appliance.providers.outcome import short
from appliance.providers.registry import Providers
from appliance.providers.transport import Provider
from appliance.runtime import Runtime
from appliance.store.connection import Connection

log = logging.getLogger("appliance.credit")
LOOP = "credit"
PREFIX = "provider_credit."


@dataclass(frozen=True)
class Credit:
    """The last credit read of a provider (in its own unit: ``docs/providers.md``),
    when it was read, and the error of the last query when it failed."""

    provider: str
    credit: float | None
    at_ms: int | None
    asked_ms: int
    error: str | None = None


def credits(conn: Connection) -> dict[str, Credit]:
    """Every provider's last credit, by name (a read unit)."""
    out: dict[str, Credit] = {}
    for key, value in conn.execute(
            "SELECT key, value FROM appliance_state WHERE key >= ? AND key < ?",
            (PREFIX, PREFIX + "\uffff")):
        name = str(key)[len(PREFIX):]
        try:
            data = json.loads(str(value))
            credit = data.get("credit")
            at = data.get("at_ms")
            out[name] = Credit(name, None if credit is None else float(credit),
                               None if at is None else int(at), int(data["asked_ms"]),
                               data.get("error"))
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
    return out


def store_answer(conn: Connection, provider: str, credit: float | None, error: str | None,
                 now_ms: int) -> Credit:
    """Keep what a query said (a write unit): a figure replaces the last one; a failure
    keeps it and records the error."""
    last = credits(conn).get(provider)
    if credit is None and last is not None:
        kept = Credit(provider, last.credit, last.at_ms, now_ms, error)
    else:
        kept = Credit(provider, credit, now_ms if credit is not None else None, now_ms, error)
    value = json.dumps({"credit": kept.credit, "at_ms": kept.at_ms,
                        "asked_ms": kept.asked_ms, "error": kept.error})
    conn.execute(
        "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at", (PREFIX + provider, value, now_ms))
    return kept


class CreditWatch:
    """Asks the providers whose kind can tell for their credit."""

    def __init__(self, appliance: Runtime, providers: Providers) -> None:
        self.appliance = appliance
        self.providers = providers
        self.asked = 0

    def askable(self) -> list[Provider]:
        return [p for p in self.providers.all().values() if p.credit is not None]

    async def ask(self, provider: Provider) -> float | None:
        """Ask ``provider`` for its credit now and keep the answer; the credit, or
        ``None`` when the query failed or its answer could not be read."""
        query = provider.credit
        if query is None:
            return None
        credit: float | None = None
        error: str | None = None
        try:
            response = await provider.transport.exchange(query.build_credit_request())
            credit = query.read_credit(response.status_code, response.content,
                                       response.headers.get("content-type", ""))
            if credit is None:
                error = short(f"answered {response.status_code}: {response.text}", 120)
        except Exception as exc:  # the query failed: the last figure stays
            error = short(f"{type(exc).__name__}: {exc}", 120)
        self.asked += 1
        now = self.appliance.now_ms()
        await self.appliance.store.writer.run(
            lambda c: store_answer(c, provider.name, credit, error, now))
        if error is not None:
            log.warning("provider %s: credit query failed: %s", provider.name, error)
        return credit

    async def step(self) -> float | None:
        for provider in self.askable():
            await self.ask(provider)
        return self.appliance.settings.sending.credit_interval_s


def install(runtime: Runtime, providers: Providers) -> CreditWatch:
    """The credit watch, and its loop (in one process at a time) when any provider's
    kind has a balance query."""
    watch = CreditWatch(runtime, providers)
    if watch.askable():
        interval = runtime.settings.sending.credit_interval_s
        runtime.scheduler.add(LOOP, runtime.singleton(LOOP, watch.step), interval_s=interval)
    return watch
