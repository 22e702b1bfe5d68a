-- The appliance schema. One SQLite file in WAL mode; the writer thread is the only
-- connection that writes. Portable SQL on purpose (INSERT ... ON CONFLICT, no
-- INSERT OR IGNORE, no SQLite-only types) so the same tables can move to PostgreSQL.
--
-- Time convention: every *_at column is INTEGER milliseconds since 1970-01-01 UTC.
-- reported_at = 0 means "the provider sent no time".
--
-- Versioned with PRAGMA user_version (see appliance/store/schema.py). This file is
-- the current schema; MIGRATIONS in appliance/store/schema.py holds the steps from older ones.

CREATE TABLE accounts (
    id           INTEGER PRIMARY KEY,
    name         TEXT    NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL
);

-- API keys are stored as sha256 of the key; the key itself is shown once.
CREATE TABLE api_keys (
    id           INTEGER PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts(id),
    key_hash     TEXT    NOT NULL UNIQUE,
    prefix       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    rate_per_s   REAL,     -- requests a second that create messages or campaigns; NULL: no limit
    daily_limit  INTEGER   -- messages a UTC day; NULL: no limit
);

-- Messages each key had accepted on each UTC day (day: days since 1970-01-01), counted
-- in the unit that accepts them, for the keys with a daily_limit.
CREATE TABLE key_daily_counts (
    key_id    INTEGER NOT NULL REFERENCES api_keys(id),
    day       INTEGER NOT NULL,
    messages  INTEGER NOT NULL,
    PRIMARY KEY (key_id, day)
);

-- Console sign-ins (scrypt hashes).
CREATE TABLE users (
    id             INTEGER PRIMARY KEY,
    account_id     INTEGER NOT NULL REFERENCES accounts(id),
    name           TEXT    NOT NULL UNIQUE,
    password_hash  TEXT    NOT NULL,
    created_at     INTEGER NOT NULL
);

CREATE TABLE sessions (
    token_hash   TEXT    PRIMARY KEY,
    user_id      INTEGER NOT NULL REFERENCES users(id),
    csrf_token   TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
);

-- EDGE-6: the sign-in guard's state, shared by every process on the database. Failed
-- sign-ins per user name ('user:<name>') and per client address ('addr:<address>'),
-- and the sign-in forms' tokens once used (each is good for one attempt).
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

-- A deleted list keeps its row (its campaigns and import jobs point at it) with its
-- contacts removed; importing into the same name again brings it back, empty.
CREATE TABLE lists (
    id           INTEGER PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts(id),
    name         TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    deleted_at   INTEGER,
    UNIQUE (account_id, name)
);

-- IMP-5: dedupe on the normalised value, enforced by the database at insert time.
CREATE TABLE contacts (
    id           INTEGER PRIMARY KEY,
    list_id      INTEGER NOT NULL REFERENCES lists(id),
    msisdn       TEXT    NOT NULL,
    name         TEXT,
    job_id       INTEGER,
    created_at   INTEGER NOT NULL,
    UNIQUE (list_id, msisdn)
);

-- IMP-1..11: one row per accepted submission. The raw payload lives in
-- import_payloads so it can be pruned (IMP-10) while the summary stays.
CREATE TABLE import_jobs (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: contacts.job_id outlives pruned jobs
    account_id         INTEGER NOT NULL REFERENCES accounts(id),
    list_id            INTEGER NOT NULL REFERENCES lists(id),
    idempotency_key    TEXT    NOT NULL,
    payload_sha256     TEXT    NOT NULL,
    region             TEXT    NOT NULL,
    state              TEXT    NOT NULL,  -- DRAFT RUNNING DONE FAILED CANCELLED
    total              INTEGER NOT NULL,  -- lines in the payload
    processed          INTEGER NOT NULL DEFAULT 0,  -- lines done
    text_offset        INTEGER NOT NULL DEFAULT 0,  -- offset in the decoded text where parsing resumes
    inserted           INTEGER NOT NULL DEFAULT 0,
    duplicates_in_paste INTEGER NOT NULL DEFAULT 0,
    duplicates_in_list INTEGER NOT NULL DEFAULT 0,
    rejected           INTEGER NOT NULL DEFAULT 0,
    blank              INTEGER NOT NULL DEFAULT 0,
    header_skipped     INTEGER NOT NULL DEFAULT 0,
    error              TEXT,
    created_at         INTEGER NOT NULL,
    started_at         INTEGER,
    finished_at        INTEGER,
    updated_at         INTEGER NOT NULL,
    payload_pruned_at  INTEGER,
    rerun_of           INTEGER,  -- IMP-11: the job whose stored payload this one parses again
    lease_owner        TEXT,  -- SCALE-1: the process parsing it (store/owner.py)
    -- A large job is applied a window of lines at a time, its numbers in index order
    -- (imports/parse_process.py). While one is part-way: where it ends, how many of its
    -- distinct numbers are in, and how many of its lines those account for (`processed`
    -- counts them; the window starts at line `processed` - `window_lines`, `text_offset`).
    window_to          INTEGER,
    window_done        INTEGER NOT NULL DEFAULT 0,
    window_lines       INTEGER NOT NULL DEFAULT 0,
    UNIQUE (account_id, idempotency_key)
);
CREATE INDEX import_jobs_state ON import_jobs (state);
CREATE INDEX import_jobs_finished ON import_jobs (finished_at);

CREATE TABLE import_payloads (
    job_id        INTEGER PRIMARY KEY REFERENCES import_jobs(id),
    content_type  TEXT    NOT NULL,
    received_at   INTEGER NOT NULL,
    -- Last, so that SQLite stores a zeroblob(n) the accept then fills piece by piece
    -- without making the n bytes in memory first (twice: the zeros and the record).
    body          BLOB    NOT NULL
);

CREATE TABLE import_rejects (
    job_id       INTEGER NOT NULL REFERENCES import_jobs(id),
    line_number  INTEGER NOT NULL,
    line         TEXT    NOT NULL,  -- at most the first 1,000 characters of the line
    reason       TEXT    NOT NULL,
    line_length  INTEGER NOT NULL DEFAULT 0,  -- characters in the whole line
    PRIMARY KEY (job_id, line_number)
);

CREATE TABLE campaigns (
    id               INTEGER PRIMARY KEY,
    account_id       INTEGER NOT NULL REFERENCES accounts(id),
    list_id          INTEGER NOT NULL REFERENCES lists(id),
    provider         TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    idempotency_key  TEXT    NOT NULL,
    state            TEXT    NOT NULL,  -- RUNNING PAUSED CANCELLED (SCHEDULED and DONE are derived)
    total            INTEGER NOT NULL,
    queued_through   INTEGER NOT NULL DEFAULT 0,  -- last_contact_id once every message exists (see queued_after)
    last_contact_id  INTEGER NOT NULL DEFAULT 0,  -- the list as it was: contacts.id <= this are the campaign's
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    -- OPS-2: nothing is claimed before send_at; outside the window (local wall-clock
    -- minutes from/to in window_tz, from > to spans midnight) nothing is claimed either.
    send_at          INTEGER,
    window_from      INTEGER,
    window_to        INTEGER,
    window_tz        TEXT,
    -- OPS-3: 1 when the body is a template ({name}, {name|fallback}, {{ }}) rendered per
    -- contact; 0 for a body sent as written.
    personalised     INTEGER NOT NULL DEFAULT 0,
    planned_parts    INTEGER NOT NULL DEFAULT 0,  -- the dry run's parts at acceptance
    message_type     TEXT,  -- IYS-1: commercial or transactional; NULL: not stated
    validity_s       INTEGER,  -- ROUTE-4: its messages' validity; NULL or 0: the provider's own
    routed           INTEGER NOT NULL DEFAULT 0,  -- ROUTE-3: 1: its messages follow [[routes]]
    -- Messages are created in the order of the list's numbers (byte order), so each
    -- chunk's inserts are a run of neighbours in every index keyed by the number: the
    -- last number whose message exists; NULL: none yet. The contacts left are those
    -- with id > queued_through (0 until the last chunk, a campaign from before this
    -- column: where it had got to by id), id <= last_contact_id and a greater number.
    queued_after     TEXT,
    UNIQUE (account_id, idempotency_key)
);

-- DLR-1: `ref` is ours, generated before anything leaves the process.
CREATE TABLE messages (
    id                INTEGER PRIMARY KEY,
    ref               TEXT    NOT NULL UNIQUE,
    account_id        INTEGER NOT NULL REFERENCES accounts(id),
    campaign_id       INTEGER REFERENCES campaigns(id),
    provider          TEXT    NOT NULL,
    msisdn            TEXT    NOT NULL,
    body              TEXT    NOT NULL,
    idempotency_key   TEXT,
    state             TEXT    NOT NULL,
    state_at          INTEGER NOT NULL DEFAULT 0,  -- provider time of the report that set state
    attempts          INTEGER NOT NULL DEFAULT 0,
    next_attempt_at   INTEGER NOT NULL,
    provider_msg_id   TEXT,
    error             TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    submitted_at      INTEGER,
    finalised_at      INTEGER,  -- our clock, when a final state was reached
    -- MSG-1: how the body travels, from our segmentation at acceptance.
    encoding          TEXT    NOT NULL DEFAULT 'GSM-7',  -- GSM-7, GSM-7 Turkish or UCS-2
    parts             INTEGER NOT NULL DEFAULT 1,  -- SMS parts the body is billed as
    ucs2_because      TEXT,  -- the first character that forced UCS-2, or NULL
    ucs2_parts        INTEGER,  -- ENC-1: parts the body would take in UCS-2; NULL: made before
    priority          INTEGER NOT NULL DEFAULT 0,  -- OPS-1: 0 high (single messages), 1 normal (campaigns)
    claimed_at        INTEGER,  -- OPS-6: reserved by the sender (still QUEUED/RETRY, nothing sent); NULL otherwise
    counted_state     TEXT,  -- the state message_counts counts it under; NULL: not yet
    lease_owner       TEXT,  -- SCALE-1: the process that marked it SENDING (store/owner.py)
    message_type      TEXT,  -- IYS-1: commercial or transactional; NULL: not stated
    -- IYS-4 (country TR): the day in Europe/Istanbul, the account, the number, and the
    -- sender header and text hashed (appliance/sending/duplicates.py); NULL: not guarded,
    -- or ended REJECTED, FAILED or CANCELLED (cleared by a trigger: it blocks nothing).
    dup_key           TEXT,
    -- IYS-2: what kind of refusal ended it: 'iys' (a provider refused it for İYS); NULL otherwise.
    error_kind        TEXT,
    -- ROUTE-4: past this (our clock, epoch ms) it is never submitted: CANCELLED
    -- (expired before sending). NULL: no validity of its own (the provider's default).
    expires_at        INTEGER,
    -- ROUTE-3: the [[routes]] prefix that chose its provider; NULL: none (the request
    -- named it, no route matched, or made before routes): it never moves.
    route             TEXT,
    -- ROUTE-3: each attempt or move, one line "provider<TAB>outcome<TAB>epoch ms".
    attempts_log      TEXT,
    UNIQUE (account_id, idempotency_key),
    UNIQUE (campaign_id, msisdn)
);
CREATE INDEX messages_due ON messages (state, next_attempt_at);
-- Covering for coverage and open-by-hour (DLR-9): a window of messages is read from
-- the index alone, for one account or all.
CREATE INDEX messages_created ON messages (created_at, account_id, state);
-- Covering for a campaign's counts and parts by state (one pass over the index).
CREATE INDEX messages_campaign_state ON messages (campaign_id, state, encoding, parts,
    ucs2_parts);
-- OPS-1: the sender's claim. Only messages waiting to be claimed are in it; one lane per
-- (priority, campaign), oldest first, so each claim is a range scan of one lane.
CREATE INDEX messages_lanes ON messages (provider, priority, campaign_id, state, next_attempt_at)
    WHERE state IN ('QUEUED', 'RETRY') AND claimed_at IS NULL;
-- OPS-6: the few messages the sender has reserved (released at start, or by a pause).
CREATE INDEX messages_claimed ON messages (provider, campaign_id) WHERE claimed_at IS NOT NULL;
-- By number, for one account or all. IYS-4: also one message per duplicate-today key,
-- dup_key: NULL when not guarded or ended (NULLs are distinct), so a message that ended
-- REJECTED, FAILED or CANCELLED blocks nothing (appliance/store/dup_key_triggers.py).
CREATE UNIQUE INDEX messages_msisdn ON messages (account_id, msisdn, dup_key);
CREATE INDEX messages_provider_id ON messages (provider, provider_msg_id);
-- DLR-7 cut-off, and overdue (DLR-11) counted from the index alone, for one account or all.
CREATE INDEX messages_open ON messages (state, submitted_at, created_at, account_id);
-- The messages whose state is not (yet) in message_counts: new ones, and those whose
-- state changed since they were counted (see message_counts below).
CREATE INDEX messages_uncounted ON messages (created_at, account_id, state, counted_state)
    WHERE counted_state IS DISTINCT FROM state;
-- IYS-2: the messages a provider refused for İYS, by creation time (few: the dashboard
-- counts them without reading the others).
CREATE INDEX messages_refused_kind ON messages (created_at) WHERE error_kind IS NOT NULL;

-- MSG-3/4: one row per part the provider reports on separately (Vonage: one per SMS
-- part, each with its own id; Twilio, Infobip: one, their id covers every part). Written
-- with the submission outcome in the same unit as the message's SUBMITTED. The
-- message's state is the aggregate of its parts' states (appliance/reports/aggregate.py).
-- state: RETRY (not taken yet, sent again), SUBMITTED, UNCERTAIN (maybe taken, never
-- resent blindly), REJECTED, then what reports say (ACCEPTED ENROUTE DELIVERED FAILED
-- EXPIRED REJECTED) or UNKNOWN (cut off).
CREATE TABLE message_parts (
    message_id        INTEGER NOT NULL REFERENCES messages(id),
    part              INTEGER NOT NULL,  -- 1, 2, ... in the provider's order
    provider_msg_id   TEXT,  -- the provider's id for this part; NULL until known
    state             TEXT    NOT NULL,
    state_at          INTEGER NOT NULL DEFAULT 0,  -- provider time of the report that set state
    error             TEXT,
    submitted_at      INTEGER,  -- our clock, when the provider took it
    finalised_at      INTEGER,  -- our clock, when a final state was reached
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (message_id, part)
);

-- DLR-2: every authenticated callback body, as received, before interpretation.
CREATE TABLE raw_reports (
    id            INTEGER PRIMARY KEY,
    provider      TEXT    NOT NULL,
    method        TEXT    NOT NULL,
    content_type  TEXT    NOT NULL,
    query         TEXT    NOT NULL,
    body          BLOB    NOT NULL,
    received_at   INTEGER NOT NULL,
    parsed        INTEGER NOT NULL,  -- 1 parsed into reports, 0 quarantined
    error         TEXT
);
CREATE INDEX raw_reports_received ON raw_reports (received_at);
CREATE INDEX raw_reports_quarantine ON raw_reports (parsed, received_at);

-- DLR-3/4/5: every parsed report, keyed by what the provider sent. A repeat is the
-- same fact: it only bumps `repeats`. applied_at IS NULL means waiting in the inbox;
-- rows that were matched stay as the message's report history (message_id).
CREATE TABLE report_inbox (
    id             INTEGER PRIMARY KEY,
    provider       TEXT    NOT NULL,
    ref            TEXT    NOT NULL,  -- our ref as the provider echoed it; '' when it sent only its own id
    provider_msg_id TEXT   NOT NULL DEFAULT '',  -- the provider's id; '' when it sent none
    status         TEXT    NOT NULL,  -- the provider's own status word
    reported_at    INTEGER NOT NULL,  -- provider clock, 0 = none sent
    state          TEXT    NOT NULL,  -- our mapped state
    error_code     TEXT,
    raw_id         INTEGER,  -- raw_reports.id; the raw row may be pruned first (DLR-12)
    received_at    INTEGER NOT NULL,  -- our clock; retention uses this
    attempts       INTEGER NOT NULL DEFAULT 0,
    next_try_at    INTEGER NOT NULL,
    repeats        INTEGER NOT NULL DEFAULT 0,
    message_id     INTEGER,  -- the message it was matched to
    part           INTEGER,  -- the part it was about; NULL: waiting, or the whole message
    applied_at     INTEGER,  -- our clock, when it was matched (applied or kept as stale)
    outcome        TEXT,  -- APPLIED, STALE (kept in history, not applied), or NULL while waiting
    source         TEXT    NOT NULL DEFAULT 'callback',  -- how it came: callback, session or pull
    UNIQUE (ref, provider_msg_id, status, reported_at, provider)
);
-- Only the rows still waiting (applied_at IS NULL): the reconciler's next due, and the
-- oldest waiting (inbox health, DLR-10; retention of unmatched rows) as first entries.
CREATE INDEX report_inbox_due ON report_inbox (next_try_at) WHERE applied_at IS NULL;
CREATE INDEX report_inbox_waiting_since ON report_inbox (received_at) WHERE applied_at IS NULL;
CREATE INDEX report_inbox_received ON report_inbox (received_at);
CREATE INDEX report_inbox_provider_id ON report_inbox (provider, provider_msg_id);
CREATE INDEX report_inbox_message ON report_inbox (message_id);

-- ROUTE-2: asking a provider about a message it has not reported. One row per message
-- asked about (or queued to be asked by POST /api/messages/{ref}/pull); none before the
-- first ask, which is due pull_after_s after submission. next_at NULL: asked for the last
-- time (or final). last_outcome: final, pending, unknown_id or error.
CREATE TABLE message_pulls (
    message_id    INTEGER PRIMARY KEY REFERENCES messages(id),
    provider      TEXT    NOT NULL,
    pulls         INTEGER NOT NULL DEFAULT 0,  -- times asked
    next_at       INTEGER,  -- our clock: the next ask is due
    last_at       INTEGER,  -- our clock: the last ask
    last_outcome  TEXT
);
CREATE INDEX message_pulls_due ON message_pulls (provider, next_at) WHERE next_at IS NOT NULL;

-- Where a provider reports only its own id, the id -> (ref, part) mapping recorded at
-- submit, one row per part id.
CREATE TABLE provider_ids (
    provider         TEXT NOT NULL,
    provider_msg_id  TEXT NOT NULL,
    ref              TEXT NOT NULL,
    part             INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (provider, provider_msg_id)
);

-- Small key/value facts the scheduler keeps (last backup, alert states, ...).
CREATE TABLE appliance_state (
    key    TEXT PRIMARY KEY,
    value  TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

-- OPS-4: numbers an account must not send to. One row per (account, number); a send
-- to one is refused, a campaign creates its message CANCELLED, and the sender's claim
-- cancels a queued one. `source` says who added it: api, console, import or inbound
-- (a STOP keyword, with the inbound message in `inbound_id`).
CREATE TABLE suppressions (
    id           INTEGER PRIMARY KEY,
    account_id   INTEGER NOT NULL REFERENCES accounts(id),
    msisdn       TEXT    NOT NULL,  -- E.164, normalised as imports are
    reason       TEXT    NOT NULL DEFAULT '',
    source       TEXT    NOT NULL,  -- api console import inbound
    inbound_id   INTEGER,  -- inbound_messages.id when a STOP keyword added it
    created_at   INTEGER NOT NULL,
    UNIQUE (account_id, msisdn)
);

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

-- OPS-4: every authenticated inbound (MO) request, as received, before interpretation
-- (as raw_reports keeps report callbacks). parsed = 0: kept raw, could not be read.
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

-- OPS-4: inbound messages, one row per message the provider sent us (a provider's retry
-- of the same message id only bumps `repeats`). A message that came in parts is one row
-- once its first part is here; `parts_received` counts up to `parts`.
CREATE TABLE inbound_messages (
    id               INTEGER PRIMARY KEY,
    provider         TEXT    NOT NULL,
    provider_msg_id  TEXT,  -- the provider's id (or our key for a message in parts); NULL: none given
    msisdn           TEXT    NOT NULL,  -- the sender, E.164 when it is a number
    to_number        TEXT    NOT NULL,  -- the number or sender id it was sent to
    text             TEXT    NOT NULL,
    parts            INTEGER NOT NULL DEFAULT 1,
    parts_received   INTEGER NOT NULL DEFAULT 1,
    sent_at          INTEGER NOT NULL DEFAULT 0,  -- provider clock, 0 = none sent
    received_at      INTEGER NOT NULL,  -- our clock
    keyword          TEXT,  -- the STOP keyword it was, NULL when it was none
    raw_id           INTEGER,  -- raw_inbound.id of its (first) request
    repeats          INTEGER NOT NULL DEFAULT 0,
    UNIQUE (provider, provider_msg_id)
);
CREATE INDEX inbound_messages_msisdn ON inbound_messages (msisdn);

-- The parts of an inbound message sent in parts (Vonage concat-ref), until reassembled.
CREATE TABLE inbound_parts (
    inbound_id       INTEGER NOT NULL REFERENCES inbound_messages(id),
    part             INTEGER NOT NULL,
    text             TEXT    NOT NULL,
    provider_msg_id  TEXT,
    PRIMARY KEY (inbound_id, part)
);

-- Which accounts an inbound message is for: those that sent to that number through
-- that provider; every account when none did (see docs/inbound.md).
CREATE TABLE inbound_accounts (
    account_id   INTEGER NOT NULL REFERENCES accounts(id),
    inbound_id   INTEGER NOT NULL REFERENCES inbound_messages(id),
    PRIMARY KEY (account_id, inbound_id)
);

-- TEAM-2: an account's own webhook receiver: its events (its messages' status, the
-- inbound messages listed to it) go only there, signed with its secret; with none, they
-- go to the [webhooks] receiver. Its delivery health, as webhook_receiver's below.
CREATE TABLE account_receivers (
    account_id            INTEGER PRIMARY KEY REFERENCES accounts(id),
    url                   TEXT    NOT NULL,
    secret                TEXT    NOT NULL,
    delivered             INTEGER NOT NULL DEFAULT 0,
    failed_attempts       INTEGER NOT NULL DEFAULT 0,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    paused_until          INTEGER NOT NULL DEFAULT 0,
    last_success_at       INTEGER,
    last_error            TEXT,
    last_error_at         INTEGER,
    created_at            INTEGER NOT NULL,
    updated_at            INTEGER NOT NULL
);

-- OPS-5: status webhooks out. One row (id 1) once [webhooks] has been configured;
-- `enabled` is 1 while it is (set at each start). While it is, the triggers on
-- `messages` that write the events exist (appliance/webhooks/outbox.py creates them at
-- start, and drops them when [webhooks] is not configured: then a state change costs
-- nothing more than it did before OPS-5). The rest is how delivering goes, kept here
-- so a restart neither forgets it nor hammers a receiver that is down.
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

-- OPS-5: the outbox. One row per event, written by the triggers in the same transaction
-- as the state change; the id is the order events happened in. Per message, only the
-- oldest undelivered event has a `next_try_at` (its head): the others wait behind it,
-- so a message's events go out in order. A delivered event keeps its row (with
-- `delivered_at`) until retention prunes it.
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
    delivered_at  INTEGER,  -- our clock, when the receiver answered 2xx; NULL: waiting
    receiver      INTEGER NOT NULL DEFAULT 0,  -- account_receivers.account_id; 0: [webhooks]
    inbound_id    INTEGER  -- an inbound.received event: inbound_messages.id (message_id 0)
);
CREATE INDEX webhook_outbox_message ON webhook_outbox (message_id, id);
CREATE INDEX webhook_outbox_due ON webhook_outbox (receiver, next_try_at)
    WHERE next_try_at IS NOT NULL;
CREATE INDEX webhook_outbox_waiting ON webhook_outbox (receiver, id) WHERE delivered_at IS NULL;
CREATE INDEX webhook_outbox_delivered ON webhook_outbox (delivered_at);

-- OPS-6: what an operator decided about a message (resend or mark failed an UNCERTAIN
-- one), kept in the message's history.
CREATE TABLE message_actions (
    id           INTEGER PRIMARY KEY,
    message_id   INTEGER NOT NULL REFERENCES messages(id),
    action       TEXT    NOT NULL,  -- resend mark_failed
    from_state   TEXT    NOT NULL,
    to_state     TEXT    NOT NULL,
    actor        TEXT    NOT NULL,  -- who: an API key's prefix or a console user
    at           INTEGER NOT NULL
);
CREATE INDEX message_actions_message ON message_actions (message_id);

-- Summaries that don't scan: counts kept up to date in the same transaction as the rows
-- they count, so /api/stats, the dashboard, /metrics and `appliance doctor` read a few
-- hundred rows instead of every message. appliance/store/rollups.py reads them and
-- compares them with a full recount (a randomised test).
--
-- Messages per account, minute of creation (created_at / 60000) and state. A message is
-- counted under messages.counted_state (NULL: not counted yet); one whose state differs
-- from it is in messages_uncounted, and readers add it there, so the counts are exact
-- in every snapshot; a bounded write unit (the rollups loop) moves such messages into
-- the counts. A count that reaches 0 is removed.
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
-- other); the last five kept by the count triggers (see the end of this file).
CREATE TABLE row_counts (
    name  TEXT    NOT NULL,
    key   TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (name, key)
);

-- The count triggers are defined once for both engines (appliance.store.count_triggers)
-- and follow this file in the schema a new database gets (appliance.store.schema.schema_sql).
