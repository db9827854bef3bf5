"""A batch's rows, kept in memory until the batch ends and then written one statement a
database table (issue 31): on PostgreSQL ``INSERT … SELECT FROM unnest(arrays) ON CONFLICT …``
and ``UPDATE … FROM unnest(arrays)``, on SQLite ``executemany`` (in process: no round trips).

What the batch needs to know of its own rows before they are written (a msg_id stored earlier
in the batch, a round's or an alarm's table, a checkpoint at a row, a seq) it finds in
:class:`BatchState`, which also holds what the batch read of the database once, up front
(``pit.projections.Projections._prefetch``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pit.db import Database

TEXT, BIGINT, INTEGER, FLOAT = "text", "bigint", "integer", "double precision"


#: The columns of :class:`TableRow`, in its order.
ROW_COLUMNS = (
    "first_seq, high_seq, status_seq, chain_event_id, chain_made_at, chain_hash, "
    "last_round_msg_seq, round_high"
)


class TableRow(NamedTuple):
    """Where a table's copy stands, as one message finds it (a named tuple: ``_replace`` a
    few times a message is a third of ``dataclasses.replace``'s cost)."""

    first_seq: int | None
    high_seq: int | None
    status_seq: int | None
    chain_event_id: int | None
    chain_made_at: str | None
    chain_hash: str | None
    last_round_msg_seq: int | None
    round_high: int | None


@dataclass(frozen=True, slots=True)
class Insert:
    """One database table's rows of a batch: its columns (name, PostgreSQL type), what a
    conflict does, and (for an upsert) the key and the column whose highest value wins."""

    table: str
    columns: tuple[tuple[str, str], ...]
    conflict: str
    key: tuple[int, ...] = ()
    newer: int = -1

    def deduplicated(self, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """One row a key, the one an upsert a row at a time would have left: the highest
        ``newer``, the first of equals (an upsert may not touch a row twice in one statement)."""
        if not self.key:
            return rows
        best: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for row in rows:
            k = tuple(row[i] for i in self.key)
            if k not in best or row[self.newer] > best[k][self.newer]:
                best[k] = row
        return list(best.values())


MESSAGES = Insert(
    "messages",
    (("msg_id", TEXT), ("table_id", TEXT), ("seq", BIGINT), ("sequenced", INTEGER),
     ("schema_name", TEXT), ("topic", TEXT), ("sent_at", TEXT), ("received_at", FLOAT),
     ("replayed", INTEGER), ("body", TEXT)),
    "ON CONFLICT (msg_id) DO NOTHING",
)  # fmt: skip
ROUNDS = Insert(
    "rounds",
    (("round_id", TEXT), ("table_id", TEXT), ("round_seq", BIGINT), ("msg_seq", BIGINT),
     ("status", TEXT), ("reasons", TEXT), ("dealer_id", TEXT), ("opened_at", TEXT),
     ("closed_at", TEXT), ("shift", TEXT), ("seats", INTEGER), ("two_jacks", INTEGER),
     ("side_wagered", BIGINT), ("side_won", BIGINT), ("side_theoretical", FLOAT),
     ("pooled", INTEGER)),
    "ON CONFLICT (table_id, round_id) DO UPDATE SET msg_seq = excluded.msg_seq, "
    "status = excluded.status, reasons = excluded.reasons, "
    "side_wagered = excluded.side_wagered, side_won = excluded.side_won, "
    "side_theoretical = excluded.side_theoretical WHERE excluded.msg_seq > rounds.msg_seq",
    key=(1, 0),
    newer=3,
)  # fmt: skip
PLAYERS = Insert(
    "players",
    (("round_id", TEXT), ("seat", TEXT), ("table_id", TEXT), ("msg_seq", BIGINT),
     ("outcome", TEXT), ("foul", INTEGER), ("wager", BIGINT), ("win", BIGINT),
     ("corrected", INTEGER)),
    "ON CONFLICT (table_id, round_id, seat) DO UPDATE SET msg_seq = excluded.msg_seq, "
    "outcome = excluded.outcome, foul = excluded.foul, wager = excluded.wager, "
    "win = excluded.win, corrected = excluded.corrected "
    "WHERE excluded.msg_seq > players.msg_seq",
    key=(2, 0, 1),
    newer=3,
)  # fmt: skip
ALARMS = Insert(
    "alarms",
    (("table_id", TEXT), ("alarm_id", TEXT), ("code", TEXT), ("severity", TEXT),
     ("detail", TEXT), ("raised_at", TEXT), ("ack_required", INTEGER)),
    "ON CONFLICT (table_id, alarm_id) DO NOTHING",
)  # fmt: skip
CHECKPOINTS = Insert(
    "checkpoints",
    (("table_id", TEXT), ("event_id", BIGINT), ("chain", TEXT), ("made_at", TEXT),
     ("msg_id", TEXT), ("signature", TEXT)),
    "ON CONFLICT (table_id, event_id, chain) DO NOTHING",
)  # fmt: skip
WAITS = Insert(
    "checkpoint_waits",
    (("table_id", TEXT), ("event_id", BIGINT), ("chain", TEXT), ("detail", TEXT),
     ("noted_at", FLOAT)),
    "ON CONFLICT (table_id, event_id) DO NOTHING",
)  # fmt: skip
MISSING = Insert(
    "missing",
    (("table_id", TEXT), ("seq", BIGINT), ("reported_at", FLOAT), ("by_status", INTEGER)),
    "ON CONFLICT (table_id, seq) DO NOTHING",
)
#: In this order: an alarm's acknowledgement after the alarms; a wait cleared after it is made;
#: a gap filled after it is reported.
INSERTS = (MESSAGES, ROUNDS, PLAYERS, ALARMS, CHECKPOINTS, WAITS, MISSING)
_FILL_COLUMNS = (("table_id", TEXT), ("seq", BIGINT), ("filled_at", FLOAT))

#: The ``tables`` columns a batch sets, and their types.
TABLE_COLUMNS = {
    "first_seq": BIGINT, "high_seq": BIGINT, "updated_at": FLOAT, "last_heard": FLOAT,
    "silent_since": FLOAT, "status": TEXT, "status_time": TEXT, "status_seq": BIGINT,
    "state": TEXT, "last_round": TEXT, "last_round_seq": BIGINT, "last_round_msg_seq": BIGINT,
    "round_high": BIGINT, "protection": TEXT, "chain_event_id": BIGINT, "chain_hash": TEXT,
    "chain_made_at": TEXT,
}  # fmt: skip
_ACK_COLUMNS = (("table_id", TEXT), ("alarm_id", TEXT), ("acked_by", TEXT), ("acked_at", TEXT))

Execute = Callable[[str, Sequence[Any]], Any]


@dataclass
class BatchState:
    """What one batch knows: the rows it locked (as read, and as its messages changed them),
    what it read of the database up front, and the rows it has still to write."""

    rows: dict[str, TableRow] = field(default_factory=dict)
    rows_read: dict[str, TableRow] = field(default_factory=dict)
    #: msg_ids stored: before the batch (read up front) or by it
    stored_ids: set[str] = field(default_factory=set)
    #: (table, seq) → msg_id of the batch's own sequenced messages
    seqs: dict[tuple[str, int], str] = field(default_factory=dict)
    #: round and alarm ids → the tables that have them
    round_tables: dict[str, set[str]] = field(default_factory=dict)
    alarm_tables: dict[str, set[str]] = field(default_factory=dict)
    #: (table, row) → the checkpoints held there: (chain, made_at, signature)
    checkpoints: dict[tuple[str, int], list[tuple[str, str, str]]] = field(default_factory=dict)
    #: (table, row) → a checkpoint named there and not held yet: (chain, detail, noted at)
    waits: dict[tuple[str, int], tuple[str, str, float]] = field(default_factory=dict)
    cleared: set[tuple[str, int]] = field(default_factory=set)
    #: (table, seq) reported missing and not filled (read up front for the batch's tables, and
    #: reported by it), and those the batch filled: (table, seq, when)
    open_gaps: set[tuple[str, int]] = field(default_factory=set)
    fills: list[tuple[str, int, float]] = field(default_factory=list)
    #: gaps reported above a copy, to be checked against what is stored before they are written
    unchecked: set[tuple[str, int]] = field(default_factory=set)
    inserts: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    acks: dict[tuple[str, str], tuple[Any, ...]] = field(default_factory=dict)
    sets: dict[str, dict[str, Any]] = field(default_factory=dict)

    def snapshot(self) -> BatchState:
        return copy.deepcopy(self)

    def add(self, what: Insert, row: tuple[Any, ...]) -> None:
        self.inserts.setdefault(what.table, []).append(row)

    def ack(self, table_id: str, alarm_id: str, by: str, at: str) -> None:
        self.acks[table_id, alarm_id] = (table_id, alarm_id, by, at)

    def set(self, table_id: str, **columns: Any) -> None:
        """Columns of the table's row, written once at the end of the batch (the last wins)."""
        self.sets.setdefault(table_id, {}).update(columns)

    def flush(self, kind: str, execute: Execute, execute_many: Execute) -> None:
        """Every row kept, one statement a database table (a set of columns for ``tables``),
        in an order that follows the table ids; then nothing is kept."""
        for what in INSERTS:
            rows = what.deduplicated(self.inserts.pop(what.table, []))
            if rows:
                _insert(kind, execute, execute_many, what, rows)
        if self.fills:
            _update(kind, execute, execute_many, "missing", _FILL_COLUMNS, 2, sorted(self.fills))
            self.fills = []
        if self.cleared:
            _delete_waits(kind, execute, execute_many, sorted(self.cleared))
            self.cleared = set()
        if self.acks:
            _update(kind, execute, execute_many, "alarms", _ACK_COLUMNS, 2,
                    [self.acks[k] for k in sorted(self.acks)])  # fmt: skip
            self.acks = {}
        by_columns: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
        for table_id in sorted(self.sets):
            values = self.sets[table_id]
            names = tuple(sorted(values))
            by_columns.setdefault(names, []).append((table_id, *(values[n] for n in names)))
        for names, rows in by_columns.items():
            columns = (("table_id", TEXT), *((n, TABLE_COLUMNS[n]) for n in names))
            _update(kind, execute, execute_many, "tables", columns, 1, rows)
        self.sets = {}


class Batch:
    """What the ingest's parts share (``pit.store``, ``pit.record``, ``pit.projections``): the
    batch being stored (:class:`BatchState`, new each batch) and the tables whose row exists."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.state = BatchState()
        #: tables whose row exists (committed)
        self.known: set[str] = set()

    def ensure_table(self, table_id: str, prefix: str, now: float) -> None:
        if table_id not in self.known:
            self.db.x(
                "INSERT INTO tables (table_id, topic_prefix, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (table_id) DO NOTHING",
                (table_id, prefix, now),
            )
            self.known.add(table_id)

    def row_changed(self, table_id: str, **changes: Any) -> None:
        """What a message wrote of the table's row, for the batch's next message."""
        rows = self.state.rows
        if table_id in rows:
            rows[table_id] = rows[table_id]._replace(**changes)

    def flush(self) -> None:
        self.state.flush(self.db.kind, self.db.x, self.db.xmany)


def _insert(
    kind: str, execute: Execute, execute_many: Execute, what: Insert, rows: list[tuple[Any, ...]]
) -> None:
    names = ", ".join(name for name, _ in what.columns)
    if kind == "postgresql":
        arrays = ", ".join(f"%b::{t}[]" for _, t in what.columns)
        execute(
            f"INSERT INTO {what.table} ({names}) SELECT * FROM unnest({arrays}) {what.conflict}",
            [list(column) for column in zip(*rows, strict=True)],
        )
    else:
        marks = ", ".join("?" for _ in what.columns)
        execute_many(f"INSERT INTO {what.table} ({names}) VALUES ({marks}) {what.conflict}", rows)


def _update(
    kind: str,
    execute: Execute,
    execute_many: Execute,
    table: str,
    columns: Sequence[tuple[str, str]],
    keys: int,
    rows: list[tuple[Any, ...]],
) -> None:
    """``UPDATE table SET`` the columns after the first ``keys`` ones, matched on those."""
    key, values = columns[:keys], columns[keys:]
    if kind == "postgresql":
        arrays = ", ".join(f"%b::{t}[]" for _, t in columns)
        execute(
            f"UPDATE {table} AS t SET {', '.join(f'{n} = v.{n}' for n, _ in values)} "
            f"FROM unnest({arrays}) AS v({', '.join(n for n, _ in columns)}) "
            f"WHERE {' AND '.join(f't.{n} = v.{n}' for n, _ in key)}",
            [list(column) for column in zip(*rows, strict=True)],
        )
    else:
        execute_many(
            f"UPDATE {table} SET {', '.join(f'{n} = ?' for n, _ in values)} "
            f"WHERE {' AND '.join(f'{n} = ?' for n, _ in key)}",
            [(*row[keys:], *row[:keys]) for row in rows],
        )


def _delete_waits(
    kind: str, execute: Execute, execute_many: Execute, keys: list[tuple[str, int]]
) -> None:
    if kind == "postgresql":
        execute(
            "DELETE FROM checkpoint_waits WHERE (table_id, event_id) IN "
            "(SELECT * FROM unnest(%b::text[], %b::bigint[]))",
            [[t for t, _ in keys], [e for _, e in keys]],
        )
    else:
        execute_many("DELETE FROM checkpoint_waits WHERE table_id = ? AND event_id = ?", keys)
