-- depends: 0005.awaiting-key
-- Issue 40 (F4): rejects aggregated per (table or topic's name, reason) with their count and
-- first and last time; the rejects table then keeps only samples of them (the first ones and
-- one in a hundred after), and both are kept for a retention period (pit/record.py).
CREATE TABLE reject_counts (
    table_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    first_at DOUBLE PRECISION NOT NULL,
    last_at DOUBLE PRECISION NOT NULL,
    count BIGINT NOT NULL,
    PRIMARY KEY (table_id, reason)
);
CREATE INDEX record_alarms_open ON record_alarms (kind, table_id) WHERE acked_at IS NULL;
