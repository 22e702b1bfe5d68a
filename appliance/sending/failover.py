"""Failover (ROUTE-3): a message of a route moves to its next provider, while nothing of
it can have reached a provider.

"Never after ``SENDING``" is read as "never once its bytes may have left": a message
moves only

* after its provider was not reached ``failover_after`` tries in a row (connection
  refused, a connect or pool timeout, an SMPP session not bound: the outcomes that hold
  the lane without counting an attempt, ``Outcome.unreached``). The tries are the
  provider's, counted by its lane (``appliance_provider_unreached_tries``): once it has
  failed that many in a row, the message whose try was not reached moves, and so does
  every message of its routes waiting for it (:func:`move_waiting`), until a try reaches
  it again;
* or when the provider refused it with a code its kind declares as "this route cannot"
  (``ProviderKind.route_refusals``, :attr:`~appliance.providers.outcome.Outcome.code`).

Never an ``UNCERTAIN`` message (a timeout after the request was written stays
``UNCERTAIN``: it may have been taken), never one refused every message until the
operator acts (the lane holds, :mod:`appliance.sending.held_lanes`), never one pinned by
its request (no route), never one with a part at a provider (a part row), and never back
to a provider it has left. Each move is one guarded ``UPDATE`` in a write unit
(``state = 'SENDING'`` for a tried message, ``claimed_at IS NULL`` and still waiting for
one not tried), which changes its provider, puts it back in the queue and appends to its
log (:mod:`appliance.sending.attempt_log`); the mark that makes it ``SENDING`` checks the
provider (:func:`appliance.sending.claims.mark_sending`), so a lane that had reserved it
before it moved cannot send it: nothing is submitted twice.

A message moves only to a provider that sends it in the encoding and the parts it was
accepted with (ENC-1): the count the user was shown and is billed by. A provider that
would send it otherwise (GSM-7 Turkish where it has no Turkish table that writes the
text for that number, or the same encoding in another number of parts: its kind's
tables and count, :attr:`~appliance.config.ProviderSettings.counting`) is passed over,
as is one whose ``max_parts`` it exceeds. With no such provider left on its route the
message stays with its own, as a message without a next provider does: an unreached
try is given back to its queue and waits for the provider (its lane held until a try
reaches it), a route refusal ends it as refused; it is never sent twice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from appliance.config import Settings
from appliance.message_text.segments import sent_as
from appliance.providers.outcome import Outcome, SubmitResult
from appliance.sending import attempt_log
from appliance.sending.claims import Claimed, in_chunks
from appliance.sending.routes import RouteTable
from appliance.store import dialect
from appliance.store.connection import Connection
from appliance.store.rows import as_int

UNREACHED = "unreached"
ROUTE_REFUSED = "route_refused"
REASONS = (UNREACHED, ROUTE_REFUSED)
MOVE_BATCH = 2000


@dataclass(frozen=True)
class Target:
    """Where a message moves: a provider that sends it as it was counted."""

    provider: str


@dataclass(frozen=True)
class Moved:
    """One message moved: from, to, why (the labels of
    ``appliance_route_failovers_total``)."""

    message_id: int
    source: str
    target: str
    reason: str


class Router:
    """The routes and the providers' settings, as failover reads them; ``lowered`` says
    which providers are lowered now (:mod:`appliance.sending.provider_health`)."""

    def __init__(self, settings: Settings, lowered: Callable[[], Collection[str]]) -> None:
        self.table = RouteTable(settings)
        self.providers = settings.providers
        self.lowered = lowered
        self.failovers: Counter[tuple[str, str, str]] = Counter()

    def target(self, msisdn: str, message_type: str | None, body: str, encoding: str,
               parts: int, current: str, left: Collection[str]) -> Target | None:
        """The provider a message of a route moves to from ``current``, or ``None``: the
        next of its route that sends ``body`` to ``msisdn`` in ``encoding`` and in
        ``parts`` parts (no more than its ``max_parts``)."""
        gone = set(left)
        while True:
            name = self.table.next_provider(msisdn, message_type, current, gone,
                                            self.lowered())
            if name is None:
                return None
            p = self.providers[name]
            if parts <= p.max_parts:
                seg = sent_as(body, encoding, p.counting_to(msisdn))
                if seg is not None and seg.count == parts:
                    return Target(name)
            gone.add(name)

    def counted(self, moved: Iterable[Moved]) -> None:
        for m in moved:
            self.failovers[(m.source, m.target, m.reason)] += 1


def reason_to_move(msg: Claimed, outcome: Outcome, failing: bool,
                   route_refusals: Collection[str]) -> str | None:
    """Why ``msg`` may leave its provider after this outcome (``None``: it may not); the
    unit that moves it checks that it has a route (the claim does not read it: it stays
    as lean as without routes)."""
    if msg.known_parts or outcome.blocked is not None:
        return None
    if outcome.unreached and outcome.result is SubmitResult.RETRY:
        return UNREACHED if failing else None
    if outcome.result is SubmitResult.REJECTED and outcome.code is not None \
            and outcome.code in route_refusals and not any(
                p.result is not SubmitResult.REJECTED for p in outcome.parts):
        return ROUTE_REFUSED
    return None


_MOVE = (
    "UPDATE messages SET provider = ?, state = ?, attempts = ?, next_attempt_at = ?,"
    f" error = ?, claimed_at = NULL, updated_at = ?, {attempt_log.APPEND_SQL}"
    " WHERE id = ? AND provider = ? AND {guard}"
)
_TRIED = "state = 'SENDING'"
_WAITING = "state IN ('QUEUED', 'RETRY') AND claimed_at IS NULL"


def _row(target: Target, attempts: int, now_ms: int, error: str, log: str, msg_id: int,
         source: str) -> tuple[Any, ...]:
    return (target.provider, "QUEUED" if attempts <= 0 else "RETRY", max(0, attempts),
            now_ms, error, now_ms, log, msg_id, source)


def move_tried(conn: Connection, router: Router, provider: str,
               tried: list[tuple[Claimed, Outcome, str]], now_ms: int) -> list[Moved]:
    """Move messages whose try just came back (a write unit's part, in the unit that
    records the batch): each ``(message, outcome, reason)`` whose route has a next
    provider goes back to the queue there. An unreached try is given back (it never
    counts); a route refusal counts as the attempt it was. Returns those moved."""
    left = _left(conn, [m.id for m, _, _ in tried])
    rows: list[tuple[Any, ...]] = []
    moved: list[Moved] = []
    for msg, outcome, reason in tried:
        if msg.id not in left:
            continue  # no route: pinned by its request, or no route matched
        target = router.target(msg.msisdn, msg.message_type, msg.body, msg.encoding,
                               msg.parts, provider, left[msg.id])
        if target is None:
            continue
        attempts = msg.attempts - (1 if reason == UNREACHED else 0)
        word = ROUTE_REFUSED if reason == ROUTE_REFUSED else attempt_log.outcome_word(outcome)
        log = attempt_log.entry(provider, word, now_ms) + attempt_log.entry(
            provider, attempt_log.FAILED_OVER, now_ms)
        error = f"moved from {provider} to {target.provider}: {outcome.error or reason}"
        rows.append(_row(target, attempts, now_ms, error[:200], log, msg.id, provider))
        moved.append(Moved(msg.id, provider, target.provider, reason))
    return _apply(conn, _MOVE.format(guard=_TRIED), rows, moved)


def move_waiting(conn: Connection, router: Router, provider: str, now_ms: int,
                 limit: int = MOVE_BATCH) -> list[Moved]:
    """Move the messages of routes waiting for ``provider`` (not reserved, not tried
    now) to their next provider (a write unit): the provider has not been reached
    ``failover_after`` tries in a row. At most ``limit`` a unit."""
    found: list[Any] = conn.execute(
        f"SELECT id, msisdn, message_type, body, encoding, parts, attempts, attempts_log"
        f" FROM messages{dialect.of(conn).indexed_by('messages_lanes')} WHERE {_WAITING}"
        " AND provider = ? AND route IS NOT NULL AND NOT EXISTS (SELECT 1 FROM message_parts"
        " p WHERE p.message_id = messages.id) LIMIT ?", (provider, limit)).fetchall()
    rows: list[tuple[Any, ...]] = []
    moved: list[Moved] = []
    for r in found:
        msg_id = as_int(r[0])
        target = router.target(str(r[1]), None if r[2] is None else str(r[2]), str(r[3]),
                               str(r[4]), as_int(r[5]), provider, attempt_log.left(r[7]))
        if target is None:
            continue
        log = attempt_log.entry(provider, attempt_log.FAILED_OVER, now_ms)
        error = f"moved from {provider} to {target.provider}: {provider} not reached"
        rows.append(_row(target, as_int(r[6]), now_ms, error, log, msg_id, provider))
        moved.append(Moved(msg_id, provider, target.provider, UNREACHED))
    return _apply(conn, _MOVE.format(guard=_WAITING), rows, moved)


def _apply(conn: Connection, sql: str, rows: list[tuple[Any, ...]],
           moved: list[Moved]) -> list[Moved]:
    """Each row's guarded update; returns the moves that took place."""
    done: list[Moved] = []
    for row, move in zip(rows, moved, strict=True):
        conn.execute(sql, row)
        if conn.changes():
            done.append(move)
    return done


def _left(conn: Connection, ids: list[int]) -> dict[int, frozenset[str]]:
    """The providers each message of a route has already left, by id (a message without
    a route is not in it)."""
    out: dict[int, frozenset[str]] = {}
    for chunk in in_chunks(ids):
        for r in conn.execute("SELECT id, attempts_log FROM messages WHERE id IN"
                              f" ({','.join('?' * len(chunk))}) AND route IS NOT NULL",
                              tuple(chunk)):
            out[as_int(r[0])] = attempt_log.left(r[1])
    return out
