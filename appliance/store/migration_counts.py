"""Version 8 of the schema: the counts kept beside the rows they count, as that version
wrote them (frozen: the current count triggers are :mod:`appliance.store.count_triggers`,
which writes these triggers again word for word)."""

from __future__ import annotations

import apsw


def add_rollups(conn: apsw.Connection) -> None:
    """Version 8: counts kept beside the rows they count (``message_counts``,
    ``row_counts``, ``messages.counted_state``), filled from the rows already there
    (see :mod:`appliance.store.rollups`); the inbox's waiting rows indexed on their own
    (by next try and by age) and the open messages' index covering overdue, so
    summaries stop scanning."""
    from appliance.store.rollups import fill

    conn.execute("DROP INDEX report_inbox_waiting;"
                 " DROP INDEX messages_open;"
                 " CREATE INDEX messages_open ON messages"
                 " (state, submitted_at, created_at, account_id);"
                 " CREATE INDEX report_inbox_due ON report_inbox (next_try_at)"
                 " WHERE applied_at IS NULL;"
                 " CREATE INDEX report_inbox_waiting_since ON report_inbox (received_at)"
                 " WHERE applied_at IS NULL;"
                 " ALTER TABLE messages ADD COLUMN counted_state TEXT;"
                 " CREATE INDEX messages_uncounted ON messages"
                 " (created_at, account_id, state, counted_state)"
                 " WHERE counted_state IS DISTINCT FROM state")
    conn.execute(_ROLLUPS)
    fill(conn)


_ROLLUPS = """
CREATE TABLE message_counts (
    account_id  INTEGER NOT NULL,
    minute      INTEGER NOT NULL,
    state       TEXT    NOT NULL,
    n           INTEGER NOT NULL,
    PRIMARY KEY (account_id, minute, state)
);

-- Rows of a table by one column's value: messages by state (counted as above),
-- report_inbox by outcome (WAITING while unmatched), raw_reports and raw_inbound by
-- parsed or quarantined, suppressions by source, inbound_messages (STOP keywords or
-- other); the last five kept by the triggers below.
CREATE TABLE row_counts (
    name  TEXT    NOT NULL,
    key   TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (name, key)
);

CREATE TRIGGER messages_counted_delete AFTER DELETE ON messages
    WHEN old.counted_state IS NOT NULL
BEGIN
    UPDATE message_counts SET n = n - 1 WHERE account_id = old.account_id
        AND minute = old.created_at / 60000 AND state = old.counted_state;
    DELETE FROM message_counts WHERE account_id = old.account_id
        AND minute = old.created_at / 60000 AND state = old.counted_state AND n = 0;
    UPDATE row_counts SET n = n - 1 WHERE name = 'messages' AND key = old.counted_state;
END;

CREATE TRIGGER report_inbox_counted_insert AFTER INSERT ON report_inbox BEGIN
    INSERT INTO row_counts (name, key, n)
        VALUES ('report_inbox', coalesce(new.outcome, 'WAITING'), 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER report_inbox_counted_update AFTER UPDATE OF outcome ON report_inbox
    WHEN old.outcome IS NOT new.outcome
BEGIN
    UPDATE row_counts SET n = n - 1
        WHERE name = 'report_inbox' AND key = coalesce(old.outcome, 'WAITING');
    INSERT INTO row_counts (name, key, n)
        VALUES ('report_inbox', coalesce(new.outcome, 'WAITING'), 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER report_inbox_counted_delete AFTER DELETE ON report_inbox BEGIN
    UPDATE row_counts SET n = n - 1
        WHERE name = 'report_inbox' AND key = coalesce(old.outcome, 'WAITING');
END;

CREATE TRIGGER raw_reports_counted_insert AFTER INSERT ON raw_reports BEGIN
    INSERT INTO row_counts (name, key, n)
        VALUES ('raw_reports', CASE new.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END, 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER raw_reports_counted_update AFTER UPDATE OF parsed ON raw_reports
    WHEN old.parsed IS NOT new.parsed
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE name = 'raw_reports'
        AND key = CASE old.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END;
    INSERT INTO row_counts (name, key, n)
        VALUES ('raw_reports', CASE new.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END, 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER raw_reports_counted_delete AFTER DELETE ON raw_reports BEGIN
    UPDATE row_counts SET n = n - 1 WHERE name = 'raw_reports'
        AND key = CASE old.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END;
END;

CREATE TRIGGER raw_inbound_counted_insert AFTER INSERT ON raw_inbound BEGIN
    INSERT INTO row_counts (name, key, n)
        VALUES ('raw_inbound', CASE new.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END, 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER raw_inbound_counted_update AFTER UPDATE OF parsed ON raw_inbound
    WHEN old.parsed IS NOT new.parsed
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE name = 'raw_inbound'
        AND key = CASE old.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END;
    INSERT INTO row_counts (name, key, n)
        VALUES ('raw_inbound', CASE new.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END, 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER raw_inbound_counted_delete AFTER DELETE ON raw_inbound BEGIN
    UPDATE row_counts SET n = n - 1 WHERE name = 'raw_inbound'
        AND key = CASE old.parsed WHEN 1 THEN 'parsed' ELSE 'quarantined' END;
END;

CREATE TRIGGER suppressions_counted_insert AFTER INSERT ON suppressions BEGIN
    INSERT INTO row_counts (name, key, n) VALUES ('suppressions', new.source, 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER suppressions_counted_update AFTER UPDATE OF source ON suppressions
    WHEN old.source IS NOT new.source
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE name = 'suppressions' AND key = old.source;
    INSERT INTO row_counts (name, key, n) VALUES ('suppressions', new.source, 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER suppressions_counted_delete AFTER DELETE ON suppressions BEGIN
    UPDATE row_counts SET n = n - 1 WHERE name = 'suppressions' AND key = old.source;
END;

CREATE TRIGGER inbound_messages_counted_insert AFTER INSERT ON inbound_messages BEGIN
    INSERT INTO row_counts (name, key, n)
        VALUES ('inbound_messages', CASE WHEN new.keyword IS NULL THEN 'other' ELSE 'stop' END, 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER inbound_messages_counted_update AFTER UPDATE OF keyword ON inbound_messages
    WHEN (old.keyword IS NULL) IS NOT (new.keyword IS NULL)
BEGIN
    UPDATE row_counts SET n = n - 1 WHERE name = 'inbound_messages'
        AND key = CASE WHEN old.keyword IS NULL THEN 'other' ELSE 'stop' END;
    INSERT INTO row_counts (name, key, n)
        VALUES ('inbound_messages', CASE WHEN new.keyword IS NULL THEN 'other' ELSE 'stop' END, 1)
        ON CONFLICT (name, key) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER inbound_messages_counted_delete AFTER DELETE ON inbound_messages BEGIN
    UPDATE row_counts SET n = n - 1 WHERE name = 'inbound_messages'
        AND key = CASE WHEN old.keyword IS NULL THEN 'other' ELSE 'stop' END;
END;
"""
