-- depends: 0003.checkpoint-waits
-- The gaps still open, found without reading every gap ever filled: the liveness sweep asks
-- the tables for them again every second (a resend command, docs/pit.md §3).
CREATE INDEX missing_open ON missing (reported_at) WHERE filled_at IS NULL;
