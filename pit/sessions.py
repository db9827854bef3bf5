"""What the page writes: its login sessions, the commands it sent, the record-level alarms a
supervisor acknowledged. On the page's own connection (``pit.pagedb``), never the ingest's."""

from __future__ import annotations

import time

from pit.db import Database


class Sessions:
    def __init__(self, db: Database) -> None:
        self.db = db

    def session_add(self, id_hash: str, tag: str, now: float, expires: float) -> None:
        with self.db.transaction():
            self.db.x(
                "INSERT INTO web_sessions (id_hash, token_tag, created_at, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (id_hash, tag, now, expires),
            )

    def session_expires(self, id_hash: str, tag: str, now: float) -> float | None:
        """When a live session (not revoked, not expired, made under ``tag``) ends, or None."""
        row = self.db.one(
            "SELECT expires_at FROM web_sessions WHERE id_hash = ? AND token_tag = ? "
            "AND revoked_at IS NULL AND expires_at > ?",
            (id_hash, tag, now),
        )
        return float(row[0]) if row is not None else None

    def session_revoke(self, id_hash: str, now: float) -> bool:
        with self.db.transaction():
            done = self.db.x(
                "UPDATE web_sessions SET revoked_at = ? WHERE id_hash = ? AND revoked_at IS NULL",
                (now, id_hash),
            ).rowcount
            self.db.x("DELETE FROM web_sessions WHERE expires_at < ?", (now - 86_400,))
        return bool(done)

    def note_command(self, request_id: str, table_id: str, kind: str, by: str, body: str) -> None:
        with self.db.transaction():
            self.db.x(
                "INSERT INTO commands (request_id, table_id, kind, by_name, body, sent_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (request_id, table_id, kind, by, body, time.time()),
            )

    def acknowledge_record_alarm(self, alarm_id: str, by: str) -> bool:
        with self.db.transaction():
            done = self.db.x(
                "UPDATE record_alarms SET acked_by = ?, acked_at = ? WHERE id = ? "
                "AND acked_at IS NULL",
                (by, time.time(), alarm_id),
            ).rowcount
        return bool(done)
