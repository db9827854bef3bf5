"""The pit: the casino's side of the tables' feed (issue 25, docs/pit.md).

A second service (``paigow-table pit run --config pit.toml``), fed only by the tables' MQTT feed
and the signed commands it sends them, never a table's journal file:

- ``pit.ingest``: every message of every table of the site, stored once (by ``msg_id``), gaps in
  a table's ``seq`` reported at once and marked filled when the messages arrive; acknowledged to
  the broker only after the database committed them (persistent session, QoS 1).
- ``pit.store``: the database (SQLite by default, PostgreSQL with a DSN), migrated by yoyo, and
  the casino's copy of the record: checkpoints checked, chain heads, rewritten or cut chains.
- ``pit.web``: the pit page (a tile per table, live over server-sent events).
- ``pit.shift``: the shift's numbers, CSV, the signed end-of-shift report.
"""
