"""The journal's SQLite schema and its migrations (version ``n`` to ``n + 1``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

SCHEMA_VERSION = 4


_SCHEMA_1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE rounds (
    round_id  TEXT PRIMARY KEY,
    table_id  TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    opened_at TEXT NOT NULL,
    closed_at TEXT,
    status    TEXT NOT NULL CHECK (status IN ('open', 'settled', 'dead', 'misdeal', 'void')),
    reason    TEXT,
    result    TEXT,
    UNIQUE (table_id, seq)
);
CREATE UNIQUE INDEX rounds_one_open ON rounds (table_id) WHERE status = 'open';
CREATE INDEX rounds_opened ON rounds (table_id, opened_at);
CREATE TABLE events (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    round_id TEXT REFERENCES rounds (round_id),
    at       TEXT NOT NULL,
    kind     TEXT NOT NULL,
    payload  TEXT NOT NULL
);
CREATE INDEX events_round ON events (round_id, id);
CREATE TABLE outbox (
    msg_id          TEXT PRIMARY KEY,
    table_id        TEXT NOT NULL,
    seq             INTEGER NOT NULL,
    topic           TEXT NOT NULL,
    payload         BLOB NOT NULL,
    qos             INTEGER NOT NULL CHECK (qos IN (0, 1, 2)),
    retain          INTEGER NOT NULL CHECK (retain IN (0, 1)),
    created_at      TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_attempt_at TEXT,
    replay          INTEGER NOT NULL DEFAULT 0 CHECK (replay IN (0, 1)),
    round_id        TEXT REFERENCES rounds (round_id),
    UNIQUE (table_id, seq)
);
"""


def _create_schema_1(conn: sqlite3.Connection) -> None:
    for statement in _SCHEMA_1.split(";"):
        if statement.strip():
            conn.execute(statement)


def _events_by_kind(conn: sqlite3.Connection) -> None:
    """Schema 2: events found by kind (the deals seen, read at every start, docs/faults.md)."""
    conn.execute("CREATE INDEX events_kind ON events (kind, id)")


def _event_chain(conn: sqlite3.Connection) -> None:
    """Schema 3: each event's link in the journal's hash chain (docs/audit.md). Events written
    before stay unchained (NULL); the chain starts at the first event after the migration."""
    conn.execute("ALTER TABLE events ADD COLUMN chain TEXT")


def _sent_copies(conn: sqlite3.Connection) -> None:
    """Schema 4: a copy of each message the broker acknowledged, the newest ``SENT_KEPT`` kept,
    so a consumer that lost some downstream of the broker can ask for them again (``resend``,
    docs/mqtt.md §3)."""
    conn.execute(
        "CREATE TABLE sent (table_id TEXT NOT NULL, seq INTEGER NOT NULL, msg_id TEXT NOT NULL, "
        "topic TEXT NOT NULL, payload BLOB NOT NULL, qos INTEGER NOT NULL, "
        "retain INTEGER NOT NULL, created_at TEXT NOT NULL, PRIMARY KEY (table_id, seq))"
    )


Migration = Callable[[sqlite3.Connection], None]

#: Migration from version ``n`` to ``n + 1``, keyed by ``n``; each runs inside the opening
#: transaction, which then records the new version.
MIGRATIONS: dict[int, Migration] = {
    0: _create_schema_1,
    1: _events_by_kind,
    2: _event_chain,
    3: _sent_copies,
}
