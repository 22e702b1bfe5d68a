"""The webhook outbox's triggers (OPS-5), defined once and written out for each engine.

A message accepted (QUEUED), or created already CANCELLED (a suppressed contact); then
every other state change, wherever it is made, writes one ``webhook_outbox`` row in the
transaction of the change. SENDING (the claim, about a second before the outcome) is not
an event: the change out of it reports the state of the message's last event (the one
before the claim) as ``previous``, and a claim that ends where it began (RETRY, then
RETRY again) is no change for the receiver. A new event is its message's head (due at
once) unless an earlier one still waits.

Each event names its receiver (``receiver``): the message's account's own when it has
one (``account_receivers``, TEAM-2), whatever ``[webhooks]`` says; else the
``[webhooks]`` receiver (``0``) unless its row says it is off (a start without
``[webhooks]`` says so: :func:`appliance.webhooks.outbox.set_receiver`); else no event.

The triggers exist only while some receiver is (``[webhooks]`` on, or an account with a
receiver): on SQLite
:func:`appliance.webhooks.outbox.set_receiver` runs :func:`sqlite_ddl`; on PostgreSQL
:func:`appliance.store.pg_triggers.install` installs :data:`PG_FUNCTIONS` and
:data:`PG_TRIGGERS`. The event id is ``evt_`` and 32 lower-case hex digits on both.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from appliance.store.connection import Connection
from appliance.store.trigger_sql import PgTrigger, pg_function


@dataclass(frozen=True)
class Engine:
    """What the two engines write differently in the triggers' SQL."""

    event_id: str  # 'evt_' and 32 random lower-case hex digits
    is_not: str  # "differs from", NULL being a value


SQLITE: Final = Engine("'evt_' || lower(hex(randomblob(16)))", "IS NOT")
POSTGRESQL: Final = Engine("'evt_' || replace(gen_random_uuid()::text, '-', '')",
                           "IS DISTINCT FROM")


@dataclass(frozen=True)
class OutboxTrigger:
    name: str
    when: str  # AFTER INSERT, AFTER UPDATE OF state
    condition: str  # of OLD and NEW, {is_not}; "" for none
    statement: str  # the INSERT into the outbox, {event_id} and {is_not}

    def sql(self, engine: Engine) -> tuple[str, str]:
        """The condition and the statement in ``engine``'s SQL."""
        words = {"event_id": engine.event_id, "is_not": engine.is_not}
        return self.condition.format(**words), self.statement.format(**words)


_COLUMNS = ("INSERT INTO webhook_outbox (event_id, message_id, ref, state, previous,"
            " campaign_id, at,\n                                next_try_at, receiver)")
# The receiver: the message's account's own, else the [webhooks] one unless it is off,
# else none (no event).
_RECEIVER = """(SELECT COALESCE(
             (SELECT a.account_id FROM account_receivers a WHERE a.account_id = NEW.account_id),
             (SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM webhook_receiver d
                                         WHERE d.id = 1 AND d.enabled = 0))) AS receiver)
         AS r"""
TRIGGERS: Final = (
    OutboxTrigger("messages_webhook_created", "AFTER INSERT", "", f"""
    {_COLUMNS}
    SELECT {{event_id}}, NEW.id, NEW.ref, NEW.state, NULL, NEW.campaign_id, NEW.updated_at,
           NEW.updated_at, r.receiver
    FROM {_RECEIVER}
    WHERE r.receiver IS NOT NULL;"""),
    OutboxTrigger(
        "messages_webhook_changed", "AFTER UPDATE OF state",
        "OLD.state {is_not} NEW.state AND NEW.state <> 'SENDING'", f"""
    {_COLUMNS}
    SELECT {{event_id}}, NEW.id, NEW.ref, NEW.state, told.state,
           NEW.campaign_id, NEW.updated_at,
           CASE WHEN EXISTS (SELECT 1 FROM webhook_outbox w WHERE w.message_id = NEW.id
                             AND w.delivered_at IS NULL) THEN NULL ELSE NEW.updated_at END,
           r.receiver
    FROM (SELECT CASE WHEN OLD.state = 'SENDING'
                      THEN (SELECT w.state FROM webhook_outbox w WHERE w.message_id = NEW.id
                            ORDER BY w.id DESC LIMIT 1)
                      ELSE OLD.state END AS state) AS told,
         {_RECEIVER}
    WHERE told.state {{is_not}} NEW.state AND r.receiver IS NOT NULL;"""),
)
NAMES: Final = tuple(t.name for t in TRIGGERS)


def sqlite_ddl() -> str:
    """The triggers as SQLite's ``CREATE TRIGGER`` statements, on ``messages``."""
    out = []
    for t in TRIGGERS:
        condition, statement = t.sql(SQLITE)
        where = f"\nWHEN {condition}" if condition else ""
        out.append(f"CREATE TRIGGER {t.name} {t.when} ON messages{where}\n"
                   f"BEGIN{statement}\nEND;\n")
    return "".join(out)


PG_FUNCTIONS: Final = tuple(pg_function(t.name, t.sql(POSTGRESQL)[1]) for t in TRIGGERS)
PG_TRIGGERS: Final = tuple(PgTrigger(t.name, "messages", t.name, t.when, t.sql(POSTGRESQL)[0])
                           for t in TRIGGERS)


def wanted(conn: Connection, webhooks: bool) -> bool:
    """Whether the triggers should exist: ``[webhooks]`` is configured (``webhooks``), or
    some account has a receiver of its own (a read in the caller's unit)."""
    return webhooks or conn.execute(
        "SELECT 1 FROM account_receivers LIMIT 1").fetchone() is not None
