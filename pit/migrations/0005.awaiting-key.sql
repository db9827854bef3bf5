-- depends: 0004.open-gaps
-- Issue 39: a message refused only because the key that signed it is not registered (yet) for
-- its table is kept whole here, and judged again when the keys file gains that key, so the
-- casino's copy has no hole where the key was registered late (pit/awaiting.py).
CREATE TABLE awaiting_key (
    id TEXT PRIMARY KEY,
    table_id TEXT NOT NULL,
    key_id TEXT NOT NULL,
    topic TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL,
    retained INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX awaiting_key_by_key ON awaiting_key (table_id, key_id, received_at);
