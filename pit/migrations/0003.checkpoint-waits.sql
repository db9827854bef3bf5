-- depends: 0002.tables-keyed
-- Issue 31, "One pit holds a whole casino": pits sharing a group see a table's checkpoints out
-- of order (the one before may be in the other pit's batch). A checkpoint that follows one not
-- held yet is noted here, with the hash it names for that row, and given the gaps' grace: the
-- named checkpoint arriving clears it (or, with another hash, is chain_rewritten); still
-- missing after the grace, it is the chain_skipped record alarm.
CREATE TABLE checkpoint_waits (
    table_id TEXT NOT NULL,
    event_id BIGINT NOT NULL,
    chain TEXT NOT NULL,
    detail TEXT NOT NULL,
    noted_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (table_id, event_id)
);
