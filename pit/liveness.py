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

The same sweep asks for what the pit lost (issue 31): a seq still missing ``resend_after`` s
after it was reported (``missing``) — not a message in the other pit's batch or in the table's
outbox, which arrive within that — is asked of its table with a ``resend`` command (ranges of
at most 1,000 seqs, signed like the probe), again every 2 × ``resend_after`` while it stays
missing, at most ``RESEND_COMMANDS`` commands a sweep. The table publishes its kept copies again
(docs/mqtt.md §3) and the gap fills like any other. So a message the broker lost after taking
it (Mosquitto's shared subscriptions at a restart, a pit session that expired) still reaches
the database once.

What it does not protect against: a table that answers but deals nothing (that is a table, not
a silence), someone answering in its name (until messages are signed), a table that no longer
keeps the seq (its newest 20,000 messages) or is gone.
"""

from __future__ import annotations

import json
import logging
import math
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from controller.messages import RESEND_MAX
from pit.config import LivenessConfig

if TYPE_CHECKING:
    from pit.store import Outcome, Store

log = logging.getLogger("pit.liveness")


@dataclass
class Liveness:
    """The sweep's settings and what it has asked of whom (in memory: a restart asks again)."""

    config: LivenessConfig
    command_key: bytes | None = None
    key_id: str = "pit"
    probed: dict[str, float] = field(default_factory=dict)
    probes_sent: int = 0
    asked: dict[str, float] = field(default_factory=dict)  # table: when its gaps were asked for
    resends_sent: int = 0
    expired_at: float = 0.0  # when the sweep last removed what outlived its retention

    @property
    def enabled(self) -> bool:
        return self.config.probe_after > 0

    def sweep(
        self, store: Store, now: float, since: float, behind: float = 0.0
    ) -> tuple[list[tuple[str, bytes]], Outcome]:
        """The probes to publish now (topic, payload) and what changed (tables marked silent,
        their record alarms), committed. While the pit itself is ``behind`` (seconds), no
        table is called silent: its messages may be among those the pit has not stored yet
        (issue 40; the page says the pit is behind instead)."""
        from pit.store import Outcome

        out = Outcome()
        probes: list[tuple[str, bytes]] = []
        quiet_since = now - min(self.config.probe_after, self.config.silent_after)
        with store.db.transaction():
            for table_id, prefix, heard, silent in store.record.quiet_tables(quiet_since):
                heard_at = max(heard or 0.0, since)
                if silent is None and not behind and now - heard_at >= self.config.silent_after:
                    store.record.mark_silent(table_id, now, heard, out)
                if now - max(heard_at, self.probed.get(table_id, 0.0)) >= self.config.probe_after:
                    self.probed[table_id] = now
                    probes.append((f"{prefix}cmd/status_request", self.probe(table_id, now)))
        self.probes_sent += len(probes)
        if now - self.expired_at >= EXPIRE_EVERY:  # rejects and old findings: kept N days
            self.expired_at = now
            with store.db.transaction():
                store.record.expire(now, store.limits.retention_days)
        resends = self.resends(store, now)
        self.resends_sent += len(resends)
        return probes + resends, out

    def resends(self, store: Store, now: float) -> list[tuple[str, bytes]]:
        """``resend`` commands for the gaps open longer than ``resend_after`` (module text)."""
        after = self.config.resend_after
        if after <= 0:
            return []
        commands: list[tuple[str, bytes]] = []
        by_table: dict[str, tuple[str, list[int]]] = {}
        for table_id, prefix, seq in store.record.open_gaps(now - after):
            by_table.setdefault(table_id, (prefix, []))[1].append(seq)
        for table_id, (prefix, seqs) in by_table.items():
            if len(commands) >= RESEND_COMMANDS:
                break
            if now - self.asked.get(table_id, -math.inf) < 2 * after:
                continue
            self.asked[table_id] = now
            # A gap is news only once it outlives its grace (most fill within milliseconds).
            log.warning(
                "pit_gap table=%s seqs=%s open over %g s: resend asked",
                table_id, _shown(seqs), after,
            )  # fmt: skip
            for first, last in seq_ranges(seqs, RESEND_MAX):
                fields = {"from_seq": first, "to_seq": last}
                commands.append(
                    (f"{prefix}cmd/resend", self.command("resend", table_id, now, fields))
                )
        return commands

    def probe(self, table_id: str, now: float) -> bytes:
        """A ``status_request`` for ``table_id``: signed when the pit has a command key."""
        return self.command("status_request", table_id, now, {})

    def command(self, kind: str, table_id: str, now: float, fields: dict[str, int]) -> bytes:
        """A command's body for ``table_id``: signed when the pit has a command key."""
        if self.command_key is None:
            return json.dumps(fields, separators=(",", ":")).encode()
        from controller.mqtt.signing import sign

        body = {**fields, "request_id": f"pit-{kind}-{uuid.uuid4().hex[:16]}"}
        signed = sign(
            self.command_key, self.key_id, kind, body, datetime.fromtimestamp(now, UTC),
            table_id=table_id,
        )  # fmt: skip
        return json.dumps(signed, separators=(",", ":")).encode()


#: How often (seconds) the sweep removes rejects and findings past ``[record] retention_days``.
EXPIRE_EVERY = 3600.0

#: ``resend`` commands a sweep sends at most (a flood of gaps is asked for over several sweeps).
RESEND_COMMANDS = 50


def _shown(seqs: list[int]) -> str:
    runs = seq_ranges(sorted(seqs), 10**9)
    text = ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs[:10])
    return text + (f",… ({len(runs)} runs)" if len(runs) > 10 else "")


def seq_ranges(seqs: list[int], longest: int) -> list[tuple[int, int]]:
    """Sorted ``seqs`` as inclusive ranges of consecutive seqs, none longer than ``longest``."""
    ranges: list[tuple[int, int]] = []
    for seq in seqs:
        if ranges and seq == ranges[-1][1] + 1 and seq - ranges[-1][0] < longest:
            ranges[-1] = (ranges[-1][0], seq)
        else:
            ranges.append((seq, seq))
    return ranges
