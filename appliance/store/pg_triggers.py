"""The triggers on PostgreSQL: the kept counts, the webhook outbox and the
duplicate-today key's, installed.

Each is defined once for both engines: the count triggers in
:mod:`appliance.store.count_triggers`, the outbox's in
:mod:`appliance.store.webhook_triggers`, the key's in
:mod:`appliance.store.dup_key_triggers`. PostgreSQL's triggers call a function, so each
is a PL/pgSQL function and a trigger of the same name, with SQLite's meaning row for row:

* ``row_counts`` by key for ``report_inbox`` (outcome, ``WAITING`` while NULL),
  ``raw_reports`` and ``raw_inbound`` (parsed or quarantined), ``suppressions``
  (source) and ``inbound_messages`` (STOP keyword or other), on every insert, update of
  the column and delete;
* ``message_counts`` and ``row_counts`` (``messages``) when a counted message is deleted
  (the other message changes are folded by :func:`appliance.store.rollups.fold`);
* while webhooks are on, one ``webhook_outbox`` row per accepted message and per state
  change (SENDING excepted), in the transaction of the change;
* the duplicate-today key of a message that ends ``REJECTED``, ``FAILED`` or
  ``CANCELLED`` cleared (:mod:`appliance.store.dup_key_triggers`), before the change is
  written.

**Several processes.** Each database session counts into rows of its own (the key
with ``#<backend pid>`` after it, :data:`appliance.store.count_triggers.STRIPE_SEPARATOR`),
so two processes' writers never write one count row: no count waits for another
process, and count rows never lock in a cycle. Readers sum a key's rows; the
``rollups`` loop folds the rows of ended sessions into the key's own
(:func:`appliance.store.rollups.fold_stripes`). One lock over every count, taken first
by each count change, once kept batches from deadlocking on shared count rows and made
every count-changing batch of every process commit one after the other; it is now taken
only by a counted message's deletion (:data:`appliance.store.count_triggers.COUNTS_LOCK`).

:func:`install` creates or replaces all of them (idempotent; nothing is done, and no
table is locked, when the installed ones are already these), and creates or drops the
outbox triggers as webhooks are on or off.
"""

from __future__ import annotations

import hashlib
from typing import Final

from appliance.store import count_triggers, dup_key_triggers, webhook_triggers
from appliance.store.connection import Connection
from appliance.store.trigger_sql import PgTrigger

# pg_advisory_xact_lock key: "triggers" in ASCII, as a bigint.
INSTALL_LOCK: Final = int.from_bytes(b"triggers", "big") >> 1
WEBHOOK_TRIGGERS: Final = webhook_triggers.NAMES
COUNT_FUNCTIONS: Final = count_triggers.PG_FUNCTIONS
WEBHOOK_FUNCTIONS: Final = webhook_triggers.PG_FUNCTIONS
COUNT_TRIGGERS: Final = count_triggers.pg_triggers()
OUTBOX_TRIGGERS: Final = webhook_triggers.PG_TRIGGERS
# Always there, webhooks on or off: the counts', and the one that clears the
# duplicate-today key of a message that ends (IYS-4).
ALWAYS_FUNCTIONS: Final = COUNT_FUNCTIONS + dup_key_triggers.PG_FUNCTIONS
ALWAYS_TRIGGERS: Final = COUNT_TRIGGERS + dup_key_triggers.PG_TRIGGERS


def _digest(functions: tuple[str, ...], trigger: PgTrigger) -> str:
    """What a trigger is, functions included: kept as the trigger's comment, so that an
    install that would change nothing is seen as such."""
    text = "\n".join((*functions, trigger.ddl()))
    return "appliance " + hashlib.sha256(text.encode()).hexdigest()[:32]


def _wanted(webhooks: bool) -> dict[str, tuple[PgTrigger, str]]:
    out = {t.name: (t, _digest(ALWAYS_FUNCTIONS, t)) for t in ALWAYS_TRIGGERS}
    if webhooks:
        out.update({t.name: (t, _digest(WEBHOOK_FUNCTIONS, t)) for t in OUTBOX_TRIGGERS})
    return out


def installed(conn: Connection) -> dict[str, str]:
    """The appliance's triggers in the current schema, by name, with their comment."""
    names = [t.name for t in (*ALWAYS_TRIGGERS, *OUTBOX_TRIGGERS)]
    listed = ", ".join(f"'{n}'" for n in names)
    return {str(name): str(comment or "") for name, comment in conn.execute(
        "SELECT t.tgname, obj_description(t.oid, 'pg_trigger') FROM pg_trigger t"
        " JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace s ON s.oid = c.relnamespace"
        f" WHERE s.nspname = current_schema() AND NOT t.tgisinternal AND t.tgname IN ({listed})")}


def webhooks_installed(conn: Connection) -> bool:
    """Whether the outbox triggers are there (webhooks were on at the last start)."""
    have = installed(conn)
    return all(name in have for name in WEBHOOK_TRIGGERS)


def install(conn: Connection, *, webhooks: bool) -> None:
    """Create (or replace) the count triggers, and the outbox triggers when ``webhooks``
    (dropped when not): a write unit, or a step of the schema's transaction.

    Runs in the caller's transaction when one is open, else in one of its own, under a
    lock so two processes starting at once do not replace the same function together.
    """
    own = not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        conn.execute(f"SELECT pg_advisory_xact_lock({INSTALL_LOCK})")
        wanted = _wanted(webhooks)
        have = installed(conn)
        stale = {n for n, (_t, digest) in wanted.items() if have.get(n) != digest}
        extra = set(have) - set(wanted)
        if stale:
            functions = ALWAYS_FUNCTIONS + (WEBHOOK_FUNCTIONS if webhooks else ())
            for fn in functions:
                conn.execute(fn)
        for name in sorted(stale | extra):
            table = next(t.table for t in (*ALWAYS_TRIGGERS, *OUTBOX_TRIGGERS)
                         if t.name == name)
            conn.execute(f"DROP TRIGGER IF EXISTS {name} ON {table}")
        for name in sorted(stale):
            trigger, digest = wanted[name]
            conn.execute(trigger.ddl())
            conn.execute(f"COMMENT ON TRIGGER {name} ON {trigger.table} IS '{digest}'")
        if own:
            conn.execute("COMMIT")
    except BaseException:
        if own and conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
