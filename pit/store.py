"""The pit's database: SQLite (the default: one file, no server) or PostgreSQL (psycopg 3), with
the same schema, migrated by yoyo-migrations (``pit/migrations``), and the same code.

``Store.ingest`` takes a batch of MQTT messages and, in ONE transaction: stores each feed
message once (``msg_id`` is the primary key: a resend is counted and skipped), keeps each
table's ``seq`` bookkeeping (a seq that jumps reports the missing ones at once; they are marked
filled when they arrive), projects rounds, players' results, alarms and checkpoints, and checks
the table's record (checkpoint signatures; a chain rewritten at a row, or shorter than it was;
each checkpoint's link to the last one held). Only messages whose Ed25519 signature checks under
the key registered for the table of their topic (``feed_keys``, ``pit.judge.signed``) get that
far; the stored body keeps the signature.
The caller acknowledges the messages to the broker only after ``ingest`` returned: a crash, a
database that went away or a lost link before that makes the broker send them again, and the
second copy is a duplicate by ``msg_id``.

Every method is synchronous and uses one connection: the ingest runs it in one worker thread.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import sqlite3
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from controller.feed_signature import checkpoint_hmac_bytes, checkpoint_link
from controller.messages import (
    AlarmAckPayload,
    AlarmPayload,
    CheckpointPayload,
    PlayerPayload,
    ProtectionPayload,
    RoundPayload,
    StatusPayload,
)
from pit import judge
from pit.judge import PAYLOADS, REJECT_BODY, REJECT_REASON, REJECT_TOPIC, Message, Refused, escaped
from pit.keys import FeedKeys

__all__ = ["PAYLOADS", "Incoming", "Limits", "Outcome", "Shifts", "Store", "migrate"]

#: A seq a status named but the pit lacks is usually on its way (the status goes out at once, the
#: message through the table's outbox): a tile counts it missing only after this many seconds.
STATUS_GAP_GRACE = 10.0

#: Missing seqs reported one by one up to this many per jump (a larger jump is one finding).
MAX_MISSING = 10_000

#: The record alarm of each way a checkpoint does not follow the last one held
#: (``controller.feed_signature.BrokenLink``).
LINK_ALARMS = {
    "rewritten": "chain_rewritten",
    "cut": "chain_cut",
    "backwards": "chain_cut",
    "skipped": "chain_skipped",
}

#: Theoretical hold of each side wager by paytable (docs/math.md): the house edge.
THEORETICAL = {
    ("chan_chu", "PT1"): 0.043461,
    ("chan_chu", "PT2"): 0.058447,
    ("chan_chu", "PT3"): 0.080008,
    ("chan_chu", "PT4"): 0.077656,
    ("chan_chu", "PT5"): 0.084900,
    ("jacks_beat", "B"): 0.088401,
}


@dataclass(frozen=True, slots=True)
class Incoming:
    """One MQTT message as it came off the wire."""

    topic: str
    payload: bytes
    retained: bool
    received_at: float


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds a message is judged by (``[broker] max_message_bytes``, ``[record]``)."""

    max_bytes: int = judge.MAX_BYTES
    max_depth: int = judge.MAX_DEPTH
    #: a seq or round number further than this past the table's highest is refused
    max_seq_jump: int = 100_000
    #: a claimed time ahead of the arrival by more than this is implausible (seconds)
    clock_tolerance: float = 300.0
    #: a claimed time older than this before the arrival is implausible (not for a replay)
    max_age: float = 7 * 86_400 + 300.0
    #: this many rejects on one table's topic within ``reject_window`` s: a record alarm
    reject_burst: int = 20
    reject_window: float = 60.0


#: The columns of :class:`TableRow`, in its order.
_ROW_COLUMNS = (
    "first_seq, high_seq, status_seq, chain_event_id, chain_made_at, chain_hash, "
    "last_round_msg_seq, round_high"
)


@dataclass(frozen=True, slots=True)
class TableRow:
    """Where a table's copy stands, as one message finds it."""

    first_seq: int | None
    high_seq: int | None
    status_seq: int | None
    chain_event_id: int | None
    chain_made_at: str | None
    chain_hash: str | None
    last_round_msg_seq: int | None
    round_high: int | None


def database_down(exc: BaseException) -> bool:
    """Whether ``exc`` is the database itself failing (its connection, its file, its disk),
    as opposed to one message it refused (a value out of range, a constraint)."""
    if isinstance(exc, sqlite3.Error):
        down = (sqlite3.OperationalError, sqlite3.InternalError)
        return isinstance(exc, down) or type(exc) is sqlite3.DatabaseError
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency of the pit
        return False
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


@dataclass
class Outcome:
    """What a batch did."""

    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    ignored: int = 0  # commands and replies on the tables' topics
    tables: set[str] = field(default_factory=set)
    gaps_reported: list[tuple[str, int]] = field(default_factory=list)
    gaps_filled: list[tuple[str, int]] = field(default_factory=list)
    alarms: list[dict[str, Any]] = field(default_factory=list)
    #: per table, the envelope time of the newest message stored (publish→page latency)
    sent: dict[str, str] = field(default_factory=dict)
    #: each reject: the table its topic names and the reason (both escaped)
    rejects: list[tuple[str, str]] = field(default_factory=list)
    #: per table, when the pit last heard it in this batch (its own clock)
    heard: dict[str, float] = field(default_factory=dict)

    def merge(self, other: Outcome) -> None:
        """Add what ``other`` (one message's outcome) did."""
        self.stored += other.stored
        self.duplicates += other.duplicates
        self.rejected += other.rejected
        self.ignored += other.ignored
        self.tables |= other.tables
        self.gaps_reported += other.gaps_reported
        self.gaps_filled += other.gaps_filled
        self.alarms += other.alarms
        for table, when in other.sent.items():
            self.sent[table] = max(self.sent.get(table, ""), when)
        self.rejects += other.rejects
        for table, at in other.heard.items():
            self.heard[table] = max(self.heard.get(table, 0.0), at)


class Shifts:
    """Shift boundaries (HH:MM, local time in ``timezone``): a time's shift is named by the
    local date and time its shift began, ``2026-11-25 14:00``."""

    def __init__(self, starts: Sequence[str], timezone: str = "UTC") -> None:
        self.starts = sorted((int(s[:2]), int(s[3:5])) for s in starts)
        self.zone = ZoneInfo(timezone)

    def of(self, when: datetime) -> str:
        local = when.astimezone(self.zone)
        minutes = local.hour * 60 + local.minute
        day = local.date()
        begun = [s for s in self.starts if s[0] * 60 + s[1] <= minutes]
        if begun:
            h, m = begun[-1]
        else:  # before the first start: the previous day's last shift
            h, m = self.starts[-1]
            day = day - timedelta(days=1)
        return f"{day.isoformat()} {h:02d}:{m:02d}"


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def database_kind(url: str) -> str:
    if url.startswith("sqlite:"):
        return "sqlite"
    if url.startswith(("postgresql:", "postgres:", "postgresql+psycopg:")):
        return "postgresql"
    raise ValueError(f"unsupported database URL {redact(url)!r}: sqlite:/// or postgresql://")


def redact(url: str) -> str:
    """A URL fit for a log line: no password."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"


def _sqlite_path(url: str) -> str:
    path = url.removeprefix("sqlite:///")
    return path


def migrate(url: str) -> list[str]:
    """Apply the pit's migrations (yoyo) that the database lacks; returns their ids."""
    from yoyo import get_backend, read_migrations  # type: ignore[import-untyped]

    kind = database_kind(url)
    if kind == "sqlite":
        Path(_sqlite_path(url)).parent.mkdir(parents=True, exist_ok=True)
        yoyo_url = "sqlite:///" + _sqlite_path(url)
    else:
        yoyo_url = "postgresql+psycopg://" + url.split("://", 1)[1]
    with resources.as_file(resources.files("pit") / "migrations") as directory:
        migrations = read_migrations(str(directory))
        backend = get_backend(yoyo_url)
        try:
            with backend.lock():
                todo = backend.to_apply(migrations)
                backend.apply_migrations(todo)
                return [m.id for m in todo]
        finally:
            with contextlib.suppress(Exception):
                backend.connection.close()


class Store:
    """One connection to the pit's database (see the module's text)."""

    def __init__(
        self,
        url: str,
        *,
        shifts: Shifts | None = None,
        checkpoint_keys: Mapping[str, bytes] | None = None,
        default_checkpoint_key: bytes | None = None,
        root: str = "",
        limits: Limits | None = None,
        feed_keys: FeedKeys | None = None,
    ) -> None:
        self.url = url
        #: the tables' registered feed keys: a table without any has every message refused
        self.feed_keys = feed_keys if feed_keys is not None else FeedKeys()
        self.limits = limits or Limits()
        self.kind = database_kind(url)
        self.shifts = shifts or Shifts(["06:00", "14:00", "22:00"])
        self.checkpoint_keys = dict(checkpoint_keys or {})
        self.default_checkpoint_key = default_checkpoint_key
        self.root = root
        self.conn: Any = None
        self._known: set[str] = set()  # tables whose row exists (committed)
        #: each table's row as the batch found it, then as its messages changed it (issue 31:
        #: read once a batch, locked in table order; the seq bookkeeping written once a batch)
        self._rows: dict[str, TableRow] = {}
        self._rows_read: dict[str, TableRow] = {}
        self.connect()

    # --- connection ------------------------------------------------------------------------

    def connect(self) -> None:
        self.close()
        if self.kind == "sqlite":
            path = _sqlite_path(self.url)
            conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")  # acknowledged means on disk
            conn.execute("PRAGMA busy_timeout = 30000")
            self.conn = conn
        else:
            import psycopg

            dsn = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
            self.conn = psycopg.connect(dsn, autocommit=True, connect_timeout=5)

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None

    def _sql(self, sql: str) -> str:
        return sql if self.kind == "sqlite" else sql.replace("?", "%s")

    def x(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Execute one statement; returns the cursor."""
        return self.conn.execute(self._sql(sql), tuple(params))

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.x(sql, params).fetchall())

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row = self.x(sql, params).fetchone()
        return tuple(row) if row is not None else None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.x("BEGIN IMMEDIATE" if self.kind == "sqlite" else "BEGIN")
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.x("ROLLBACK")
            raise
        self.x("COMMIT")

    # --- ingest ----------------------------------------------------------------------------

    def ingest(self, batch: Sequence[Incoming]) -> Outcome:
        """Store a batch in one transaction, each message judged alone (see the module's text
        and :meth:`_batch`). Raises only when the database itself is down."""
        known = set(self._known)
        self.feed_keys.refresh()
        try:
            with self.transaction():
                out = self._batch(batch)
                self._write_seqs(batch[-1].received_at if batch else time.time())
                for table_id, at in out.heard.items():  # once a table a batch, not a message
                    self.x(
                        "UPDATE tables SET last_heard = ?, silent_since = NULL WHERE table_id = ?",
                        (at, table_id),
                    )
                self._reject_bursts(out, batch[-1].received_at if batch else time.time())
        except BaseException:
            self._known = known  # rows made in the rolled-back transaction are gone
            raise
        finally:
            self._rows, self._rows_read = {}, {}  # the locks end with the transaction
        return out

    def _batch(self, batch: Sequence[Incoming]) -> Outcome:
        """The batch in one savepoint, no savepoint a message (two statements a message fewer:
        issue 31); if the database refuses any of its messages (a constraint, a value), the
        batch is rolled back to it and each message judged alone in its own savepoint
        (:meth:`_judged`), so the one refused is a reject and the others are stored."""
        out = Outcome()
        known = set(self._known)
        self._rows, self._rows_read = {}, {}
        self.x("SAVEPOINT batch")
        try:
            self._lock_rows(batch)
            for item in batch:
                self._one(item, out)
        except Exception as exc:
            if database_down(exc):
                raise
            self.x("ROLLBACK TO SAVEPOINT batch")
            self._known = known
            self._rows, self._rows_read = {}, {}
            out = Outcome()
            self._lock_rows(batch)
            for item in batch:
                self._judged(item, out)
        self.x("RELEASE SAVEPOINT batch")
        return out

    def _judged(self, item: Incoming, out: Outcome) -> None:
        """One message in its own savepoint: whatever it breaks in the database (but the
        database itself) rolls back to before it and makes it a reject."""
        part = Outcome()
        known, rows, read = set(self._known), dict(self._rows), dict(self._rows_read)
        self.x("SAVEPOINT msg")
        try:
            self._one(item, part)
        except Exception as exc:
            if database_down(exc):
                raise
            self.x("ROLLBACK TO SAVEPOINT msg")
            self._known, self._rows, self._rows_read = known, rows, read
            part = Outcome()
            first = str(exc).splitlines()[0] if str(exc) else ""
            self._reject(item, f"refused by the database: {type(exc).__name__}: {first}", part)
        self.x("RELEASE SAVEPOINT msg")
        out.merge(part)

    def _reject(self, item: Incoming, reason: str, out: Outcome) -> None:
        table = escaped(self._topic(item.topic)[0], 64)
        reason = escaped(reason, REJECT_REASON)
        self.x(
            "INSERT INTO rejects (id, topic, received_at, reason, body, table_id) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (
                uuid.uuid4().hex,
                escaped(item.topic, REJECT_TOPIC),
                item.received_at,
                reason,
                escaped(item.payload, REJECT_BODY),
                table,
            ),
        )
        out.rejected += 1
        out.rejects.append((table, reason))

    def _reject_bursts(self, out: Outcome, now: float) -> None:
        """A table whose topic carried ``reject_burst`` rejects within the window: an alarm."""
        limits = self.limits
        for table in sorted({t for t, _ in out.rejects}):
            row = self.one(
                "SELECT count(*) FROM rejects WHERE table_id = ? AND received_at >= ?",
                (table, now - limits.reject_window),
            )
            n = int(row[0]) if row else 0
            if n >= limits.reject_burst:
                self._record_alarm(
                    table,
                    "reject_burst",
                    f"{n} messages on its topic refused within {limits.reject_window:g} s",
                    now,
                    out,
                )

    def _topic(self, topic: str) -> tuple[str, str]:
        """The table a topic names and the rest of it (``round``, ``cmd/…``)."""
        table, _, kind = topic.removeprefix(self.root).partition("/")
        return table, kind

    def _one(self, item: Incoming, out: Outcome) -> None:
        topic_table, kind = self._topic(item.topic)
        if kind.startswith(("cmd/", "reply/")):
            out.ignored += 1
            return
        try:
            msg = judge.read(
                item.payload,
                topic_table,
                self.feed_keys.for_table,
                max_bytes=self.limits.max_bytes,
                max_depth=self.limits.max_depth,
            )
        except Refused as exc:
            self._reject(item, exc.reason, out)
            if exc.kind is not None:  # not the table's signed words: a finding on its topic
                self._signature_alarm(item, topic_table, kind, exc, out)
            return
        prefix = item.topic[: len(item.topic) - len(kind)] if kind else item.topic
        row = self._table_row(msg.table_id, prefix, item.received_at)
        try:
            self._refuse_claims(msg, row, retained=item.retained)
        except Refused as exc:
            self._reject(item, exc.reason, out)
            if exc.kind is not None:
                self._record_alarm(msg.table_id, exc.kind, exc.reason, item.received_at, out)
            return
        if not self._store_message(msg, item, out):
            return
        self._heard(msg, item, row, out)

    def _signature_alarm(
        self, item: Incoming, topic_table: str, kind: str, exc: Refused, out: Outcome
    ) -> None:
        """A record alarm on the table of the topic. A registered table gets its row (its
        tile shows the alarm even before its first good message); an unregistered name does
        not (anyone may publish under any name: the alarm is in the log and in
        ``record_alarms``, not a tile)."""
        assert exc.kind is not None
        table = escaped(topic_table, 64)
        if self.feed_keys.for_table(topic_table) is not None:
            self._ensure_table(topic_table, item.topic[: len(item.topic) - len(kind)],
                               item.received_at)  # fmt: skip
        self._record_alarm(table, exc.kind, exc.reason, item.received_at, out)

    def _ensure_table(self, table_id: str, prefix: str, now: float) -> None:
        if table_id not in self._known:
            self.x(
                "INSERT INTO tables (table_id, topic_prefix, updated_at) VALUES (?, ?, ?) "
                "ON CONFLICT (table_id) DO NOTHING",
                (table_id, prefix, now),
            )
            self._known.add(table_id)

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

    def _row_changed(self, table_id: str, **changes: Any) -> None:
        """What a message wrote of the table's row, for the batch's next message."""
        if table_id in self._rows:
            self._rows[table_id] = replace(self._rows[table_id], **changes)

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

    def _refuse_claims(self, msg: Message, row: TableRow, *, retained: bool) -> None:
        """:class:`Refused` (with a record alarm's kind) for a message that names another
        table's round or alarm, or whose seq or round number jumps beyond every bound (an old
        retained device state or a replay may lie far below: neither extends the copy)."""
        bound = self.limits.max_seq_jump
        if row.high_seq is not None and msg.seq > row.high_seq + bound:
            raise Refused(f"seq {msg.seq} after {row.high_seq}: a jump beyond {bound}", "seq_jump")
        old = retained or msg.replayed
        if row.first_seq is not None and msg.seq < row.first_seq - bound and not old:
            raise Refused(f"seq {msg.seq} before {row.first_seq}: beyond {bound}", "seq_jump")
        p = msg.payload
        high = row.round_high
        if isinstance(p, RoundPayload) and high is not None and p.round_seq > high + bound:
            raise Refused(
                f"round number {p.round_seq} after {high}: a jump beyond {bound}", "round_jump"
            )
        foreign = self._foreign(msg)
        if foreign is not None:
            raise Refused(foreign, "foreign_id")

    def _foreign(self, msg: Message) -> str | None:
        """Why the message names another table's round or alarm, or None."""
        p = msg.payload
        if isinstance(p, RoundPayload | PlayerPayload):
            sql, ident, what = "SELECT table_id FROM rounds WHERE round_id = ?", p.round_id, "round"
        elif isinstance(p, AlarmPayload | AlarmAckPayload) and p.alarm_id:
            sql, ident, what = "SELECT table_id FROM alarms WHERE alarm_id = ?", p.alarm_id, "alarm"
        else:
            return None
        other = self.one(sql + " AND table_id <> ? LIMIT 1", (ident, msg.table_id))
        if other is None:
            return None
        return f"names {escaped(other[0], 64)}'s {what} {escaped(ident, 80)}: refused"

    def _store_message(self, msg: Message, item: Incoming, out: Outcome) -> bool:
        """The message into the copy, once (``msg_id``); False for a duplicate."""
        sequenced = msg.schema != "paigow.status"
        stored = self.x(
            "INSERT INTO messages (msg_id, table_id, seq, sequenced, schema_name, topic, sent_at, "
            "received_at, replayed, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (msg_id) DO NOTHING",
            (
                msg.msg_id, msg.table_id, msg.seq, int(sequenced), msg.schema, item.topic,
                msg.data["time"], item.received_at, int(msg.replayed), msg.text,
            ),
        ).rowcount  # fmt: skip
        if not stored:
            out.duplicates += 1
            return False
        out.stored += 1
        out.tables.add(msg.table_id)
        return True

    def _heard(self, msg: Message, item: Incoming, row: TableRow, out: Outcome) -> None:
        """A stored message: the table was heard; its seq kept; its state and projections
        follow unless its claimed time is implausible (then a record alarm, not its state)."""
        now = item.received_at
        out.heard[msg.table_id] = now
        implausible = self._time_problem(msg, now, old_ok=item.retained or _is_will(msg))
        if implausible is not None:
            self._record_alarm(msg.table_id, "time_implausible", implausible, now, out)
        else:
            out.sent[msg.table_id] = max(out.sent.get(msg.table_id, ""), msg.data["time"])
        if isinstance(msg.payload, StatusPayload):
            self._status(msg, row, item, out, apply=implausible is None)
            return
        if item.retained and (row.first_seq is None or msg.seq < row.first_seq):
            return  # an old retained device state never opens nor extends the copy
        self._sequence(msg.table_id, msg.msg_id, msg.seq, row.first_seq, row.high_seq, item, out)
        if implausible is None:
            self._project(msg, row, now, out)

    def _time_problem(self, msg: Message, now: float, *, old_ok: bool) -> str | None:
        """Why the message's claimed time cannot be true on arrival, or None: ahead of the
        pit's clock by more than the tolerance, or older than anything the broker could have
        kept for the pit (not a replay; ``old_ok``: a retained copy or a last will, built when
        the table connected, may be as old as that connection); a round closed after its own
        message."""
        tolerance = self.limits.clock_tolerance
        claimed = msg.time.timestamp()
        if claimed > now + tolerance:
            return f"claims {msg.data['time'][:40]}, {claimed - now:.0f} s after its arrival"
        if not (msg.replayed or old_ok) and claimed < now - self.limits.max_age:
            return f"claims {msg.data['time'][:40]}, {now - claimed:.0f} s before its arrival"
        p = msg.payload
        if isinstance(p, RoundPayload) and p.closed_at.timestamp() > claimed + tolerance:
            return f"round {p.round_seq} closed at {p.closed_at.isoformat()}, after its message"
        return None

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
        self._row_changed(table_id, first_seq=first_seq, high_seq=high_seq)

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

    def checkpoint_key(self, table_id: str) -> bytes | None:
        return self.checkpoint_keys.get(table_id, self.default_checkpoint_key)

    def _checkpoint(
        self, table_id: str, msg_id: str, p: CheckpointPayload, row: TableRow, now: float,
        out: Outcome,
    ) -> None:  # fmt: skip
        """A checkpoint kept, its HMAC checked, its row compared with the copy's, and its link
        to the last checkpoint held checked live (``checkpoint_link``)."""
        signature = self._checkpoint_signature(table_id, p)
        self.x(
            "INSERT INTO checkpoints (table_id, event_id, chain, made_at, msg_id, signature) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (table_id, event_id, chain) DO NOTHING",
            (table_id, p.event_id, p.chain, p.made_at, msg_id, signature),
        )
        if signature == "forged":
            self._record_alarm(
                table_id,
                "checkpoint_forged",
                f"the checkpoint at row {p.event_id} ({p.made_at}) is not signed with the "
                "table's checkpoint key",
                now,
                out,
            )
            return
        self._rewritten_row(table_id, p, now, out)
        head, made = row.chain_event_id, row.chain_made_at
        if head is not None and made is not None and (p.made_at, p.event_id) <= (made, head):
            # An older checkpoint arriving late (a replay): its row was compared above.
            if p.event_id > head:
                self._record_alarm(
                    table_id,
                    "chain_cut",
                    f"a checkpoint of {p.made_at} reached row {p.event_id}, a later one ({made}) "
                    f"only row {head}: the table's tail went missing",
                    now,
                    out,
                )
            return
        last = None if head is None else {"event_id": head, "chain": row.chain_hash}
        broken = checkpoint_link(last, p.model_dump())
        if broken is not None:
            self._record_alarm(
                table_id,
                LINK_ALARMS[broken.kind],
                f"the checkpoint at row {p.event_id} ({p.made_at}): {broken.detail}",
                now,
                out,
            )
        self.x(
            "UPDATE tables SET chain_event_id = ?, chain_hash = ?, chain_made_at = ? "
            "WHERE table_id = ?",
            (p.event_id, p.chain, p.made_at, table_id),
        )
        self._row_changed(
            table_id, chain_event_id=p.event_id, chain_hash=p.chain, chain_made_at=p.made_at
        )

    def _checkpoint_signature(self, table_id: str, p: CheckpointPayload) -> str:
        """``valid``, ``forged`` (another key, or another table's), or ``unchecked`` (no
        checkpoint key configured): the HMAC over ``checkpoint_hmac_bytes``, the link to the
        previous checkpoint included when it names one."""
        if p.table_id != table_id:
            return "forged"
        key = self.checkpoint_key(table_id)
        if key is None:
            return "unchecked"
        expected = hmac.new(key, checkpoint_hmac_bytes(p.model_dump()), "sha256").hexdigest()
        return "valid" if hmac.compare_digest(expected, p.hmac) else "forged"

    def _rewritten_row(self, table_id: str, p: CheckpointPayload, now: float, out: Outcome) -> None:
        """A row checkpointed before with another hash: the journal was rewritten up to it."""
        other = self.one(
            "SELECT chain, made_at FROM checkpoints WHERE table_id = ? AND event_id = ? "
            "AND chain <> ? AND signature <> 'forged' LIMIT 1",
            (table_id, p.event_id, p.chain),
        )
        if other is not None:
            self._record_alarm(
                table_id,
                "chain_rewritten",
                f"row {p.event_id} of the table's chain was {other[0][:12]}… at {other[1]} and "
                f"is {p.chain[:12]}… at {p.made_at}: the journal was rewritten",
                now,
                out,
            )

    def _record_alarm(
        self, table_id: str, kind: str, detail: str, now: float, out: Outcome
    ) -> None:
        """A finding about a table's record; one open alarm per table and kind."""
        open_ = self.one(
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
        self.x(
            "INSERT INTO record_alarms (id, table_id, kind, detail, raised_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (alarm["id"], table_id, kind, detail, now),
        )
        out.alarms.append(alarm)

    # --- liveness (pit.liveness) -----------------------------------------------------------

    def quiet_tables(self, before: float) -> list[tuple[str, str, float | None, float | None]]:
        """Tables not offline and not heard since ``before``: id, topic prefix, last heard,
        silent since."""
        return [
            (r[0], r[1], r[2], r[3])
            for r in self.all(
                "SELECT table_id, topic_prefix, last_heard, silent_since FROM tables "
                "WHERE (state IS NULL OR state <> 'offline') "
                "AND (last_heard IS NULL OR last_heard < ?)",
                (before,),
            )
        ]

    def mark_silent(self, table_id: str, now: float, heard: float | None, out: Outcome) -> None:
        """The table is silent (its tile says so) with a ``table_silent`` record alarm."""
        self.x(
            "UPDATE tables SET silent_since = ? WHERE table_id = ? AND silent_since IS NULL",
            (now, table_id),
        )
        ago = f"{now - heard:.0f} s ago" if heard is not None else "never"
        self._record_alarm(
            table_id,
            "table_silent",
            f"last heard {ago}; no last will (offline) and no answer to a status request",
            now,
            out,
        )
        out.tables.add(table_id)

    # --- the pit's own actions -------------------------------------------------------------

    def acknowledge_record_alarm(self, alarm_id: str, by: str) -> bool:
        with self.transaction():
            done = self.x(
                "UPDATE record_alarms SET acked_by = ?, acked_at = ? WHERE id = ? "
                "AND acked_at IS NULL",
                (by, time.time(), alarm_id),
            ).rowcount
        return bool(done)

    def session_add(self, id_hash: str, tag: str, now: float, expires: float) -> None:
        with self.transaction():
            self.x(
                "INSERT INTO web_sessions (id_hash, token_tag, created_at, expires_at) "
                "VALUES (?, ?, ?, ?)",
                (id_hash, tag, now, expires),
            )

    def session_expires(self, id_hash: str, tag: str, now: float) -> float | None:
        """When a live session (not revoked, not expired, made under ``tag``) ends, or None."""
        row = self.one(
            "SELECT expires_at FROM web_sessions WHERE id_hash = ? AND token_tag = ? "
            "AND revoked_at IS NULL AND expires_at > ?",
            (id_hash, tag, now),
        )
        return float(row[0]) if row is not None else None

    def session_revoke(self, id_hash: str, now: float) -> bool:
        with self.transaction():
            done = self.x(
                "UPDATE web_sessions SET revoked_at = ? WHERE id_hash = ? AND revoked_at IS NULL",
                (now, id_hash),
            ).rowcount
            self.x("DELETE FROM web_sessions WHERE expires_at < ?", (now - 86_400,))
        return bool(done)

    def note_command(self, request_id: str, table_id: str, kind: str, by: str, body: str) -> None:
        with self.transaction():
            self.x(
                "INSERT INTO commands (request_id, table_id, kind, by_name, body, sent_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (request_id, table_id, kind, by, body, time.time()),
            )

    # --- reading ---------------------------------------------------------------------------

    def table_ids(self) -> list[str]:
        return [r[0] for r in self.all("SELECT table_id FROM tables ORDER BY table_id")]

    def tiles(
        self, table_ids: Sequence[str] | None = None, now: float | None = None
    ) -> list[dict[str, Any]]:
        """The pit page's tile of each table (all, or those named)."""
        now = time.time() if now is None else now
        where, params = "", []
        if table_ids is not None:
            if not table_ids:
                return []
            where = f" WHERE t.table_id IN ({', '.join('?' for _ in table_ids)})"
            params = list(table_ids)
        rows = self.all(
            "SELECT t.table_id, t.topic_prefix, t.status, t.last_round, t.protection, "
            "t.first_seq, t.high_seq, t.chain_event_id, t.chain_made_at, t.last_heard, "
            "t.silent_since FROM tables t" + where + " ORDER BY t.table_id",
            params,
        )
        hour_ago = datetime.fromtimestamp(now - 3600, UTC).isoformat()
        per_hour = dict(
            self._grouped(
                "SELECT table_id, count(*) FROM rounds WHERE closed_at >= ?", hour_ago, table_ids
            )
        )
        gaps = dict(
            self._grouped(
                "SELECT table_id, count(*) FROM missing WHERE filled_at IS NULL AND "
                "(by_status = 0 OR reported_at < ?)",
                now - STATUS_GAP_GRACE,
                table_ids,
            )
        )
        rejected = dict(
            self._grouped(
                "SELECT table_id, count(*) FROM rejects WHERE received_at >= ?",
                now - 3600,
                table_ids,
            )
        )
        record: dict[str, list[dict[str, Any]]] = {}
        for rid, tid, kind, detail, raised in self._grouped(
            "SELECT id, table_id, kind, detail, raised_at FROM record_alarms "
            "WHERE acked_at IS NULL AND raised_at >= ?",
            0.0,
            table_ids,
        ):
            record.setdefault(tid, []).append(
                {"id": rid, "kind": kind, "detail": detail, "raised_at": raised}
            )
        counts = {"per_hour": per_hour, "gaps": gaps, "rejected": rejected}
        return [_tile(row, counts, record) for row in rows]

    def _grouped(
        self, sql: str, arg: Any, table_ids: Sequence[str] | None, by: str = "table_id"
    ) -> list[tuple[Any, ...]]:
        params: list[Any] = [arg]
        if table_ids is not None:
            sql += f" AND {by} IN ({', '.join('?' for _ in table_ids)})"
            params += list(table_ids)
        if "count(*)" in sql:
            sql += f" GROUP BY {by}"
        return self.all(sql, params)

    def table_detail(self, table_id: str, rounds: int = 50) -> dict[str, Any] | None:
        tiles = self.tiles([table_id])
        if not tiles:
            return None
        tile = tiles[0]
        tile["rounds"] = [
            {
                "round_id": r[0], "round_seq": r[1], "status": r[2], "reasons": r[3],
                "dealer_id": r[4], "closed_at": r[5], "seats": r[6], "msg_seq": r[7],
            }
            for r in self.all(
                "SELECT round_id, round_seq, status, reasons, dealer_id, closed_at, seats, "
                "msg_seq FROM rounds WHERE table_id = ? ORDER BY round_seq DESC LIMIT ?",
                (table_id, rounds),
            )
        ]  # fmt: skip
        tile["gaps"] = [
            {"seq": r[0], "reported_at": r[1], "filled_at": r[2]}
            for r in self.all(
                "SELECT seq, reported_at, filled_at FROM missing WHERE table_id = ? "
                "ORDER BY seq DESC LIMIT 100",
                (table_id,),
            )
        ]
        tile["checkpoints"] = [
            {"event_id": r[0], "chain": r[1], "made_at": r[2], "signature": r[3]}
            for r in self.all(
                "SELECT event_id, chain, made_at, signature FROM checkpoints WHERE table_id = ? "
                "ORDER BY made_at DESC LIMIT 20",
                (table_id,),
            )
        ]
        tile["table_alarms"] = [
            {
                "alarm_id": r[0], "code": r[1], "severity": r[2], "detail": r[3],
                "raised_at": r[4], "ack_required": bool(r[5]), "acked_by": r[6], "acked_at": r[7],
            }
            for r in self.all(
                "SELECT alarm_id, code, severity, detail, raised_at, ack_required, acked_by, "
                "acked_at FROM alarms WHERE table_id = ? ORDER BY raised_at DESC LIMIT 50",
                (table_id,),
            )
        ]  # fmt: skip
        return tile

    def pooled_protection(self, shufflers: Mapping[str, str]) -> list[dict[str, Any]]:
        """Game protection across tables, pooled by shuffler and by model (``shufflers``: each
        table's 'MODEL SERIAL'): the tables, their rounds, the rounds voided or misdealt for a
        deck's reason, and the protection alarms each table raised, with the tests named."""
        deck_reasons = ("duplicate_card", "foreign_card", "second_joker", "bad_stub")
        per_table: dict[str, dict[str, Any]] = {}
        for tid, status, reasons, n in self.all(
            "SELECT table_id, status, reasons, count(*) FROM rounds GROUP BY table_id, status, "
            "reasons"
        ):
            row = per_table.setdefault(tid, {"rounds": 0, "deck_faults": 0, "alarms": 0,
                                              "tests": set()})  # fmt: skip
            row["rounds"] += n
            if status != "settled" and any(r in str(reasons) for r in deck_reasons):
                row["deck_faults"] += n
        for tid, n in self.all(
            "SELECT table_id, count(*) FROM alarms WHERE code = 'game_protection' GROUP BY table_id"
        ):
            per_table.setdefault(tid, {"rounds": 0, "deck_faults": 0, "alarms": 0,
                                       "tests": set()})["alarms"] += n  # fmt: skip
        for tid, protection in self.all(
            "SELECT table_id, protection FROM tables WHERE protection IS NOT NULL"
        ):
            test = json.loads(protection).get("test")
            per_table.setdefault(tid, {"rounds": 0, "deck_faults": 0, "alarms": 0,
                                       "tests": set()})["tests"].add(test)  # fmt: skip
        pools: dict[tuple[str, str], dict[str, Any]] = {}
        for table_id, shuffler in shufflers.items():
            model = shuffler.split()[0] if shuffler.split() else shuffler
            for kind, key in (("shuffler", shuffler), ("model", model)):
                pool = pools.setdefault(
                    (kind, key),
                    {"pool": kind, "id": key, "tables": [], "rounds": 0, "deck_faults": 0,
                     "protection_alarms": 0, "tests": set()},
                )  # fmt: skip
                found = per_table.get(table_id)
                pool["tables"].append(table_id)
                if found is not None:
                    pool["rounds"] += found["rounds"]
                    pool["deck_faults"] += found["deck_faults"]
                    pool["protection_alarms"] += found["alarms"]
                    pool["tests"] |= found["tests"]
        out = []
        for pool in sorted(pools.values(), key=lambda p: (p["pool"] != "shuffler", p["id"])):
            pool["tables"] = sorted(pool["tables"])
            pool["tests"] = sorted(t for t in pool["tests"] if t)
            pool["deck_fault_rate"] = (
                round(pool["deck_faults"] / pool["rounds"], 4) if pool["rounds"] else None
            )
            out.append(pool)
        return out

    def round_message(self, round_id: str) -> dict[str, Any] | None:
        """The round as the table last sent it (the recall)."""
        row = self.one(
            "SELECT m.body FROM messages m JOIN rounds r ON r.table_id = m.table_id "
            "AND r.msg_seq = m.seq WHERE r.round_id = ? AND m.sequenced = 1",
            (round_id,),
        )
        if row is None:
            return None
        data: dict[str, Any] = json.loads(row[0])
        return data

    def export_lines(self, table_id: str) -> Iterator[str]:
        """The table's copy of the feed, the envelopes one a line in seq order (what
        ``paigow-table audit verify --feed`` reads)."""
        cursor = self.x(
            "SELECT body FROM messages WHERE table_id = ? AND sequenced = 1 ORDER BY seq, "
            "received_at",
            (table_id,),
        )
        for (body,) in cursor:
            yield body

    def counts(self) -> dict[str, int]:
        def n(sql: str) -> int:
            row = self.one(sql)
            return int(row[0]) if row and row[0] is not None else 0

        return {
            "messages": n("SELECT count(*) FROM messages"),
            "sequenced": n("SELECT count(*) FROM messages WHERE sequenced = 1"),
            "rounds": n("SELECT count(*) FROM rounds"),
            "rejects": n("SELECT count(*) FROM rejects"),
            "gaps_reported": n("SELECT count(*) FROM missing"),
            "gaps_open": n("SELECT count(*) FROM missing WHERE filled_at IS NULL"),
            "record_alarms": n("SELECT count(*) FROM record_alarms WHERE acked_at IS NULL"),
        }

    def seqs(self, table_id: str) -> list[int]:
        return [
            r[0]
            for r in self.all(
                "SELECT seq FROM messages WHERE table_id = ? AND sequenced = 1 ORDER BY seq",
                (table_id,),
            )
        ]

    def database_bytes(self) -> int:
        if self.kind == "sqlite":
            path = Path(_sqlite_path(self.url))
            return sum(
                p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists()
            )
        row = self.one("SELECT pg_database_size(current_database())")
        return int(row[0]) if row else 0


def _tile(
    row: tuple[Any, ...], counts: Mapping[str, Mapping[str, int]], record: Mapping[str, Any]
) -> dict[str, Any]:
    """One table's tile from its ``tables`` row and the counts read for all tiles."""
    tid, prefix, status, last_round, protection, first, high, ev, made, heard, silent = row
    st = json.loads(status) if status else None
    sp = (st or {}).get("payload") or {}
    return {
        "table_id": tid,
        "prefix": prefix,
        "state": "silent" if silent is not None else _state(sp),
        "last_heard": heard,
        "silent_since": silent,
        "rejected_last_hour": counts["rejected"].get(tid, 0),
        "table_open": bool(sp.get("table_open")),
        "round_in_progress": sp.get("round_id"),
        "dealer_id": sp.get("dealer_id"),
        "devices": sp.get("devices") or {},
        "fault": sp.get("fault"),
        "alarms": sp.get("alarms_unacknowledged") or [],
        "alarms_total": sp.get("alarms_unacknowledged_total") or 0,
        "last_round": json.loads(last_round) if last_round else None,
        "protection": json.loads(protection) if protection else None,
        "rounds_last_hour": counts["per_hour"].get(tid, 0),
        "first_seq": first,
        "high_seq": high,
        "open_gaps": counts["gaps"].get(tid, 0),
        "record_alarms": record.get(tid, []),
        "chain": {"event_id": ev, "made_at": made},
        "status_time": (st or {}).get("time"),
    }


def _is_will(msg: Message) -> bool:
    """An ``offline`` status: the last will is one, built when the table connected."""
    return isinstance(msg.payload, StatusPayload) and msg.payload.state == "offline"


def _state(status: Mapping[str, Any]) -> str:
    """online, fault, closed (online but the table is closed), offline, or unknown."""
    state = status.get("state")
    if state is None:
        return "unknown"
    if state == "online" and not status.get("table_open"):
        return "closed"
    return str(state)


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
