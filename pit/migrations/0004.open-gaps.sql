-- depends: 0003.checkpoint-waits
-- The gaps still open, found without reading every gap ever filled: each batch reads its
-- tables' open gaps once (a message that fills one), and the liveness sweep asks the tables
-- for those open too long again every second (a resend command, docs/pit.md §4b′).
CREATE INDEX missing_open ON missing (table_id, seq) WHERE filled_at IS NULL;
