-- depends: 0001.initial
-- Issue 30, "The floor trusts nothing": every projection keyed by its table (a message on one
-- table's topic can no longer reach another table's round, player or alarm), what the pit needs
-- to follow a table by its own seq and by arrival (never a claimed time), the pit's page
-- sessions kept server-side (so they can be revoked).

CREATE TABLE rounds_keyed (
    table_id TEXT NOT NULL,
    round_id TEXT NOT NULL,
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
    side_wagered BIGINT NOT NULL,
    side_won BIGINT NOT NULL,
    side_theoretical DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (table_id, round_id)
);
INSERT INTO rounds_keyed (table_id, round_id, round_seq, msg_seq, status, reasons, dealer_id,
    opened_at, closed_at, shift, seats, two_jacks, side_wagered, side_won, side_theoretical)
    SELECT table_id, round_id, round_seq, msg_seq, status, reasons, dealer_id, opened_at,
        closed_at, shift, seats, two_jacks, side_wagered, side_won, side_theoretical FROM rounds;
DROP TABLE rounds;
ALTER TABLE rounds_keyed RENAME TO rounds;
CREATE INDEX rounds_by_table ON rounds (table_id, round_seq);
CREATE INDEX rounds_by_shift ON rounds (shift, table_id);
CREATE INDEX rounds_by_id ON rounds (round_id);

CREATE TABLE players_keyed (
    table_id TEXT NOT NULL,
    round_id TEXT NOT NULL,
    seat TEXT NOT NULL,
    msg_seq BIGINT NOT NULL,
    outcome TEXT NOT NULL,
    foul INTEGER NOT NULL,
    wager BIGINT,
    win BIGINT,
    corrected INTEGER NOT NULL,
    PRIMARY KEY (table_id, round_id, seat)
);
INSERT INTO players_keyed (table_id, round_id, seat, msg_seq, outcome, foul, wager, win, corrected)
    SELECT table_id, round_id, seat, msg_seq, outcome, foul, wager, win, corrected FROM players;
DROP TABLE players;
ALTER TABLE players_keyed RENAME TO players;

CREATE TABLE alarms_keyed (
    table_id TEXT NOT NULL,
    alarm_id TEXT NOT NULL,
    code TEXT NOT NULL,
    severity TEXT NOT NULL,
    detail TEXT NOT NULL,
    raised_at TEXT NOT NULL,
    ack_required INTEGER NOT NULL,
    acked_by TEXT,
    acked_at TEXT,
    PRIMARY KEY (table_id, alarm_id)
);
INSERT INTO alarms_keyed (table_id, alarm_id, code, severity, detail, raised_at, ack_required,
    acked_by, acked_at)
    SELECT table_id, alarm_id, code, severity, detail, raised_at, ack_required, acked_by, acked_at
    FROM alarms;
DROP TABLE alarms;
ALTER TABLE alarms_keyed RENAME TO alarms;
CREATE INDEX alarms_by_id ON alarms (alarm_id);

-- When the pit last heard the table (its own clock: arrival), the seq and state of the status it
-- shows, since when it is silent, and the message seq and highest number of its rounds.
ALTER TABLE tables ADD COLUMN last_heard DOUBLE PRECISION;
ALTER TABLE tables ADD COLUMN status_seq BIGINT;
ALTER TABLE tables ADD COLUMN silent_since DOUBLE PRECISION;
ALTER TABLE tables ADD COLUMN last_round_msg_seq BIGINT;
ALTER TABLE tables ADD COLUMN round_high BIGINT;
ALTER TABLE tables ADD COLUMN state TEXT;            -- the shown status's state (online, offline, fault)
UPDATE tables SET round_high = last_round_seq, last_heard = updated_at;

-- A reject names the table of its topic (escaped, bounded), for the counts and the burst alarm.
ALTER TABLE rejects ADD COLUMN table_id TEXT;
CREATE INDEX rejects_by_table ON rejects (table_id, received_at);
CREATE INDEX rejects_by_time ON rejects (received_at);

-- The pit page's sessions: the cookie is a random id, only its SHA-256 is kept; logging out
-- revokes it; a new access token ends every session made under the old one (token_tag).
CREATE TABLE web_sessions (
    id_hash TEXT PRIMARY KEY,
    token_tag TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION
);
