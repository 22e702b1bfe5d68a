"""Providers' live delivery, and lowering the ones that fall (ROUTE-3).

GOV.UK Notify moves its traffic off a provider when more than 15% of the last 15
minutes' messages were not delivered within 5 minutes. The same rule, in settings
(``[sending] health_*``): a provider is *lowered* when, of its messages submitted over
the last ``health_window_s`` that have had ``health_deliver_within_s`` to be delivered
(at least ``health_min_messages`` of them; the latest 5,000 at most), more than
``health_undelivered_above`` were not ``DELIVERED`` within that time. A provider asked
by pulls (ROUTE-2) hears of a delivery only when it asks, ``pull_after_s`` after the
submission at the soonest: it gets that much more (its pull window).

Which messages were submitted when is what the sender itself recorded
(:meth:`ProviderHealth.submitted`, kept in memory: the latest 5,000 a provider); the
judge reads their states by id. So the sender's write path carries no index more for
it. With several processes on PostgreSQL the process that judges sees its own
submissions: a share of every provider's traffic, which the rule judges as a sample;
after a restart a provider is judged again once it has new submissions, its verdict
kept meanwhile.

A lowered provider is tried after the others by its routes
(:class:`appliance.sending.routes.RouteTable`), but keeps 1 message in
``health_trickle`` so that its recovery can be seen; it comes back as soon as the
messages judged over its window (its trickle's among them) are delivered in time again.
Lowering changes only where new messages go: messages already queued for it stay.

The verdict is a row of ``appliance_state`` per lowered provider
(``provider_lowered.NAME``: the figures, since when), written by one process at a time
(``Runtime.singleton``) and read by every process every few seconds, so every sender
routes alike and ``/metrics`` (``appliance_provider_lowered{provider}``) and the
dashboard say the same. Only with ``[[routes]]``: without routes nothing is lowered.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from appliance.providers.registry import Providers
from appliance.runtime import Runtime
from appliance.sending.claims import in_chunks
from appliance.store import dialect
from appliance.store.connection import Connection

log = logging.getLogger("appliance.sender")
PREFIX = "provider_lowered."
JUDGE_LOOP = "provider_health"
READ_LOOP = "provider_lowered"
READ_EVERY_S = 2.0
JUDGED_MAX = 5000  # the latest messages of a window judged, at most


@dataclass(frozen=True)
class Figures:
    """What a provider's window came to: messages judged, not delivered in time."""

    provider: str
    judged: int
    late: int
    since_ms: int = 0  # lowered since (0: not lowered)

    @property
    def late_share(self) -> float:
        return self.late / self.judged if self.judged else 0.0


def judge(conn: Connection, provider: str, sent: Iterable[tuple[int, int]], now_ms: int,
          window_ms: int, within_ms: int) -> Figures:
    """Of ``sent`` (``(submitted_ms, message id)`` of the provider's submissions), those
    in the window that ends ``within_ms`` ago (each has had that long); late: not
    ``DELIVERED`` within ``within_ms`` of its submission (a read unit: by id)."""
    end = now_ms - within_ms
    ids = {i: at for at, i in sent if end - window_ms < at <= end}
    late = 0
    judged = 0
    by_id = dialect.of(conn).by_rowid
    for chunk in in_chunks(list(ids)):
        rows: list[Any] = conn.execute(
            # By id: without statistics SQLite would rather read the provider's every
            # message through messages_provider_id.
            f"SELECT id, state, submitted_at, finalised_at FROM messages{by_id} WHERE id IN"
            f" ({','.join('?' * len(chunk))}) AND provider = ?", (*chunk, provider)).fetchall()
        for msg_id, state, submitted, done in rows:
            judged += 1
            at = int(submitted) if submitted is not None else ids[int(msg_id)]
            if not (state == "DELIVERED" and done is not None
                    and int(done) - at <= within_ms):
                late += 1
    return Figures(provider, judged, late)


def lowered(conn: Connection) -> dict[str, Figures]:
    """Every lowered provider, by name, with the figures that lowered it (a read unit)."""
    out: dict[str, Figures] = {}
    for key, value in conn.execute(
            "SELECT key, value FROM appliance_state WHERE key >= ? AND key < ?",
            (PREFIX, PREFIX + "\uffff")):
        name = str(key)[len(PREFIX):]
        try:
            data = json.loads(str(value))
            out[name] = Figures(name, int(data["judged"]), int(data["late"]),
                                int(data["since_ms"]))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def lower(conn: Connection, figures: Figures, now_ms: int) -> None:
    """Lower the provider (a write unit), keeping since when."""
    value = json.dumps({"judged": figures.judged, "late": figures.late,
                        "since_ms": figures.since_ms or now_ms})
    conn.execute(
        "INSERT INTO appliance_state (key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value,"
        " updated_at = excluded.updated_at", (PREFIX + figures.provider, value, now_ms))


def restore(conn: Connection, provider: str) -> None:
    """The provider is no longer lowered (a write unit)."""
    conn.execute("DELETE FROM appliance_state WHERE key = ?", (PREFIX + provider,))


class ProviderHealth:
    """The providers' verdicts as this process routes by them (``lowered``), and the
    loop that judges them (installed only with ``[[routes]]``)."""

    def __init__(self, appliance: Runtime, providers: Providers,
                 pulled: Collection[str] = ()) -> None:
        self.appliance = appliance
        self.names = [n for n in providers.names
                      if any(n in r.providers for r in appliance.settings.routes)]
        self.pulled = frozenset(pulled)
        self.lowered: frozenset[str] = frozenset()
        self.figures: dict[str, Figures] = {}  # the last judged, by this process
        # What this process's sender submitted lately: (submitted ms, message id).
        self.sent: dict[str, deque[tuple[int, int]]] = {
            n: deque(maxlen=JUDGED_MAX) for n in self.names}

    def submitted(self, provider: str, at_ms: int, ids: Iterable[int]) -> None:
        """The provider took these messages at ``at_ms`` (the sender, once committed)."""
        kept = self.sent.get(provider)
        if kept is not None:
            kept.extend((at_ms, i) for i in ids)

    def within_ms(self, provider: str) -> int:
        """How long a message of ``provider`` has to be delivered: the setting, and its
        pull window for a provider asked by pulls."""
        s = self.appliance.settings
        extra = s.providers[provider].pull_after_s if provider in self.pulled else 0.0
        return int((s.sending.health_deliver_within_s + extra) * 1000)

    def interval_s(self) -> float:
        """Judged about ten times per delivery time, at most every 30 s."""
        return max(0.5, min(30.0, self.appliance.settings.sending.health_deliver_within_s / 10))

    async def judge_step(self) -> float | None:
        """Judge every provider of a route (a read unit, beside the writer); lower or
        restore those whose verdict changed (a small write unit), then read the verdicts
        back."""
        s = self.appliance.settings.sending
        now = self.appliance.now_ms()
        window = int(s.health_window_s * 1000)
        within = {n: self.within_ms(n) for n in self.names}
        sent = {n: list(self.sent[n]) for n in self.names}
        judged = await self.appliance.store.readers.run(
            lambda c: {n: judge(c, n, sent[n], now, window, within[n]) for n in self.names})
        self.figures = judged

        def unit(c: Connection) -> list[tuple[Figures, bool]]:
            before = lowered(c)
            changes: list[tuple[Figures, bool]] = []
            for name in self.names:
                f = judged[name]
                was = before.get(name)
                bad = f.late_share > s.health_undelivered_above
                if was is None and bad and f.judged >= s.health_min_messages:
                    lower(c, f, now)
                    changes.append((f, True))
                elif was is not None and f.judged and not bad:
                    restore(c, name)
                    changes.append((f, False))
                elif was is not None:
                    lower(c, Figures(name, f.judged, f.late, was.since_ms), now)
            return changes

        for f, down in await self.appliance.store.writer.run(unit):
            if down:
                log.warning("provider %s lowered: %s of its last %s messages not delivered"
                            " within %.0f s; its routes try it after the others",
                            f.provider, f.late, f.judged, within[f.provider] / 1000)
            else:
                log.warning("provider %s restored: %s of its last %s messages not"
                            " delivered in time", f.provider, f.late, f.judged)
        await self.read_step()
        return self.interval_s()

    async def read_step(self) -> float | None:
        found = await self.appliance.store.readers.run(lowered)
        self.lowered = frozenset(n for n in found if n in self.names)
        return READ_EVERY_S

    def install(self) -> None:
        """The loops: judging in one process at a time, reading in each."""
        if not self.names:
            return
        runtime = self.appliance
        runtime.scheduler.add(JUDGE_LOOP, runtime.singleton(JUDGE_LOOP, self.judge_step),
                              interval_s=self.interval_s())
        runtime.scheduler.add(READ_LOOP, self.read_step, interval_s=READ_EVERY_S)
