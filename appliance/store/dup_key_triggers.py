"""IYS-4: a guarded message that ends ``REJECTED``, ``FAILED`` or ``CANCELLED`` gives up
its duplicate-today key, defined once and written out for each engine.

The key (:func:`appliance.sending.duplicates.dup_key`) is the third column of the unique
index ``messages_msisdn (account_id, msisdn, dup_key)``: one message per key. A message
that ends in one of those states must block nothing, so its key is set to NULL in the
statement that ends it, wherever that statement is (a cancel, a provider's refusal, a
report, an expiry, an operator's decision): NULLs are distinct in a unique index on both
engines, so an unguarded or ended message is in the index like any other and holds no
key. A message created already ended (a campaign's suppressed, refused or repeated
contact) is created without a key.

SQLite's trigger cannot change the row being written, so it writes it again after the
change (``AFTER UPDATE OF state``); PostgreSQL's runs before and clears the key in the
same row version. :data:`SQLITE_DDL` is in every new SQLite file (with the schema, through
:func:`appliance.store.schema.schema_sql`; version 24's step writes the same text);
:func:`appliance.store.pg_triggers.install` installs :data:`PG_FUNCTIONS` and
:data:`PG_TRIGGERS`.
"""

from __future__ import annotations

from typing import Final

from appliance.store.trigger_sql import PgTrigger

ENDED: Final = "('REJECTED', 'FAILED', 'CANCELLED')"
NAME: Final = "messages_ended_unkeyed"

SQLITE_DDL: Final = f"""CREATE TRIGGER {NAME} AFTER UPDATE OF state ON messages
    WHEN NEW.dup_key IS NOT NULL AND NEW.state IN {ENDED}
BEGIN
    UPDATE messages SET dup_key = NULL WHERE id = NEW.id;
END;
"""

PG_FUNCTIONS: Final = (f"""
CREATE OR REPLACE FUNCTION {NAME}() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    NEW.dup_key := NULL;
    RETURN NEW;
END $fn$""",)

PG_TRIGGERS: Final = (PgTrigger(NAME, "messages", NAME, "BEFORE UPDATE OF state",
                                f"NEW.dup_key IS NOT NULL AND NEW.state IN {ENDED}"),)
