"""The steps that bring an older database to the current schema, one per version.

Each step is frozen: it is the SQL that took a database of its day from the version
before to its own, and it stays as it was written when the current schema (``schema.sql``
and :mod:`appliance.store.count_triggers`) moves on; a later change is a new step.
Steps from version 5 on are also PostgreSQL's (:mod:`appliance.store.pg_schema`), run
through the same connection as every unit, so a step written in portable SQL serves
both engines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import apsw

from appliance.store import dialect
from appliance.store.migration_counts import add_rollups
from appliance.store.migration_dup_keys import key_by_number
from appliance.store.migration_expansion import add_campaign_number_order
from appliance.store.migration_inbound import list_inbound_by_number
from appliance.store.migration_receivers import add_account_receivers
from appliance.store.migration_routes import add_routes


def _message_parts(conn: apsw.Connection) -> None:
    """Version 2 (MSG-1, MSG-3): encoding and parts on messages, one row per part.

    Existing messages get their encoding and parts from their body (each distinct body
    is segmented once). Every message already submitted (or maybe submitted) gets one
    part row carrying its provider id and state: before version 2 the appliance knew one
    id per message, so that is the part its reports were matched to.
    """
    from appliance.message_text.segments import segment

    conn.execute(
        "ALTER TABLE messages ADD COLUMN encoding TEXT NOT NULL DEFAULT 'GSM-7';"
        " ALTER TABLE messages ADD COLUMN parts INTEGER NOT NULL DEFAULT 1;"
        " ALTER TABLE messages ADD COLUMN ucs2_because TEXT;"
        " ALTER TABLE report_inbox ADD COLUMN part INTEGER;"
        " ALTER TABLE provider_ids ADD COLUMN part INTEGER NOT NULL DEFAULT 1;"
        " CREATE TABLE message_parts ("
        "  message_id INTEGER NOT NULL REFERENCES messages(id),"
        "  part INTEGER NOT NULL,"
        "  provider_msg_id TEXT,"
        "  state TEXT NOT NULL,"
        "  state_at INTEGER NOT NULL DEFAULT 0,"
        "  error TEXT,"
        "  submitted_at INTEGER,"
        "  finalised_at INTEGER,"
        "  updated_at INTEGER NOT NULL,"
        "  PRIMARY KEY (message_id, part))"
    )
    seen: dict[str, tuple[str, int, str | None]] = {}
    changes: list[tuple[str, int, str | None, int]] = []
    for message_id, body in conn.execute("SELECT id, body FROM messages"):
        text = str(body)
        found = seen.get(text)
        if found is None:
            seg = segment(text)
            found = seen[text] = (seg.encoding, seg.count, seg.ucs2_because)
        if found != ("GSM-7", 1, None):
            changes.append((*found, int(message_id)))
    conn.executemany(
        "UPDATE messages SET encoding = ?, parts = ?, ucs2_because = ? WHERE id = ?", changes)
    conn.execute(
        "INSERT INTO message_parts (message_id, part, provider_msg_id, state, state_at,"
        " submitted_at, finalised_at, updated_at)"
        " SELECT id, 1, provider_msg_id, state, state_at, submitted_at, finalised_at,"
        " updated_at FROM messages"
        " WHERE state NOT IN ('QUEUED', 'SENDING', 'RETRY')"
        " AND (submitted_at IS NOT NULL OR state <> 'REJECTED')")


def _reject_line_length(conn: apsw.Connection) -> None:
    """3: rejected lines are kept shortened, with the whole line's length beside them."""
    conn.execute("ALTER TABLE import_rejects ADD COLUMN line_length INTEGER NOT NULL DEFAULT 0")
    conn.execute("UPDATE import_rejects SET line_length = length(line)")


def _lists_deleted_and_job_reruns(conn: apsw.Connection) -> None:
    """4: ``lists.deleted_at`` (deleting a list from the console) and
    ``import_jobs.rerun_of`` (IMP-11: re-running an import from its stored payload)."""
    conn.execute("ALTER TABLE lists ADD COLUMN deleted_at INTEGER")
    conn.execute("ALTER TABLE import_jobs ADD COLUMN rerun_of INTEGER")


def add_opt_outs(conn: apsw.Connection) -> None:
    """Version 5 (OPS-4): suppressions, and inbound messages stored first."""
    conn.execute("""
CREATE TABLE suppressions (
    id           INTEGER PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts(id),
    msisdn       TEXT    NOT NULL,
    reason       TEXT    NOT NULL DEFAULT '',
    source       TEXT    NOT NULL,
    inbound_id   INTEGER,
    created_at   INTEGER NOT NULL,
    UNIQUE (account_id, msisdn)
);
CREATE TABLE raw_inbound (
    id            INTEGER PRIMARY KEY,
    provider      TEXT    NOT NULL,
    method        TEXT    NOT NULL,
    content_type  TEXT    NOT NULL,
    query         TEXT    NOT NULL,
    body          BLOB    NOT NULL,
    received_at   INTEGER NOT NULL,
    parsed        INTEGER NOT NULL,
    error         TEXT
);
CREATE INDEX raw_inbound_received ON raw_inbound (received_at);
CREATE TABLE inbound_messages (
    id               INTEGER PRIMARY KEY,
    provider         TEXT    NOT NULL,
    provider_msg_id  TEXT,
    msisdn           TEXT    NOT NULL,
    to_number        TEXT    NOT NULL,
    text             TEXT    NOT NULL,
    parts            INTEGER NOT NULL DEFAULT 1,
    parts_received   INTEGER NOT NULL DEFAULT 1,
    sent_at          INTEGER NOT NULL DEFAULT 0,
    received_at      INTEGER NOT NULL,
    keyword          TEXT,
    raw_id           INTEGER,
    repeats          INTEGER NOT NULL DEFAULT 0,
    UNIQUE (provider, provider_msg_id)
);
CREATE INDEX inbound_messages_msisdn ON inbound_messages (msisdn);
CREATE TABLE inbound_parts (
    inbound_id       INTEGER NOT NULL REFERENCES inbound_messages(id),
    part             INTEGER NOT NULL,
    text             TEXT    NOT NULL,
    provider_msg_id  TEXT,
    PRIMARY KEY (inbound_id, part)
);
CREATE TABLE inbound_accounts (
    account_id   INTEGER NOT NULL REFERENCES accounts(id),
    inbound_id   INTEGER NOT NULL REFERENCES inbound_messages(id),
    PRIMARY KEY (account_id, inbound_id)
);
""")


def add_webhook_outbox(conn: apsw.Connection) -> None:
    """Version 6 (OPS-5): the webhook receiver row and the outbox. (The triggers that
    fill it exist only while webhooks are on: :mod:`appliance.webhooks.outbox`.)"""
    conn.execute("""
CREATE TABLE webhook_receiver (
    id                    INTEGER PRIMARY KEY CHECK (id = 1),
    url                   TEXT    NOT NULL,
    enabled               INTEGER NOT NULL,  -- 1: events are written (and delivered)
    delivered             INTEGER NOT NULL DEFAULT 0,  -- events the receiver took (2xx), ever
    failed_attempts       INTEGER NOT NULL DEFAULT 0,  -- POSTs that got no 2xx, ever
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,  -- since the last 2xx
    paused_until          INTEGER NOT NULL DEFAULT 0,  -- no new POST before this (backoff)
    last_success_at       INTEGER,
    last_error            TEXT,
    last_error_at         INTEGER,
    updated_at            INTEGER NOT NULL
);

CREATE TABLE webhook_outbox (
    id            INTEGER PRIMARY KEY,
    event_id      TEXT    NOT NULL,  -- 'evt_' + 32 random hex digits; the receiver dedupes on it
    message_id    INTEGER NOT NULL,  -- messages.id
    ref           TEXT    NOT NULL,
    state         TEXT    NOT NULL,
    previous      TEXT,  -- the state the previous event said; NULL for the message's first
    campaign_id   INTEGER,
    at            INTEGER NOT NULL,  -- our clock: when the state changed (messages.updated_at)
    next_try_at   INTEGER,  -- NULL: behind an earlier event of its message, or delivered
    attempts      INTEGER NOT NULL DEFAULT 0,
    last_error    TEXT,
    delivered_at  INTEGER  -- our clock, when the receiver answered 2xx; NULL: waiting
);
CREATE INDEX webhook_outbox_message ON webhook_outbox (message_id, id);
CREATE INDEX webhook_outbox_due ON webhook_outbox (next_try_at) WHERE next_try_at IS NOT NULL;
CREATE INDEX webhook_outbox_delivered ON webhook_outbox (delivered_at);
""")


def add_campaign_control(conn: apsw.Connection) -> None:
    """Version 7 (OPS-1, 2, 3, 6): message priority and the claim's lanes, campaign
    schedule, window and templates, and the operator's decisions on messages.

    Single messages are high priority, campaign messages normal. The campaign index
    becomes covering for parts, so a campaign's parts are summed from the index.
    """
    conn.execute("""
ALTER TABLE messages ADD COLUMN priority INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN claimed_at INTEGER;
UPDATE messages SET priority = 1 WHERE campaign_id IS NOT NULL;
ALTER TABLE campaigns ADD COLUMN send_at INTEGER;
ALTER TABLE campaigns ADD COLUMN window_from INTEGER;
ALTER TABLE campaigns ADD COLUMN window_to INTEGER;
ALTER TABLE campaigns ADD COLUMN window_tz TEXT;
ALTER TABLE campaigns ADD COLUMN personalised INTEGER NOT NULL DEFAULT 0;
ALTER TABLE campaigns ADD COLUMN planned_parts INTEGER NOT NULL DEFAULT 0;
DROP INDEX messages_campaign_state;
CREATE INDEX messages_campaign_state ON messages (campaign_id, state, parts);
CREATE INDEX messages_lanes ON messages (provider, priority, campaign_id, state, next_attempt_at)
    WHERE state IN ('QUEUED', 'RETRY') AND claimed_at IS NULL;
CREATE INDEX messages_claimed ON messages (provider, campaign_id) WHERE claimed_at IS NOT NULL;
CREATE TABLE message_actions (
    id           INTEGER PRIMARY KEY,
    message_id   INTEGER NOT NULL REFERENCES messages(id),
    action       TEXT    NOT NULL,
    from_state   TEXT    NOT NULL,
    to_state     TEXT    NOT NULL,
    actor        TEXT    NOT NULL,
    at           INTEGER NOT NULL
);
CREATE INDEX message_actions_message ON message_actions (message_id);
""")


def add_lease_owners(conn: apsw.Connection) -> None:
    """Version 9 (SCALE-1): which process holds a message it is sending and an import
    job it is parsing (``lease_owner``, see :mod:`appliance.store.owner`), so that with
    several processes on one PostgreSQL database only a dead process's work is taken
    over. Portable: the same statements run on both backends."""
    conn.execute("ALTER TABLE messages ADD COLUMN lease_owner TEXT")
    conn.execute("ALTER TABLE import_jobs ADD COLUMN lease_owner TEXT")


def add_import_windows(conn: apsw.Connection) -> None:
    """Version 10 (IMP-4 at a million lines): a large import is applied a window of
    lines at a time, its numbers sorted so the contacts index takes them in order; a
    window part-way through is kept on the job (``window_to``, ``window_done``,
    ``window_lines``). A job the older code left part-way is between chunks, which is
    where a window starts.

    On SQLite ``import_payloads.body`` moves to the end of its row: only a last column's
    ``zeroblob(n)`` is stored without making the n bytes in memory, so a 26 MB paste
    cost the accept 52 MB more than its own pieces. PostgreSQL never uses zeroblob: its
    table stays as it is."""
    conn.execute("ALTER TABLE import_jobs ADD COLUMN window_to INTEGER")
    conn.execute("ALTER TABLE import_jobs ADD COLUMN window_done INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE import_jobs ADD COLUMN window_lines INTEGER NOT NULL DEFAULT 0")
    if isinstance(conn, apsw.Connection):
        conn.execute(
            "CREATE TABLE import_payloads_v10 ("
            " job_id INTEGER PRIMARY KEY REFERENCES import_jobs(id),"
            " content_type TEXT NOT NULL, received_at INTEGER NOT NULL, body BLOB NOT NULL);"
            " INSERT INTO import_payloads_v10 (job_id, content_type, received_at, body)"
            " SELECT job_id, content_type, received_at, body FROM import_payloads;"
            " DROP TABLE import_payloads;"
            " ALTER TABLE import_payloads_v10 RENAME TO import_payloads;")


_SIGN_IN_GUARD: Final = """
CREATE TABLE sign_in_failures (
    key            TEXT    PRIMARY KEY,
    failures       INTEGER NOT NULL,
    blocked_until  INTEGER NOT NULL,
    last_at        INTEGER NOT NULL
);
CREATE INDEX sign_in_failures_last ON sign_in_failures (last_at);
CREATE TABLE sign_in_tokens_used (
    nonce      TEXT    PRIMARY KEY,
    issued_at  INTEGER NOT NULL
);
CREATE INDEX sign_in_tokens_used_issued ON sign_in_tokens_used (issued_at);
"""


def add_sign_in_guard(conn: apsw.Connection) -> None:
    """Version 11 (EDGE-6 with several processes): the sign-in guard's failed attempts
    and used form tokens move from each process's memory into the database, so a
    sign-in form from one process is good at another and a guess counts at all of them.
    On PostgreSQL the same tables in its DDL (times are ``BIGINT`` there)."""
    if isinstance(conn, apsw.Connection):
        conn.execute(_SIGN_IN_GUARD)
        return
    for statement in dialect.postgresql_schema(_SIGN_IN_GUARD).split(";"):
        if statement.strip():
            conn.execute(statement)


def add_ucs2_parts(conn: apsw.Connection) -> None:
    """Version 12 (ENC-1): what UCS-2 would have taken, beside the parts a message takes.

    NULL for the messages made before: their text was never weighed against UCS-2 for
    the provider it went through, and a figure made up now would not be the one shown
    when they were sent.
    """
    conn.execute("ALTER TABLE messages ADD COLUMN ucs2_parts INTEGER")


def add_campaign_encodings(conn: apsw.Connection) -> None:
    """Version 13 (ENC-1): a campaign's progress reads its encodings and what UCS-2 would
    take from the same covering index as its counts and parts."""
    conn.execute("DROP INDEX messages_campaign_state;"
                 " CREATE INDEX messages_campaign_state ON messages"
                 " (campaign_id, state, encoding, parts, ucs2_parts)")


_MESSAGE_PULLS: Final = """
CREATE TABLE message_pulls (
    message_id    INTEGER PRIMARY KEY REFERENCES messages(id),
    provider      TEXT    NOT NULL,
    pulls         INTEGER NOT NULL DEFAULT 0,
    next_at       INTEGER,
    last_at       INTEGER,
    last_outcome  TEXT
);
CREATE INDEX message_pulls_due ON message_pulls (provider, next_at) WHERE next_at IS NOT NULL;
"""


def add_pulls(conn: apsw.Connection) -> None:
    """Version 14 (ROUTE-2): asking a provider about the messages it has not reported.

    ``report_inbox.source`` says how each report came: ``callback``, ``session`` or
    ``pull``. Rows from before get what they imply: ``session`` where the raw row they
    came in is an SMPP ``deliver_sm`` (``method = 'SMPP'``), or, its raw row pruned,
    where their provider's other reports came that way; else ``callback`` (no pull was
    ever made before this version). ``message_pulls``: each message's asks (none yet).
    """
    conn.execute("ALTER TABLE report_inbox ADD COLUMN source TEXT NOT NULL DEFAULT 'callback'")
    conn.execute(
        "UPDATE report_inbox SET source = 'session' WHERE raw_id IN"
        " (SELECT id FROM raw_reports WHERE method = 'SMPP')"
        " OR (NOT EXISTS (SELECT 1 FROM raw_reports r WHERE r.id = report_inbox.raw_id)"
        " AND provider IN (SELECT DISTINCT provider FROM raw_reports WHERE method = 'SMPP'))")
    if isinstance(conn, apsw.Connection):
        conn.execute(_MESSAGE_PULLS)
        return
    for statement in dialect.postgresql_schema(_MESSAGE_PULLS).split(";"):
        if statement.strip():
            conn.execute(statement)


_CONSENTS: Final = """
-- IYS-2: a number's consent to commercial messages, per account. `consents` holds the
-- record in force (the latest by consented_at; on a tie RET wins); `consent_history`
-- every record received, once. received_at: when the record in force arrived;
-- last_commercial_at: when the last commercial message to the number was marked SENDING.
CREATE TABLE consents (
    id                  INTEGER PRIMARY KEY,
    account_id          INTEGER NOT NULL REFERENCES accounts(id),
    msisdn              TEXT    NOT NULL,  -- E.164, normalised as imports are
    status              TEXT    NOT NULL,  -- ONAY RET
    recipient_type      TEXT    NOT NULL,  -- BIREYSEL TACIR
    source              TEXT    NOT NULL DEFAULT '',
    consented_at        INTEGER NOT NULL,
    received_at         INTEGER NOT NULL,
    last_commercial_at  INTEGER,
    UNIQUE (account_id, msisdn)
);
CREATE INDEX consents_status ON consents (account_id, status, id);
CREATE TABLE consent_history (
    id              INTEGER PRIMARY KEY,
    account_id      INTEGER NOT NULL REFERENCES accounts(id),
    msisdn          TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    recipient_type  TEXT    NOT NULL,
    source          TEXT    NOT NULL DEFAULT '',
    consented_at    INTEGER NOT NULL,
    received_at     INTEGER NOT NULL,
    UNIQUE (account_id, msisdn, consented_at, status, recipient_type, source)
);
CREATE UNIQUE INDEX messages_duplicate_today ON messages (dup_key)
    WHERE dup_key IS NOT NULL AND state NOT IN ('REJECTED', 'FAILED', 'CANCELLED');
"""


def add_consents(conn: apsw.Connection) -> None:
    """Version 16 (IYS-1..4): whether a message or campaign is commercial, the key that
    keeps the same text from going to a number twice a day through one sender header,
    and the consents (the record in force and every record received). On PostgreSQL the
    same tables in its DDL."""
    sqlite = isinstance(conn, apsw.Connection)
    text = "TEXT" if sqlite else 'TEXT COLLATE "C"'  # as postgresql_schema writes TEXT
    conn.execute(f"ALTER TABLE messages ADD COLUMN message_type {text}")
    conn.execute(f"ALTER TABLE messages ADD COLUMN dup_key {text}")
    conn.execute(f"ALTER TABLE campaigns ADD COLUMN message_type {text}")
    if sqlite:
        conn.execute(_CONSENTS)
        return
    for statement in dialect.postgresql_schema(_CONSENTS).split(";"):
        if statement.strip():
            conn.execute(statement)


def add_key_quotas(conn: apsw.Connection) -> None:
    """Version 17 (TEAM-1): a key's rate and daily limit (NULL: none, as every key made
    before has), and the messages each limited key had accepted on each UTC day."""
    sqlite = isinstance(conn, apsw.Connection)
    real, integer = ("REAL", "INTEGER") if sqlite else ("DOUBLE PRECISION", "BIGINT")
    conn.execute(f"ALTER TABLE api_keys ADD COLUMN rate_per_s {real}")
    conn.execute(f"ALTER TABLE api_keys ADD COLUMN daily_limit {integer}")
    table = """
CREATE TABLE key_daily_counts (
    key_id    INTEGER NOT NULL REFERENCES api_keys(id),
    day       INTEGER NOT NULL,
    messages  INTEGER NOT NULL,
    PRIMARY KEY (key_id, day)
)"""
    conn.execute(table if sqlite else dialect.postgresql_schema(table))


def add_error_kind(conn: apsw.Connection) -> None:
    """Version 18 (IYS-2): what kind of refusal ended a message (``iys``: a provider
    refused it for İYS); every message before has none. The few that have one are
    indexed by creation time (the dashboard's count)."""
    text = "TEXT" if isinstance(conn, apsw.Connection) else 'TEXT COLLATE "C"'
    conn.execute(f"ALTER TABLE messages ADD COLUMN error_kind {text}")
    conn.execute("CREATE INDEX messages_refused_kind ON messages (created_at)"
                 " WHERE error_kind IS NOT NULL")


def add_validity(conn: apsw.Connection) -> None:
    """Version 19 (ROUTE-4): when a message stops being worth sending (epoch ms; NULL:
    never, as for every message before) and a campaign's validity for its messages."""
    integer = "INTEGER" if isinstance(conn, apsw.Connection) else "BIGINT"
    conn.execute(f"ALTER TABLE messages ADD COLUMN expires_at {integer}")
    conn.execute(f"ALTER TABLE campaigns ADD COLUMN validity_s {integer}")


# version -> step that takes a database from version-1 to version.
MIGRATIONS: dict[int, Callable[[apsw.Connection], None]] = {
    2: _message_parts,
    3: _reject_line_length,
    4: _lists_deleted_and_job_reruns,
    5: add_opt_outs,
    6: add_webhook_outbox,
    7: add_campaign_control,
    8: add_rollups,
    9: add_lease_owners,
    10: add_import_windows,
    11: add_sign_in_guard,
    12: add_ucs2_parts,
    13: add_campaign_encodings,
    14: add_pulls,
    16: add_consents,
    17: add_key_quotas,
    18: add_error_kind,
    19: add_validity,
    20: list_inbound_by_number,
    21: add_account_receivers,
    22: add_routes,
    23: add_campaign_number_order,
    24: key_by_number,
}
