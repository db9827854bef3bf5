"""Whether each table is still there (issue 30): a crashed or silent table shows as such within
seconds.

A table publishes only when something changes (a round, a device, its status on connect), so a
quiet table and a dead one look alike from the feed. The broker publishes a table's last will
(``offline``) when its connection dies — at once for a killed process, after 1.5 × its keepalive
for a cut link — and the store applies it by arrival (its claimed time and seq are those of the
connect, older than the ``online`` after it). For the case where no will comes (a broker that
lost the table's session, a will the ACL refused, a link that hangs between broker and pit),
the pit asks: a table heard nothing from for ``probe_after`` s is sent a ``status_request``
(read-only; signed with the pit's command key when it has one, which a table with
``unsigned_read_only = false`` requires), which a live table answers by publishing its status.
A table (not offline) still unheard after ``silent_after`` s is marked silent — its tile says
so — with a ``table_silent`` record alarm; the next message from it clears the mark. Silence is
counted from the pit's own connect at the earliest: the pit's own outage is not the tables'.

What it does not protect against: a table that answers but deals nothing (that is a table, not
a silence), or someone answering in its name (until messages are signed).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pit.config import LivenessConfig

if TYPE_CHECKING:
    from pit.store import Outcome, Store


@dataclass
class Liveness:
    """The sweep's settings and what it has asked of whom (in memory: a restart asks again)."""

    config: LivenessConfig
    command_key: bytes | None = None
    key_id: str = "pit"
    probed: dict[str, float] = field(default_factory=dict)
    probes_sent: int = 0

    @property
    def enabled(self) -> bool:
        return self.config.probe_after > 0

    def sweep(
        self, store: Store, now: float, since: float
    ) -> tuple[list[tuple[str, bytes]], Outcome]:
        """The probes to publish now (topic, payload) and what changed (tables marked silent,
        their record alarms), committed."""
        from pit.store import Outcome

        out = Outcome()
        probes: list[tuple[str, bytes]] = []
        quiet_since = now - min(self.config.probe_after, self.config.silent_after)
        with store.transaction():
            for table_id, prefix, heard, silent in store.quiet_tables(quiet_since):
                heard_at = max(heard or 0.0, since)
                if silent is None and now - heard_at >= self.config.silent_after:
                    store.mark_silent(table_id, now, heard, out)
                if now - max(heard_at, self.probed.get(table_id, 0.0)) >= self.config.probe_after:
                    self.probed[table_id] = now
                    probes.append((f"{prefix}cmd/status_request", self.probe(table_id, now)))
        self.probes_sent += len(probes)
        return probes, out

    def probe(self, table_id: str, now: float) -> bytes:
        """A ``status_request`` for ``table_id``: signed when the pit has a command key."""
        if self.command_key is None:
            return b"{}"
        from controller.mqtt.signing import sign

        fields = {"request_id": f"pit-probe-{uuid.uuid4().hex[:16]}"}
        signed = sign(
            self.command_key, self.key_id, "status_request", fields,
            datetime.fromtimestamp(now, UTC), table_id=table_id,
        )  # fmt: skip
        return json.dumps(signed, separators=(",", ":")).encode()
