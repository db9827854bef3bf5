"""Each table's device history (issue 44): what its shuffler, shoe, RNG box or dice reader is
(make, model, firmware, serial: the table's config, in its signed device messages), one row from
the message that first said so each time it changes: a swap or a firmware update is a row of its
own, so the floor's evidence can be pooled by model and firmware and a finding traced to the
serial that was on the table at the time.

A message read out of order (a replay, a retained state) is compared with the identity before
its own sequence number, so an old message does not make a swap that did not happen."""

from __future__ import annotations

from typing import Any

from controller.messages import DevicePayload
from pit.db import Database

FIELDS = ("make", "model", "firmware", "serial")
#: What a row keeps: the identity and the role the table gives the device (cards, position).
KEPT = (*FIELDS, "role")


class DeviceHistory:
    """Writes ``device_history`` within the ingest's transaction (its ``Database``)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def seen(self, table_id: str, seq: int, at: str, p: DevicePayload) -> bool:
        """A device message stored: a row if its identity differs from the one before it.
        True if it made one (the first identity, or a change)."""
        if p.identity is None:
            return False
        identity = tuple(getattr(p.identity, f) for f in KEPT)
        before = self.db.one(
            "SELECT make, model, firmware, serial, role FROM device_history "
            "WHERE table_id = ? AND device = ? AND first_seq < ? ORDER BY first_seq DESC LIMIT 1",
            (table_id, p.device, seq),
        )
        if before is not None and tuple(before) == identity:
            return False
        self.db.x(
            "INSERT INTO device_history (table_id, device, first_seq, first_seen, make, model, "
            "firmware, serial, role) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (table_id, p.device, seq, at, *identity),
        )
        return True


def history(db: Database, table_id: str) -> list[dict[str, Any]]:
    """A table's devices as they were, oldest first (the page's table detail, the CLI)."""
    rows = db.all(
        "SELECT device, first_seq, first_seen, make, model, firmware, serial, role "
        "FROM device_history "
        "WHERE table_id = ? ORDER BY device, first_seq",
        (table_id,),
    )
    return [
        {"device": r[0], "since_seq": r[1], "since": r[2], **dict(zip(KEPT, r[3:], strict=True))}
        for r in rows
    ]
