-- depends: 0007.device-history
-- Issue 44: game protection pooled across the floor (pit/floorwatch.py, pit/pooling.py).
-- Each device's role (cards: the shuffler or shoe; position: the RNG box or dice reader) says
-- which tests its pool runs. Every round the ingest stores from now on waits (it writes
-- pooled = 0) until the floor's watch has taken it; rounds stored before are not pooled (their
-- devices were not known): the default, so adding the column rewrites no row of a big table.
ALTER TABLE device_history ADD COLUMN role TEXT;
ALTER TABLE rounds ADD COLUMN pooled INTEGER NOT NULL DEFAULT 1;
CREATE INDEX rounds_unpooled ON rounds (table_id) WHERE pooled = 0;
-- The floor's watch: its whole state (every pool's CUSUMs, each table's earlier deals, the
-- rounds kept for attribution), saved in the transaction that takes rounds or raises a finding,
-- so a restart carries on without counting a round twice or raising an alarm twice; and its
-- view for the page.
CREATE TABLE floor_protection (
    id INTEGER PRIMARY KEY,
    generation BIGINT NOT NULL,
    saved_at DOUBLE PRECISION NOT NULL,
    state TEXT NOT NULL,
    view TEXT NOT NULL
);
-- Each pooled finding: its record alarm (acknowledged with badge + PIN like any; one open alarm
-- a pool, which the pool's later findings join), the pool and test an acknowledgement restarts,
-- and the finding with its attribution for the page.
CREATE TABLE pooled_findings (
    alarm_id TEXT NOT NULL,
    pool_id TEXT NOT NULL,
    test TEXT NOT NULL,
    raised_at DOUBLE PRECISION NOT NULL,
    body TEXT NOT NULL,
    reset_done INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (alarm_id, test)
);
CREATE INDEX pooled_findings_by_pool ON pooled_findings (pool_id);
