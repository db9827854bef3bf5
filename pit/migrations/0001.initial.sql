-- The pit's database, first version (yoyo-migrations; the same SQL on SQLite and PostgreSQL).

-- Every message of every table's feed, once: the envelope as received.
CREATE TABLE messages (
    msg_id TEXT PRIMARY KEY,
    table_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    sequenced INTEGER NOT NULL,        -- 1: counts in the table's seq (not status, not retained)
    schema_name TEXT NOT NULL,
    topic TEXT NOT NULL,
    sent_at TEXT NOT NULL,             -- the envelope's time (journaled at the table)
    received_at DOUBLE PRECISION NOT NULL,
    replayed INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX messages_by_table_seq ON messages (table_id, seq);

-- What arrived and was not a message of the feed (not JSON, no envelope, a payload that does
-- not validate against its schema): kept with the reason, never silently dropped.
CREATE TABLE rejects (
    id TEXT PRIMARY KEY,
    topic TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL,
    reason TEXT NOT NULL,
    body TEXT NOT NULL
);

-- One row per table: where its copy stands.
CREATE TABLE tables (
    table_id TEXT PRIMARY KEY,
    topic_prefix TEXT NOT NULL,
    first_seq BIGINT,
    high_seq BIGINT,
    status TEXT,                        -- the newest status envelope (JSON)
    status_time TEXT,
    last_round TEXT,                    -- the newest round's summary (JSON)
    last_round_seq BIGINT,
    protection TEXT,                    -- the newest paigow.protection payload (JSON)
    chain_event_id BIGINT,              -- the chain head: the newest checkpoint
    chain_hash TEXT,
    chain_made_at TEXT,
    updated_at DOUBLE PRECISION NOT NULL
);

-- A table's missing seqs: reported when a later one arrived, filled when they arrive.
CREATE TABLE missing (
    table_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    reported_at DOUBLE PRECISION NOT NULL,
    filled_at DOUBLE PRECISION,
    by_status INTEGER NOT NULL,        -- 1: named by a status (the message may be on its way)
    PRIMARY KEY (table_id, seq)
);

-- The signed checkpoints, every one (a rewritten chain leaves two hashes at one row).
CREATE TABLE checkpoints (
    table_id TEXT NOT NULL,
    event_id BIGINT NOT NULL,
    chain TEXT NOT NULL,
    made_at TEXT NOT NULL,
    msg_id TEXT NOT NULL,
    signature TEXT NOT NULL,           -- valid, forged or unchecked (no key configured)
    PRIMARY KEY (table_id, event_id, chain)
);

-- Rounds as the table last sent them (a void after settlement replaces the settled one).
CREATE TABLE rounds (
    round_id TEXT PRIMARY KEY,
    table_id TEXT NOT NULL,
    round_seq BIGINT NOT NULL,
    msg_seq BIGINT NOT NULL,
    status TEXT NOT NULL,
    reasons TEXT NOT NULL,
    dealer_id TEXT,
    opened_at TEXT NOT NULL,
    closed_at TEXT NOT NULL,
    shift TEXT NOT NULL,
    seats INTEGER NOT NULL,
    two_jacks INTEGER NOT NULL,
    side_wagered BIGINT NOT NULL,      -- side wagers (Chan Chu, Jacks Beat, Ace High) staked
    side_won BIGINT NOT NULL,          -- and what the players won on them (negative: lost)
    side_theoretical DOUBLE PRECISION NOT NULL   -- the expected hold of those stakes
);
CREATE INDEX rounds_by_table ON rounds (table_id, round_seq);
CREATE INDEX rounds_by_shift ON rounds (shift, table_id);

-- Players' own settings (the Pai Gow result), the later entry for a seat wins.
CREATE TABLE players (
    round_id TEXT NOT NULL,
    seat TEXT NOT NULL,
    table_id TEXT NOT NULL,
    msg_seq BIGINT NOT NULL,
    outcome TEXT NOT NULL,
    foul INTEGER NOT NULL,
    wager BIGINT,
    win BIGINT,
    corrected INTEGER NOT NULL,
    PRIMARY KEY (round_id, seat)
);

-- The tables' alarms, and their acknowledgements.
CREATE TABLE alarms (
    alarm_id TEXT PRIMARY KEY,
    table_id TEXT NOT NULL,
    code TEXT NOT NULL,
    severity TEXT NOT NULL,
    detail TEXT NOT NULL,
    raised_at TEXT NOT NULL,
    ack_required INTEGER NOT NULL,
    acked_by TEXT,
    acked_at TEXT
);
CREATE INDEX alarms_by_table ON alarms (table_id);

-- The pit's own findings about a table's record (chain rewritten or cut, a forged checkpoint,
-- a reused seq, a gap): shown until a named person acknowledges them.
CREATE TABLE record_alarms (
    id TEXT PRIMARY KEY,
    table_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    detail TEXT NOT NULL,
    raised_at DOUBLE PRECISION NOT NULL,
    acked_by TEXT,
    acked_at DOUBLE PRECISION
);
CREATE INDEX record_alarms_by_table ON record_alarms (table_id);

-- Commands the pit signed and sent (who, what, when).
CREATE TABLE commands (
    request_id TEXT PRIMARY KEY,
    table_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    by_name TEXT NOT NULL,
    body TEXT NOT NULL,
    sent_at DOUBLE PRECISION NOT NULL
);
