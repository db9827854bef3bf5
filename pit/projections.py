"""Each table's seq bookkeeping (read once a batch, locked in table order, written once a batch)
and the projections of its messages: status, rounds, players, alarms, protection, checkpoints,
each keyed by the table (``pit.store``'s room for them)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from controller.messages import (
    AlarmAckPayload,
    AlarmPayload,
    CheckpointPayload,
    PlayerPayload,
    ProtectionPayload,
    RoundPayload,
    StatusPayload,
)
from pit.db import Incoming, Outcome, Shifts
from pit.devices import DeviceHistory
from pit.judge import Message
from pit.record import RecordChecks
from pit.writes import ALARMS, MISSING, PLAYERS, ROUNDS, ROW_COLUMNS, TableRow

#: Missing seqs reported one by one up to this many per jump (a larger jump is one finding).
MAX_MISSING = 10_000

#: Theoretical hold of each side wager by paytable (docs/math.md): the house edge.
THEORETICAL = {
    ("chan_chu", "PT1"): 0.043461,
    ("chan_chu", "PT2"): 0.058447,
    ("chan_chu", "PT3"): 0.080008,
    ("chan_chu", "PT4"): 0.077656,
    ("chan_chu", "PT5"): 0.084900,
    ("jacks_beat", "B"): 0.088401,
}


class Projections:
    """Seq bookkeeping and projections: a part of the ingest's store (``pit.store``), beside
    its record checks."""

    def __init__(self, record: RecordChecks, shifts: Shifts) -> None:
        self.record = record
        self.batch = record.batch
        self.db = record.db
        self.feed_keys = record.feed_keys
        self.limits = record.limits
        self.shifts = shifts
        self.devices = DeviceHistory(self.db)

    def new_tables(self, batch: Sequence[Incoming]) -> None:
        """Rows for the batch's registered tables the pit has not met yet, made in one
        statement in table-id order and committed before the batch's own transaction: a
        batch that holds some tables' rows never waits for a row another pit is making, so
        two pits sharing a database cannot deadlock on them."""
        prefixes: dict[str, str] = {}
        for item in batch:
            table, kind = self.record.topic(item.topic)
            if table in self.batch.known or table in prefixes:
                continue
            if self.feed_keys.for_table(table) is not None:
                prefixes[table] = item.topic[: len(item.topic) - len(kind)] if kind else item.topic
        if not prefixes:
            return
        names = sorted(prefixes)
        now = batch[-1].received_at
        sql = "INSERT INTO tables (table_id, topic_prefix, updated_at) "
        with self.db.transaction():
            if self.db.kind == "postgresql":
                self.db.x(sql + "SELECT * FROM unnest(?::text[], ?::text[], ?::float8[]) "
                       "ON CONFLICT (table_id) DO NOTHING",
                       ([*names], [prefixes[t] for t in names], [now] * len(names)))  # fmt: skip
            else:
                self.db.xmany(sql + "VALUES (?, ?, ?) ON CONFLICT (table_id) DO NOTHING",
                           [(t, prefixes[t], now) for t in names])  # fmt: skip
        self.batch.known.update(names)

    def lock_rows(self, batch: Sequence[Incoming]) -> None:
        """The rows of the batch's registered tables, read in one statement and locked
        (PostgreSQL) in table order, so two pits sharing a database never deadlock on them."""
        wanted = {self.record.topic(item.topic)[0] for item in batch}
        names = sorted(t for t in wanted if self.feed_keys.for_table(t) is not None)
        if not names:
            return
        lock = " FOR UPDATE" if self.db.kind == "postgresql" else ""
        rows = self._any(f"SELECT table_id, {ROW_COLUMNS} FROM tables", "table_id", names,
                         f" ORDER BY table_id{lock}")  # fmt: skip
        state = self.batch.state
        for table_id, *values in rows:
            state.rows[table_id] = state.rows_read[table_id] = TableRow(*values)
            self.batch.known.add(table_id)

    def _any(
        self, sql: str, column: str, values: Iterable[Any], tail: str = ""
    ) -> list[tuple[Any, ...]]:
        """``sql WHERE column IN values tail`` in one statement (none for no values)."""
        wanted = list(values)
        if not wanted:
            return []
        among, params = self.db.among(f" WHERE {column}", wanted)
        return self.db.all(f"{sql}{among}{tail}", params)

    def prefetch(self, messages: Sequence[Message]) -> None:
        """What the batch's messages need of the database, read once a batch, after the
        locks: which msg_ids are stored, which tables have the rounds and alarms they name,
        and the checkpoints held at the rows they checkpoint."""
        state = self.batch.state
        state.stored_ids = {r[0] for r in self._any(
            "SELECT msg_id FROM messages", "msg_id", {m.msg_id for m in messages})}  # fmt: skip
        rounds: set[str] = set()
        alarms: set[str] = set()
        marks: set[tuple[str, int]] = set()
        for m in messages:
            p = m.payload
            if isinstance(p, RoundPayload | PlayerPayload):
                rounds.add(p.round_id)
            elif isinstance(p, AlarmPayload | AlarmAckPayload) and p.alarm_id:
                alarms.add(p.alarm_id)
            elif isinstance(p, CheckpointPayload):
                marks.add((m.table_id, p.event_id))
        for rid, tid in self._any("SELECT round_id, table_id FROM rounds", "round_id", rounds):
            state.round_tables.setdefault(rid, set()).add(tid)
        for aid, tid in self._any("SELECT alarm_id, table_id FROM alarms", "alarm_id", alarms):
            state.alarm_tables.setdefault(aid, set()).add(tid)
        state.open_gaps = {(tid, seq) for tid, seq in self._any(
            "SELECT table_id, seq FROM missing", "table_id", sorted(state.rows),
            " AND filled_at IS NULL")}  # fmt: skip
        self._prefetch_checkpoints(marks)

    def _prefetch_checkpoints(self, marks: set[tuple[str, int]]) -> None:
        """The checkpoints held at the rows the batch checkpoints, and (a pit of a shared
        group) the batch's tables' waits (``pit.record``)."""
        state = self.batch.state
        if self.limits.checkpoint_grace:
            for tid, row, chain, detail, noted in self._any(
                "SELECT table_id, event_id, chain, detail, noted_at FROM checkpoint_waits",
                "table_id", sorted(state.rows),
            ):  # fmt: skip
                state.waits[tid, row] = (chain, detail, noted)
        rows = self._pairs(
            "SELECT table_id, event_id, chain, made_at, signature FROM checkpoints",
            "event_id", sorted(marks),
        )  # fmt: skip
        for tid, row, chain, made, sig in rows:
            state.checkpoints.setdefault((tid, row), []).append((chain, made, sig))

    def _pairs(
        self, sql: str, column: str, pairs: list[tuple[str, int]], tail: str = ""
    ) -> list[tuple[Any, ...]]:
        """``sql WHERE (table_id, column) IN pairs tail`` in one statement (none for none):
        the pairs themselves, as every table is at similar rows and seqs."""
        if not pairs:
            return []
        where = f" WHERE (table_id, {column}) IN "
        if self.db.kind == "postgresql":
            return self.db.all(
                sql + where + "(SELECT * FROM unnest(%b::text[], %b::bigint[]))" + tail,
                ([t for t, _ in pairs], [n for _, n in pairs]),
            )
        rows: list[tuple[Any, ...]] = []
        for at in range(0, len(pairs), 10_000):  # SQLite's bound on a statement's parameters
            chunk = pairs[at : at + 10_000]
            values = ", ".join("(?, ?)" for _ in chunk)
            rows += self.db.all(f"{sql}{where}(VALUES {values}){tail}",
                             [v for pair in chunk for v in pair])  # fmt: skip
        return rows

    def unreport_stored(self, out: Outcome) -> None:
        """The gaps the batch reported above a table's copy, checked at once against what is
        stored: a retained message stored before the copy began may lie there (its copy would
        come as a duplicate and never fill it). Those are no gap after all."""
        state = self.batch.state
        if not state.unchecked:
            return
        pairs, state.unchecked = sorted(state.unchecked), set()
        stored = {(t, s) for t, s in self._pairs(
            "SELECT table_id, seq FROM messages", "seq", pairs, " AND sequenced = 1")}  # fmt: skip
        if not stored:
            return
        state.open_gaps -= stored
        rows = state.inserts.get(MISSING.table, [])
        state.inserts[MISSING.table] = [r for r in rows if (r[0], r[1]) not in stored]
        state.fills = [f for f in state.fills if (f[0], f[1]) not in stored]
        out.gaps_reported = [g for g in out.gaps_reported if g not in stored]
        out.gaps_filled = [g for g in out.gaps_filled if g not in stored]

    def table_row(self, table_id: str, prefix: str, now: float) -> TableRow:
        """The table's bookkeeping row as the batch left it; read (made when new, locked on
        PostgreSQL) when the batch has not read it yet."""
        state = self.batch.state
        cached = state.rows.get(table_id)
        if cached is not None:
            return cached
        self.batch.ensure_table(table_id, prefix, now)
        lock = " FOR UPDATE" if self.db.kind == "postgresql" else ""
        row = self.db.one(f"SELECT {ROW_COLUMNS} FROM tables WHERE table_id = ?{lock}", (table_id,))
        assert row is not None
        state.rows[table_id] = state.rows_read[table_id] = TableRow(*row)
        return state.rows[table_id]

    def write_seqs(self, now: float) -> None:
        """Each table's first and highest seq, once a batch (not once a message)."""
        state = self.batch.state
        for table_id in sorted(state.rows):
            row, read = state.rows[table_id], state.rows_read.get(table_id)
            if read is None or (row.first_seq, row.high_seq) != (read.first_seq, read.high_seq):
                state.set(table_id, first_seq=row.first_seq, high_seq=row.high_seq, updated_at=now)

    def sequence(
        self,
        table_id: str,
        msg_id: str,
        seq: int,
        first_seq: int | None,
        high_seq: int | None,
        item: Incoming,
        out: Outcome,
        *,
        status: bool = False,
    ) -> None:
        now = item.received_at
        # Only a seq the copy already covers can have come before as another message.
        covered = first_seq is not None and high_seq is not None and first_seq <= seq <= high_seq
        # An open gap holds nothing yet: only the batch's own messages can be there.
        gap = (table_id, seq) in self.batch.state.open_gaps
        other = None if status or not covered else self._reused(table_id, seq, msg_id, gap)
        if other is not None:
            self.record.record_alarm(
                table_id,
                "sequence_reused",
                f"seq {seq} came again as another message ({msg_id}, first {other}): the "
                "table's journal was replaced, restored from a backup or cut and refilled",
                now,
                out,
            )
            return
        missing: range = range(0)
        below = False  # a jump below the copy: older seqs may be stored (retained device states)
        if first_seq is None or high_seq is None:
            first_seq = high_seq = seq
        elif seq > high_seq:
            missing = range(high_seq + 1, seq + 1 if status else seq)
            high_seq = seq
        elif seq < first_seq:
            missing = range(seq + 1, first_seq)
            first_seq, below = seq, True
        elif gap:  # written at the batch's end
            self.batch.state.open_gaps.discard((table_id, seq))
            self.batch.state.fills.append((table_id, seq, now))
            out.gaps_filled.append((table_id, seq))
        self._report_missing(table_id, missing, now, out, status=status, below=below)
        self.batch.row_changed(table_id, first_seq=first_seq, high_seq=high_seq)

    def _report_missing(
        self, table_id: str, missing: range, now: float, out: Outcome, *, status: bool, below: bool
    ) -> None:
        """The seqs of ``missing`` the copy lacks, reported (at most MAX_MISSING of them; a
        larger jump is one ``gap`` record alarm)."""
        if len(missing) > MAX_MISSING:
            self.record.record_alarm(
                table_id,
                "gap",
                f"seqs {missing.start}–{missing.stop - 1} are missing ({len(missing)} messages)",
                now,
                out,
            )
            missing = range(missing.stop - MAX_MISSING, missing.stop)
        # A seq stored already (an old retained device state) is not missing: below the copy
        # the database is asked now; above it, once for the batch (:meth:`unreport_stored`).
        present: set[int] = set()
        if missing and below:
            present = {
                r[0]
                for r in self.db.all(
                    "SELECT seq FROM messages WHERE table_id = ? AND sequenced = 1 AND seq >= ? "
                    "AND seq < ?",
                    (table_id, missing.start, missing.stop),
                )
            }
        state = self.batch.state
        for gap in missing:  # written at the batch's end (pit.writes)
            key = (table_id, gap)
            if gap in present or key in state.seqs:
                continue
            if key not in state.open_gaps:
                state.open_gaps.add(key)
                state.add(MISSING, (table_id, gap, now, int(status)))
                if not below:
                    state.unchecked.add(key)
            out.gaps_reported.append(key)

    def _reused(self, table_id: str, seq: int, msg_id: str, gap: bool) -> str | None:
        """Another message stored at the table's sequenced ``seq`` (by the batch, or before
        unless the seq is an open ``gap``)."""
        mine = self.batch.state.seqs.get((table_id, seq))
        if mine is not None and mine != msg_id:
            return mine
        if gap:
            return None
        row = self.db.one(
            "SELECT msg_id FROM messages WHERE table_id = ? AND seq = ? AND sequenced = 1 "
            "AND msg_id <> ? LIMIT 1",
            (table_id, seq, msg_id),
        )
        return None if row is None else str(row[0])

    def status(
        self, msg: Message, row: TableRow, item: Incoming, out: Outcome, *, apply: bool
    ) -> None:
        """A status is the table's state by arrival and its own seq, never its claimed time:
        an ``offline`` (the last will, built at connect, so older than the ``online`` after
        it) applies when it arrives; another state unless its seq is below the shown one."""
        p = msg.payload
        assert isinstance(p, StatusPayload)
        newer = row.status_seq is None or msg.seq >= row.status_seq
        if apply and (p.state == "offline" or newer):
            self.batch.state.set(
                msg.table_id, status=msg.text, status_time=msg.data["time"], status_seq=msg.seq,
                state=p.state, updated_at=item.received_at,
            )  # fmt: skip
            self.batch.row_changed(msg.table_id, status_seq=msg.seq)
        if row.first_seq is not None and row.high_seq is not None and msg.seq > row.high_seq:
            # The table says it journaled up to seq: the ones the pit lacks are missing (on
            # their way, or lost); filled when they arrive.
            self.sequence(msg.table_id, msg.msg_id, msg.seq, row.first_seq, row.high_seq, item,
                           out, status=True)  # fmt: skip

    def project(self, msg: Message, row: TableRow, now: float, out: Outcome) -> None:
        """Rounds, players, alarms, protection and checkpoints, each keyed by the table."""
        p, table_id, seq = msg.payload, msg.table_id, msg.seq
        if isinstance(p, RoundPayload):
            self._round(table_id, seq, p, row)
        elif isinstance(p, PlayerPayload):
            self._player(table_id, seq, p)
        elif isinstance(p, AlarmPayload):
            self._alarm(msg, p)
        elif isinstance(p, AlarmAckPayload):
            self.batch.state.ack(table_id, p.alarm_id, p.by, p.acknowledged_at.isoformat())
        elif isinstance(p, ProtectionPayload):
            self.batch.state.set(table_id, protection=p.model_dump_json())
        elif isinstance(p, CheckpointPayload):
            self.record.checkpoint(table_id, msg.msg_id, p, row, now, out)

    def _alarm(self, msg: Message, p: AlarmPayload) -> None:
        alarm_id = p.alarm_id or msg.msg_id
        self.batch.state.alarm_tables.setdefault(alarm_id, set()).add(msg.table_id)
        self.batch.state.add(
            ALARMS,
            (
                msg.table_id,
                alarm_id,
                p.code,
                p.severity,
                p.detail,
                p.raised_at.isoformat() if p.raised_at else msg.data["time"],
                int(p.ack_required),
            ),
        )

    def _round(self, table_id: str, seq: int, p: RoundPayload, row: TableRow) -> None:
        wagered = won = 0
        theoretical = 0.0
        for seat in p.seats:
            for name in ("chan_chu", "jacks_beat", "push_ace_high"):
                side = getattr(seat, name)
                if side.wager:
                    wagered += side.wager
                    won += side.win or 0
                    table = str(p.paytables.get(name, ""))
                    theoretical += side.wager * THEORETICAL.get((name, table), 0.0)
        dealer = p.dealer
        values = (
            p.round_id,
            table_id,
            p.round_seq,
            seq,
            p.status,
            ",".join(r.code for r in p.reasons),
            p.dealer_id,
            p.opened_at.isoformat(),
            p.closed_at.isoformat(),
            self.shifts.of(p.closed_at),
            len(p.seats),
            int(bool(dealer and dealer.two_jacks)),
            wagered,
            won,
            theoretical,
            0,  # waits for the floor's pooled protection (pit/floorwatch.py); a later copy keeps it
        )
        self.batch.state.add(ROUNDS, values)
        self.batch.state.round_tables.setdefault(p.round_id, set()).add(table_id)
        # The tile's last round follows the table's own seq, never the number a round claims.
        if row.last_round_msg_seq is None or seq >= row.last_round_msg_seq:
            summary = round_summary(p)
            self.batch.state.set(table_id, last_round=orjson.dumps(summary).decode(),
                            last_round_seq=p.round_seq, last_round_msg_seq=seq)  # fmt: skip
            self.batch.row_changed(table_id, last_round_msg_seq=seq)
        if row.round_high is None or p.round_seq > row.round_high:
            self.batch.state.set(table_id, round_high=p.round_seq)
            self.batch.row_changed(table_id, round_high=p.round_seq)

    def _player(self, table_id: str, seq: int, p: PlayerPayload) -> None:
        self.batch.state.add(
            PLAYERS,
            (
                p.round_id,
                p.seat,
                table_id,
                seq,
                str(p.pai_gow.get("outcome", "")),
                int(p.foul),
                p.wager,
                p.win,
                int(p.corrects is not None),
            ),
        )


def round_summary(p: RoundPayload) -> dict[str, Any]:
    """A round in a few words for a tile: number, status, dealer's hand, the reasons."""
    dealer = p.dealer
    setting = dealer.setting if dealer is not None else None
    return {
        "round_id": p.round_id,
        "round_seq": p.round_seq,
        "status": p.status,
        "reasons": [r.code for r in p.reasons],
        "closed_at": p.closed_at.isoformat(),
        "dealer_id": p.dealer_id,
        "seats": len(p.seats),
        "dealer_hand": dealer.best_hand if dealer is not None else None,
        "two_jacks": bool(dealer and dealer.two_jacks),
        "front": list(setting.front) if setting is not None else None,
        "back": list(setting.back) if setting is not None else None,
    }
