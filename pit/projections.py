"""Each table's seq bookkeeping (read once a batch, locked in table order, written once a batch)
and the projections of its messages: status, rounds, players, alarms, protection, checkpoints,
each keyed by the table (``pit.store``'s room for them)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from controller.messages import (
    AlarmAckPayload,
    AlarmPayload,
    CheckpointPayload,
    PlayerPayload,
    ProtectionPayload,
    RoundPayload,
    StatusPayload,
)
from pit.db import _ROW_COLUMNS, Incoming, Outcome, TableRow
from pit.judge import Message
from pit.record import RecordChecks

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


class Projections(RecordChecks):
    """Seq bookkeeping and projections."""

    def _lock_rows(self, batch: Sequence[Incoming]) -> None:
        """The rows of the batch's registered tables, read in one statement and locked
        (PostgreSQL) in table order, so two pits sharing a database never deadlock on them."""
        wanted = {self._topic(item.topic)[0] for item in batch}
        names = sorted(t for t in wanted if self.feed_keys.for_table(t) is not None)
        if not names:
            return
        lock = " FOR UPDATE" if self.kind == "postgresql" else ""
        rows = self.all(
            f"SELECT table_id, {_ROW_COLUMNS} FROM tables WHERE table_id IN "
            f"({', '.join('?' for _ in names)}) ORDER BY table_id{lock}",
            names,
        )
        for table_id, *values in rows:
            self._rows[table_id] = self._rows_read[table_id] = TableRow(*values)
            self._known.add(table_id)

    def _table_row(self, table_id: str, prefix: str, now: float) -> TableRow:
        """The table's bookkeeping row as the batch left it; read (made when new, locked on
        PostgreSQL) when the batch has not read it yet."""
        cached = self._rows.get(table_id)
        if cached is not None:
            return cached
        self._ensure_table(table_id, prefix, now)
        lock = " FOR UPDATE" if self.kind == "postgresql" else ""
        row = self.one(f"SELECT {_ROW_COLUMNS} FROM tables WHERE table_id = ?{lock}", (table_id,))
        assert row is not None
        self._rows[table_id] = self._rows_read[table_id] = TableRow(*row)
        return self._rows[table_id]

    def _write_seqs(self, now: float) -> None:
        """Each table's first and highest seq, once a batch (not once a message)."""
        for table_id in sorted(self._rows):
            row, read = self._rows[table_id], self._rows_read.get(table_id)
            if read is None or (row.first_seq, row.high_seq) != (read.first_seq, read.high_seq):
                self.x(
                    "UPDATE tables SET first_seq = ?, high_seq = ?, updated_at = ? "
                    "WHERE table_id = ?",
                    (row.first_seq, row.high_seq, now, table_id),
                )

    def _sequence(
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
        other = (
            None
            if status or not covered
            else self.one(
                "SELECT msg_id FROM messages WHERE table_id = ? AND seq = ? AND sequenced = 1 "
                "AND msg_id <> ? LIMIT 1",
                (table_id, seq, msg_id),
            )
        )
        if other is not None:
            self._record_alarm(
                table_id,
                "sequence_reused",
                f"seq {seq} came again as another message ({msg_id}, first {other[0]}): the "
                "table's journal was replaced, restored from a backup or cut and refilled",
                now,
                out,
            )
            return
        missing: range = range(0)
        if first_seq is None or high_seq is None:
            first_seq = high_seq = seq
        elif seq > high_seq:
            missing = range(high_seq + 1, seq + 1 if status else seq)
            high_seq = seq
        elif seq < first_seq:
            missing = range(seq + 1, first_seq)
            first_seq = seq
        else:
            filled = self.x(
                "UPDATE missing SET filled_at = ? WHERE table_id = ? AND seq = ? "
                "AND filled_at IS NULL",
                (now, table_id, seq),
            ).rowcount
            if filled:
                out.gaps_filled.append((table_id, seq))
        self._report_missing(table_id, missing, now, out, status=status)
        self._row_changed(table_id, first_seq=first_seq, high_seq=high_seq)

    def _report_missing(
        self, table_id: str, missing: range, now: float, out: Outcome, *, status: bool
    ) -> None:
        """The seqs of ``missing`` the copy lacks, reported (at most MAX_MISSING of them; a
        larger jump is one ``gap`` record alarm)."""
        if len(missing) > MAX_MISSING:
            self._record_alarm(
                table_id,
                "gap",
                f"seqs {missing.start}–{missing.stop - 1} are missing ({len(missing)} messages)",
                now,
                out,
            )
            missing = range(missing.stop - MAX_MISSING, missing.stop)
        if missing:  # a seq stored already (an old retained device state) is not missing
            present = {
                r[0]
                for r in self.all(
                    "SELECT seq FROM messages WHERE table_id = ? AND sequenced = 1 AND seq >= ? "
                    "AND seq < ?",
                    (table_id, missing.start, missing.stop),
                )
            }
            missing_seqs = [s for s in missing if s not in present]
        else:
            missing_seqs = list(missing)
        for gap in missing_seqs:
            self.x(
                "INSERT INTO missing (table_id, seq, reported_at, by_status) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (table_id, seq) DO NOTHING",
                (table_id, gap, now, int(status)),
            )
            out.gaps_reported.append((table_id, gap))

    def _status(
        self, msg: Message, row: TableRow, item: Incoming, out: Outcome, *, apply: bool
    ) -> None:
        """A status is the table's state by arrival and its own seq, never its claimed time:
        an ``offline`` (the last will, built at connect, so older than the ``online`` after
        it) applies when it arrives; another state unless its seq is below the shown one."""
        p = msg.payload
        assert isinstance(p, StatusPayload)
        newer = row.status_seq is None or msg.seq >= row.status_seq
        if apply and (p.state == "offline" or newer):
            self.x(
                "UPDATE tables SET status = ?, status_time = ?, status_seq = ?, state = ?, "
                "updated_at = ? WHERE table_id = ?",
                (msg.text, msg.data["time"], msg.seq, p.state, item.received_at, msg.table_id),
            )
            self._row_changed(msg.table_id, status_seq=msg.seq)
        if row.first_seq is not None and row.high_seq is not None and msg.seq > row.high_seq:
            # The table says it journaled up to seq: the ones the pit lacks are missing (on
            # their way, or lost); filled when they arrive.
            self._sequence(msg.table_id, msg.msg_id, msg.seq, row.first_seq, row.high_seq, item,
                           out, status=True)  # fmt: skip

    def _project(self, msg: Message, row: TableRow, now: float, out: Outcome) -> None:
        """Rounds, players, alarms, protection and checkpoints, each keyed by the table."""
        p, table_id, seq = msg.payload, msg.table_id, msg.seq
        if isinstance(p, RoundPayload):
            self._round(table_id, seq, p, row)
        elif isinstance(p, PlayerPayload):
            self._player(table_id, seq, p)
        elif isinstance(p, AlarmPayload):
            self._alarm(msg, p)
        elif isinstance(p, AlarmAckPayload):
            self.x(
                "UPDATE alarms SET acked_by = ?, acked_at = ? WHERE table_id = ? AND alarm_id = ?",
                (p.by, p.acknowledged_at.isoformat(), table_id, p.alarm_id),
            )
        elif isinstance(p, ProtectionPayload):
            self.x(
                "UPDATE tables SET protection = ? WHERE table_id = ?",
                (p.model_dump_json(), table_id),
            )
        elif isinstance(p, CheckpointPayload):
            self._checkpoint(table_id, msg.msg_id, p, row, now, out)

    def _alarm(self, msg: Message, p: AlarmPayload) -> None:
        self.x(
            "INSERT INTO alarms (table_id, alarm_id, code, severity, detail, raised_at, "
            "ack_required) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (table_id, alarm_id) DO NOTHING",
            (
                msg.table_id,
                p.alarm_id or msg.msg_id,
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
        )
        self.x(
            "INSERT INTO rounds (round_id, table_id, round_seq, msg_seq, status, reasons, "
            "dealer_id, opened_at, closed_at, shift, seats, two_jacks, side_wagered, side_won, "
            "side_theoretical) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (table_id, round_id) DO UPDATE SET msg_seq = excluded.msg_seq, "
            "status = excluded.status, reasons = excluded.reasons, "
            "side_wagered = excluded.side_wagered, side_won = excluded.side_won, "
            "side_theoretical = excluded.side_theoretical "
            "WHERE excluded.msg_seq > rounds.msg_seq",
            values,
        )
        # The tile's last round follows the table's own seq, never the number a round claims.
        if row.last_round_msg_seq is None or seq >= row.last_round_msg_seq:
            summary = round_summary(p)
            self.x(
                "UPDATE tables SET last_round = ?, last_round_seq = ?, last_round_msg_seq = ? "
                "WHERE table_id = ?",
                (json.dumps(summary, separators=(",", ":")), p.round_seq, seq, table_id),
            )
            self._row_changed(table_id, last_round_msg_seq=seq)
        if row.round_high is None or p.round_seq > row.round_high:
            self.x("UPDATE tables SET round_high = ? WHERE table_id = ?", (p.round_seq, table_id))
            self._row_changed(table_id, round_high=p.round_seq)

    def _player(self, table_id: str, seq: int, p: PlayerPayload) -> None:
        self.x(
            "INSERT INTO players (round_id, seat, table_id, msg_seq, outcome, foul, wager, win, "
            "corrected) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (table_id, round_id, seat) "
            "DO UPDATE "
            "SET msg_seq = excluded.msg_seq, outcome = excluded.outcome, foul = excluded.foul, "
            "wager = excluded.wager, win = excluded.win, corrected = excluded.corrected "
            "WHERE excluded.msg_seq > players.msg_seq",
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
