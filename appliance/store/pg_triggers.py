"""The triggers of ``schema.sql`` on PostgreSQL: the kept counts and the webhook outbox.

On SQLite the triggers are SQL in ``schema.sql`` (the ``*_counted_*`` ones) and in
:mod:`appliance.webhooks.outbox` (``messages_webhook_*``). PostgreSQL's triggers call a
function, so here each is a PL/pgSQL function and a trigger of the same name, with the
same meaning row for row:

* ``row_counts`` by key for ``report_inbox`` (outcome, ``WAITING`` while NULL),
  ``raw_reports`` and ``raw_inbound`` (parsed or quarantined), ``suppressions``
  (source) and ``inbound_messages`` (STOP keyword or other), on every insert, update of
  the column and delete;
* ``message_counts`` and ``row_counts`` (``messages``) when a counted message is deleted
  (the other message changes are folded by :func:`appliance.store.rollups.fold`);
* while webhooks are on, one ``webhook_outbox`` row per accepted message and per state
  change (SENDING excepted), in the transaction of the change.

**Several processes.** A count moves with ``UPDATE ... SET n = n - 1`` and ``INSERT ...
ON CONFLICT DO UPDATE SET n = row_counts.n + 1``: each is atomic in PostgreSQL (under
READ COMMITTED the second of two writers waits for the first's row lock, then adds to
the committed value), so no increment is lost. The lock on a count row is held until
commit, and one transaction often moves several keys (a report intake: ``parsed`` then
``WAITING``; the reconciler: ``WAITING`` then ``APPLIED``), in an order that differs
between units, so two processes' writer batches would deadlock on the count rows
themselves. Every count trigger therefore first takes one transaction-level advisory
lock (:data:`COUNTS_LOCK`): a transaction that changes counts waits for the other's
commit at its first count change, before holding any count row, and count rows are
never locked in a cycle. The popular keys (``report_inbox``/``WAITING``) serialised
those transactions anyway; the lock only makes the order one.

:func:`install` creates or replaces all of them (idempotent; nothing is done, and no
table is locked, when the installed ones are already these), and creates or drops the
outbox triggers as webhooks are on or off.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from appliance.store.connection import Connection

# pg_advisory_xact_lock keys: "counts" and "triggers" in ASCII, as bigints.
COUNTS_LOCK: Final = int.from_bytes(b"\0\0counts", "big")
INSTALL_LOCK: Final = int.from_bytes(b"triggers", "big") >> 1
WEBHOOK_TRIGGERS: Final = ("messages_webhook_created", "messages_webhook_changed")


@dataclass(frozen=True)
class Trigger:
    name: str
    table: str
    function: str  # the function's name; its CREATE is in FUNCTIONS
    when: str  # AFTER INSERT, AFTER UPDATE OF x, AFTER DELETE
    condition: str = ""  # the WHEN (...) of the trigger, "" for none

    def ddl(self) -> str:
        where = f"\n    WHEN ({self.condition})" if self.condition else ""
        return (f"CREATE TRIGGER {self.name} {self.when} ON {self.table}\n"
                f"    FOR EACH ROW{where} EXECUTE FUNCTION {self.function}()")


_MOVE = f"""
CREATE OR REPLACE FUNCTION row_counts_move(p_name text, p_from text, p_to text)
RETURNS void LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock({COUNTS_LOCK});
    IF p_from IS NOT NULL THEN
        UPDATE row_counts SET n = n - 1 WHERE name = p_name AND key = p_from;
    END IF;
    IF p_to IS NOT NULL THEN
        INSERT INTO row_counts (name, key, n) VALUES (p_name, p_to, 1)
            ON CONFLICT (name, key) DO UPDATE SET n = row_counts.n + 1;
    END IF;
END $fn$"""


# table -> (the column whose update moves the count, its key as SQL of the row {r})
COUNTED: Final = {
    "report_inbox": ("outcome", "coalesce({r}.outcome, 'WAITING')"),
    "raw_reports": ("parsed", "CASE {r}.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END"),
    "raw_inbound": ("parsed", "CASE {r}.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END"),
    "suppressions": ("source", "{r}.source"),
    "inbound_messages": ("keyword",
                         "CASE WHEN {r}.keyword IS NULL THEN 'other' ELSE 'stop' END"),
}


def _counted_function(table: str, key: str) -> str:
    old, new = key.format(r="OLD"), key.format(r="NEW")
    return f"""
CREATE OR REPLACE FUNCTION {table}_counted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM row_counts_move('{table}', NULL, {new});
    ELSIF TG_OP = 'UPDATE' THEN
        PERFORM row_counts_move('{table}', {old}, {new});
    ELSE
        PERFORM row_counts_move('{table}', {old}, NULL);
    END IF;
    RETURN NULL;
END $fn$"""


# A counted message deleted: its count goes (and the count row when it reaches 0).
_MESSAGES_DELETE = f"""
CREATE OR REPLACE FUNCTION messages_counted() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock({COUNTS_LOCK});
    UPDATE message_counts SET n = n - 1 WHERE account_id = OLD.account_id
        AND minute = OLD.created_at / 60000 AND state = OLD.counted_state;
    DELETE FROM message_counts WHERE account_id = OLD.account_id
        AND minute = OLD.created_at / 60000 AND state = OLD.counted_state AND n = 0;
    UPDATE row_counts SET n = n - 1 WHERE name = 'messages' AND key = OLD.counted_state;
    RETURN NULL;
END $fn$"""

# The same events as appliance.webhooks.outbox.TRIGGERS writes on SQLite: the event id
# is 'evt_' and 32 lower-case hex digits (a random UUID's, gen_random_uuid()).
_EVENT_ID = "'evt_' || replace(gen_random_uuid()::text, '-', '')"
_WEBHOOK_CREATED = f"""
CREATE OR REPLACE FUNCTION messages_webhook_created() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO webhook_outbox (event_id, message_id, ref, state, previous, campaign_id, at,
                                next_try_at)
    VALUES ({_EVENT_ID}, NEW.id, NEW.ref, NEW.state, NULL, NEW.campaign_id, NEW.updated_at,
            NEW.updated_at);
    RETURN NULL;
END $fn$"""
# Out of SENDING, the previous state is the one the message's last event said.
_WEBHOOK_CHANGED = f"""
CREATE OR REPLACE FUNCTION messages_webhook_changed() RETURNS trigger LANGUAGE plpgsql AS $fn$
DECLARE
    told text;
BEGIN
    IF OLD.state = 'SENDING' THEN
        SELECT w.state INTO told FROM webhook_outbox w WHERE w.message_id = NEW.id
            ORDER BY w.id DESC LIMIT 1;
    ELSE
        told := OLD.state;
    END IF;
    IF told IS NOT DISTINCT FROM NEW.state THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_outbox (event_id, message_id, ref, state, previous, campaign_id, at,
                                next_try_at)
    VALUES ({_EVENT_ID}, NEW.id, NEW.ref, NEW.state, told, NEW.campaign_id, NEW.updated_at,
            CASE WHEN EXISTS (SELECT 1 FROM webhook_outbox w WHERE w.message_id = NEW.id
                              AND w.delivered_at IS NULL) THEN NULL ELSE NEW.updated_at END);
    RETURN NULL;
END $fn$"""

COUNT_FUNCTIONS: Final = (_MOVE, *(_counted_function(t, k) for t, (_c, k) in COUNTED.items()),
                          _MESSAGES_DELETE)
WEBHOOK_FUNCTIONS: Final = (_WEBHOOK_CREATED, _WEBHOOK_CHANGED)


def _count_triggers() -> list[Trigger]:
    out = [Trigger("messages_counted_delete", "messages", "messages_counted", "AFTER DELETE",
                   "OLD.counted_state IS NOT NULL")]
    for table, (column, key) in COUNTED.items():
        fn = f"{table}_counted"
        out += [
            Trigger(f"{table}_counted_insert", table, fn, "AFTER INSERT"),
            # SQLite's WHEN compares the column; comparing the key it maps to moves the
            # same counts (a change within one key is -1 and +1 of that key).
            Trigger(f"{table}_counted_update", table, fn, f"AFTER UPDATE OF {column}",
                    f"{key.format(r='OLD')} IS DISTINCT FROM {key.format(r='NEW')}"),
            Trigger(f"{table}_counted_delete", table, fn, "AFTER DELETE"),
        ]
    return out


COUNT_TRIGGERS: Final = tuple(_count_triggers())
OUTBOX_TRIGGERS: Final = (
    Trigger("messages_webhook_created", "messages", "messages_webhook_created", "AFTER INSERT"),
    Trigger("messages_webhook_changed", "messages", "messages_webhook_changed",
            "AFTER UPDATE OF state",
            "OLD.state IS DISTINCT FROM NEW.state AND NEW.state <> 'SENDING'"),
)


def _digest(functions: tuple[str, ...], trigger: Trigger) -> str:
    """What a trigger is, functions included: kept as the trigger's comment, so that an
    install that would change nothing is seen as such."""
    text = "\n".join((*functions, trigger.ddl()))
    return "appliance " + hashlib.sha256(text.encode()).hexdigest()[:32]


def _wanted(webhooks: bool) -> dict[str, tuple[Trigger, str]]:
    out = {t.name: (t, _digest(COUNT_FUNCTIONS, t)) for t in COUNT_TRIGGERS}
    if webhooks:
        out.update({t.name: (t, _digest(WEBHOOK_FUNCTIONS, t)) for t in OUTBOX_TRIGGERS})
    return out


def installed(conn: Connection) -> dict[str, str]:
    """The appliance's triggers in the current schema, by name, with their comment."""
    names = [t.name for t in (*COUNT_TRIGGERS, *OUTBOX_TRIGGERS)]
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
            functions = COUNT_FUNCTIONS + (WEBHOOK_FUNCTIONS if webhooks else ())
            for fn in functions:
                conn.execute(fn)
        for name in sorted(stale | extra):
            table = next(t.table for t in (*COUNT_TRIGGERS, *OUTBOX_TRIGGERS) if t.name == name)
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
