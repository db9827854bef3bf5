"""The pit's record checks (``pit.store``'s room for them): rejects and their bursts, each
checkpoint's HMAC, row and live link to the last one held, and the record alarms a person
acknowledges (docs/pit.md §4); the liveness marks (``pit.liveness``)."""

from __future__ import annotations

import collections
import hmac
import time
import uuid
from collections.abc import Mapping

from controller.feed_signature import checkpoint_hmac_bytes, checkpoint_link
from controller.messages import CheckpointPayload
from pit.admission import UNREGISTERED, Dropped
from pit.db import Incoming, Limits, Outcome
from pit.judge import REJECT_BODY, REJECT_REASON, REJECT_TOPIC, Refused, escaped
from pit.keys import FeedKeys
from pit.writes import CHECKPOINTS, WAITS, Batch, TableRow

#: The record alarm of each way a checkpoint does not follow the last one held
#: (``controller.feed_signature.BrokenLink``).
LINK_ALARMS = {
    "rewritten": "chain_rewritten",
    "cut": "chain_cut",
    "backwards": "chain_cut",
    "skipped": "chain_skipped",
}


#: Rejects of one (table, reason) kept whole: the first ones, then one in this many.
REJECT_SAMPLES = 20
REJECT_SAMPLE_EVERY = 100
#: Table names whose latest rejects are held for the burst check at most.
BURST_TABLES = 10_000
#: Open record alarms on names with no registered key, past which one alarm stands for the rest.
UNREGISTERED_ALARMS = 50


class RecordChecks:
    """Rejects, checkpoints and record alarms: a part of the ingest's store (``pit.store``)."""

    def __init__(
        self,
        batch: Batch,
        limits: Limits,
        feed_keys: FeedKeys,
        checkpoint_keys: Mapping[str, bytes] | None = None,
        default_checkpoint_key: bytes | None = None,
        root: str = "",
    ) -> None:
        self.db = batch.db
        self.root = root
        self.batch = batch
        self.limits = limits
        #: the tables' registered feed keys: a table without any has every message refused
        self.feed_keys = feed_keys
        self.checkpoint_keys = dict(checkpoint_keys or {})
        self.default_checkpoint_key = default_checkpoint_key
        #: each table topic's latest rejects' times
        self._bursts: dict[str, collections.deque[float]] = {}

    def reject(self, item: Incoming, reason: str, out: Outcome) -> None:
        """A reject counted under (its topic's table, the reason's first word) with its first
        and last time, and kept whole only as a sample: the first ``REJECT_SAMPLES`` of each,
        then one in ``REJECT_SAMPLE_EVERY`` (issue 40: a flood once wrote a row of up to 16 KB
        for each)."""
        name = self.topic(item.topic)[0]
        # A name the keys file does not register is anybody's to make up: such rejects are
        # counted together, so a flood of names cannot grow the tables (issue 40, F4).
        registered = self.feed_keys.for_table(name) is not None
        table = escaped(name, 64) if registered else UNREGISTERED
        reason = escaped(reason, REJECT_REASON)
        kind = reason.split(":", 1)[0][:64]
        now = item.received_at
        row = self.db.one(
            "INSERT INTO reject_counts (table_id, reason, first_at, last_at, count) "
            "VALUES (?, ?, ?, ?, 1) ON CONFLICT (table_id, reason) DO UPDATE SET "
            "count = reject_counts.count + 1, last_at = excluded.last_at RETURNING count",
            (table, kind, now, now),
        )
        count = int(row[0]) if row else 1
        if count <= REJECT_SAMPLES or count % REJECT_SAMPLE_EVERY == 0:
            self.db.x(
                "INSERT INTO rejects (id, topic, received_at, reason, body, table_id) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (
                    uuid.uuid4().hex,
                    escaped(item.topic, REJECT_TOPIC),
                    now,
                    reason,
                    escaped(item.payload, REJECT_BODY),
                    table,
                ),
            )
        out.rejected += 1
        out.rejects.append((table, reason))
        self._burst_times(table, now)

    def _burst_times(self, table: str, now: float) -> None:
        """The times of a table topic's latest rejects (``reject_burst`` of them), in memory:
        its burst is judged from these, not by counting the rows, which are now samples."""
        times = self._bursts.get(table)
        if times is None:
            if len(self._bursts) >= BURST_TABLES:  # a flood of names: forget the oldest
                for old in list(self._bursts)[: BURST_TABLES // 2]:
                    del self._bursts[old]
            times = self._bursts[table] = collections.deque(maxlen=self.limits.reject_burst)
        times.append(now)

    def reject_bursts(self, out: Outcome, now: float) -> None:
        """A table whose topic carried ``reject_burst`` rejects within the window: an alarm."""
        limits = self.limits
        for table in sorted({t for t, _ in out.rejects}):
            times = self._bursts.get(table)
            if times is None or len(times) < limits.reject_burst:
                continue
            if times[-1] - times[0] <= limits.reject_window:
                self.record_alarm(
                    table,
                    "reject_burst",
                    f"{len(times)} messages on its topic refused within {limits.reject_window:g} s",
                    now,
                    out,
                )

    def topic(self, topic: str) -> tuple[str, str]:
        """The table a topic names and the rest of it (``round``, ``cmd/…``)."""
        table, _, kind = topic.removeprefix(self.root).partition("/")
        return table, kind

    def signature_alarm(
        self, item: Incoming, topic_table: str, kind: str, exc: Refused, out: Outcome
    ) -> None:
        """A record alarm on the table of the topic. A registered table gets its row (its
        tile shows the alarm even before its first good message); an unregistered name does
        not (anyone may publish under any name: the alarm is in the log and in
        ``record_alarms``, not a tile)."""
        assert exc.kind is not None
        table = escaped(topic_table, 64)
        if self.feed_keys.for_table(topic_table) is not None:
            self.batch.ensure_table(topic_table, item.topic[: len(item.topic) - len(kind)],
                               item.received_at)  # fmt: skip
        elif self._unregistered_alarms(exc.kind) >= UNREGISTERED_ALARMS:
            # A flood of made-up names (issue 40, F4): past the bound, one alarm says so.
            table = UNREGISTERED
        self.record_alarm(table, exc.kind, exc.reason, item.received_at, out)

    def dropped(self, dropped: Mapping[str, Dropped], out: Outcome) -> None:
        """What admission dropped over its tables' budgets: counted (reason ``flood``) and one
        ``flood`` record alarm a table while it lasts (``pit.admission``)."""
        for table, d in dropped.items():
            self.db.x(
                "INSERT INTO reject_counts (table_id, reason, first_at, last_at, count) "
                "VALUES (?, 'flood', ?, ?, ?) ON CONFLICT (table_id, reason) DO UPDATE SET "
                "count = reject_counts.count + excluded.count, last_at = excluded.last_at",
                (table, d.first, d.last, d.count),
            )
            out.dropped += d.count
            self.record_alarm(
                table,
                "flood",
                f"{d.count} messages ({d.bytes} bytes) on its topics over its budget from "
                f"{time.strftime('%H:%M:%S', time.gmtime(d.first))} UTC: dropped unread "
                "(a genuine one is asked again by resend); its broker account may be misused",
                d.last,
                out,
            )

    def _unregistered_alarms(self, kind: str) -> int:
        """Open record alarms of ``kind`` on names the keys file does not register."""
        rows = self.db.all(
            "SELECT table_id FROM record_alarms WHERE kind = ? AND acked_at IS NULL LIMIT ?",
            (kind, UNREGISTERED_ALARMS + 64),
        )
        return sum(1 for (t,) in rows if self.feed_keys.for_table(str(t)) is None)

    def expire(self, now: float, days: float) -> int:
        """Rejects, their counts and acknowledged record alarms older than ``days``: removed
        (the retention of issue 40, F4); returns how many rows went."""
        before = now - days * 86_400
        gone = 0
        for sql in (
            "DELETE FROM rejects WHERE received_at < ?",
            "DELETE FROM reject_counts WHERE last_at < ?",
            "DELETE FROM record_alarms WHERE acked_at IS NOT NULL AND acked_at < ?",
        ):
            gone += int(self.db.x(sql, (before,)).rowcount or 0)
        return gone

    def checkpoint_key(self, table_id: str) -> bytes | None:
        return self.checkpoint_keys.get(table_id, self.default_checkpoint_key)

    def checkpoint(
        self, table_id: str, msg_id: str, p: CheckpointPayload, row: TableRow, now: float,
        out: Outcome,
    ) -> None:  # fmt: skip
        """A checkpoint kept, its HMAC checked, its row compared with the copy's, and its link
        to the last checkpoint held checked live (``checkpoint_link``)."""
        body = p.model_dump()
        signature = self._checkpoint_signature(table_id, p, body)
        state = self.batch.state
        state.add(CHECKPOINTS, (table_id, p.event_id, p.chain, p.made_at, msg_id, signature))
        held = state.checkpoints.setdefault((table_id, p.event_id), [])
        if all(chain != p.chain for chain, _, _ in held):  # ON CONFLICT … DO NOTHING
            held.append((p.chain, p.made_at, signature))
        if signature == "forged":
            self.record_alarm(
                table_id,
                "checkpoint_forged",
                f"the checkpoint at row {p.event_id} ({p.made_at}) is not signed with the "
                "table's checkpoint key",
                now,
                out,
            )
            return
        self._rewritten_row(table_id, p, now, out)
        self._awaited(table_id, p, now, out)
        head, made = row.chain_event_id, row.chain_made_at
        if head is not None and made is not None and (p.made_at, p.event_id) <= (made, head):
            # An older checkpoint arriving late (a replay): its row was compared above.
            if p.event_id > head:
                self.record_alarm(
                    table_id,
                    "chain_cut",
                    f"a checkpoint of {p.made_at} reached row {p.event_id}, a later one ({made}) "
                    f"only row {head}: the table's tail went missing",
                    now,
                    out,
                )
            return
        last = None if head is None else {"event_id": head, "chain": row.chain_hash}
        broken = checkpoint_link(last, body)
        if broken is not None and broken.kind == "skipped" and self._wait(table_id, p, now):
            broken = None  # given the gaps' grace (a pit of a shared group)
        if broken is not None:
            self.record_alarm(
                table_id,
                LINK_ALARMS[broken.kind],
                f"the checkpoint at row {p.event_id} ({p.made_at}): {broken.detail}",
                now,
                out,
            )
        state.set(table_id, chain_event_id=p.event_id, chain_hash=p.chain, chain_made_at=p.made_at)
        self.batch.row_changed(
            table_id, chain_event_id=p.event_id, chain_hash=p.chain, chain_made_at=p.made_at
        )

    def _wait(self, table_id: str, p: CheckpointPayload, now: float) -> bool:
        """With a grace (``Limits.checkpoint_grace``) the pit notes the checkpoint this one
        names and does not hold, instead of ``chain_skipped`` at once: the other pit of a group
        may hold it in its batch, or a resend bring it (:meth:`_awaited`,
        :meth:`waits_expired`)."""
        if not self.limits.checkpoint_grace or p.prev_event_id is None or p.prev_chain is None:
            return False
        key = (table_id, p.prev_event_id)
        detail = (
            f"the checkpoint at row {p.event_id} ({p.made_at}): it follows a checkpoint at row "
            f"{p.prev_event_id} that is not held (waited {self.limits.checkpoint_grace:g} s)"
        )
        if key not in self.batch.state.waits:
            self.batch.state.waits[key] = (p.prev_chain, detail, now)
            self.batch.state.add(WAITS, (table_id, p.prev_event_id, p.prev_chain, detail, now))
        return True

    def _awaited(self, table_id: str, p: CheckpointPayload, now: float, out: Outcome) -> None:
        """A checkpoint a later one named (:meth:`_wait`): the wait ends; with another hash
        than the later one named for its row, the journal was rewritten."""
        key = (table_id, p.event_id)
        wait = self.batch.state.waits.pop(key, None)
        if wait is None:
            return
        self.batch.state.cleared.add(key)
        if wait[0] != p.chain:
            self.record_alarm(
                table_id,
                "chain_rewritten",
                f"row {p.event_id} of the table's chain was {wait[0][:12]}… in the checkpoint "
                f"after it and is {p.chain[:12]}… at {p.made_at}: the journal was rewritten",
                now,
                out,
            )

    def waits_expired(self, now: float, out: Outcome) -> None:
        """The batch's tables' waits older than the grace: each a ``chain_skipped``."""
        grace = self.limits.checkpoint_grace
        state = self.batch.state
        for key, (_, detail, noted) in sorted(state.waits.items()):
            if noted < now - grace:
                del state.waits[key]
                state.cleared.add(key)
                self.record_alarm(key[0], "chain_skipped", detail, now, out)

    def _checkpoint_signature(
        self, table_id: str, p: CheckpointPayload, body: dict[str, object]
    ) -> str:
        """``valid``, ``forged`` (another key, or another table's), or ``unchecked`` (no
        checkpoint key configured): the HMAC over ``checkpoint_hmac_bytes``, the link to the
        previous checkpoint included when it names one."""
        if p.table_id != table_id:
            return "forged"
        key = self.checkpoint_key(table_id)
        if key is None:
            return "unchecked"
        expected = hmac.new(key, checkpoint_hmac_bytes(body), "sha256").hexdigest()
        return "valid" if hmac.compare_digest(expected, p.hmac) else "forged"

    def _rewritten_row(self, table_id: str, p: CheckpointPayload, now: float, out: Outcome) -> None:
        """A row checkpointed before with another hash: the journal was rewritten up to it
        (the checkpoints held at the row: read up front, and the batch's own)."""
        held = self.batch.state.checkpoints.get((table_id, p.event_id), [])
        other = next(((c, m) for c, m, sig in held if c != p.chain and sig != "forged"), None)
        if other is not None:
            self.record_alarm(
                table_id,
                "chain_rewritten",
                f"row {p.event_id} of the table's chain was {other[0][:12]}… at {other[1]} and "
                f"is {p.chain[:12]}… at {p.made_at}: the journal was rewritten",
                now,
                out,
            )

    def record_alarm(self, table_id: str, kind: str, detail: str, now: float, out: Outcome) -> None:
        """A finding about a table's record; one open alarm per table and kind."""
        open_ = self.db.one(
            "SELECT id FROM record_alarms WHERE table_id = ? AND kind = ? AND acked_at IS NULL",
            (table_id, kind),
        )
        if open_ is not None:
            return
        alarm = {
            "id": f"{table_id}:{kind}:{uuid.uuid4().hex[:12]}",
            "table_id": table_id,
            "kind": kind,
            "detail": detail,
            "raised_at": now,
        }
        self.db.x(
            "INSERT INTO record_alarms (id, table_id, kind, detail, raised_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (alarm["id"], table_id, kind, detail, now),
        )
        out.alarms.append(alarm)

    def quiet_tables(self, before: float) -> list[tuple[str, str, float | None, float | None]]:
        """Tables not offline and not heard since ``before``: id, topic prefix, last heard,
        silent since."""
        return [
            (r[0], r[1], r[2], r[3])
            for r in self.db.all(
                "SELECT table_id, topic_prefix, last_heard, silent_since FROM tables "
                "WHERE (state IS NULL OR state <> 'offline') "
                "AND (last_heard IS NULL OR last_heard < ?) ORDER BY table_id",
                (before,),
            )
        ]

    def open_gaps(self, before: float, limit: int = 20_000) -> list[tuple[str, str, int]]:
        """Seqs reported missing before ``before`` and not filled: table id, topic prefix, seq,
        by table and seq (at most ``limit``)."""
        return [
            (r[0], r[1], int(r[2]))
            for r in self.db.all(
                "SELECT m.table_id, t.topic_prefix, m.seq FROM missing m JOIN tables t "
                "ON t.table_id = m.table_id WHERE m.filled_at IS NULL AND m.reported_at < ? "
                "ORDER BY m.table_id, m.seq LIMIT ?",
                (before, limit),
            )
        ]

    def mark_silent(self, table_id: str, now: float, heard: float | None, out: Outcome) -> None:
        """The table is silent (its tile says so) with a ``table_silent`` record alarm."""
        self.db.x(
            "UPDATE tables SET silent_since = ? WHERE table_id = ? AND silent_since IS NULL",
            (now, table_id),
        )
        ago = f"{now - heard:.0f} s ago" if heard is not None else "never"
        self.record_alarm(
            table_id,
            "table_silent",
            f"last heard {ago}; no last will (offline) and no answer to a status request",
            now,
            out,
        )
        out.tables.add(table_id)
