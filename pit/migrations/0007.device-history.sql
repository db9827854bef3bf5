-- depends: 0006.rejects-bounded
-- Issue 44: what each table's devices are (make, model, firmware, serial from the table's
-- config, in its signed device messages): one row each time a device's identity changes (a swap,
-- a firmware update), from the message that first carried it (pit/devices.py).
CREATE TABLE device_history (
    table_id TEXT NOT NULL,
    device TEXT NOT NULL,
    first_seq BIGINT NOT NULL,
    first_seen TEXT NOT NULL,
    make TEXT,
    model TEXT,
    firmware TEXT,
    serial TEXT,
    PRIMARY KEY (table_id, device, first_seq)
);
