"""The table's journal: SQLite in WAL mode, the source of truth (docs/architecture.md "Principles").

Every inbound event, every round and every message to publish is committed here before anything
is displayed or sent. One :class:`Journal` holds one connection (a :class:`JournalFile`) and
its parts by role, each a class over that connection: ``journal.rounds``, ``journal.outbox``,
``journal.history``, ``journal.kept`` and ``journal.upkeep``. Every public method is
synchronous and runs one short transaction (``BEGIN IMMEDIATE`` … ``COMMIT``; with
``synchronous=FULL`` the commit is on disk when the method returns), so the daemon may call it
directly from the event loop or through ``asyncio.to_thread``; a lock serialises callers from
different threads.

Several steps that must stand or fall together go in one :meth:`Journal.transaction`::

    with journal.transaction() as tx:
        tx.close_round(round_id, "settled", None, result)
        tx.enqueue(f"{prefix}round", lambda stamp: {"msg_id": stamp.msg_id, "seq": stamp.seq, ...})

Messages get their ``msg_id`` (stable across resends) and the table's next message ``seq`` from
the journal; a payload given as a builder receives them (a :class:`MessageStamp`) inside the
transaction, so they can be part of the payload. Nothing of a transaction that raises is kept:
neither the rows nor the sequence numbers, so the sequence has no gaps.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Self
from urllib.parse import quote

import structlog
from pydantic import BaseModel

from controller.clock import Clock, iso, utc_now
from controller.journal.schema import MIGRATIONS, SCHEMA_VERSION

log = structlog.get_logger(__name__)

Synchronous = Literal["FULL", "NORMAL"]


class RoundStatus(StrEnum):
    OPEN = "open"
    SETTLED = "settled"
    DEAD = "dead"
    MISDEAL = "misdeal"
    VOID = "void"


CLOSED_STATUSES = frozenset(
    {RoundStatus.SETTLED, RoundStatus.DEAD, RoundStatus.MISDEAL, RoundStatus.VOID}
)


class JournalError(Exception):
    """The journal refused an operation (unknown or already closed round, newer schema, …)."""


@dataclass(frozen=True, slots=True)
class MessageStamp:
    """What the journal assigns to a message: its id, the table's message sequence number, the
    table and the time it was written (``time``; ``at`` is the same as stored text)."""

    msg_id: str
    seq: int
    table_id: str
    at: str
    time: datetime


Payload = bytes | str | Mapping[str, Any] | BaseModel
PayloadBuilder = Callable[[MessageStamp], Payload]


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    """A message to publish. ``payload`` is bytes, text, a JSON-able mapping, a pydantic model,
    or a builder called with the message's :class:`MessageStamp` returning one of those."""

    topic: str
    payload: Payload | PayloadBuilder
    qos: Literal[0, 1, 2] = 1
    retain: bool = False


@dataclass(frozen=True, slots=True)
class OutboxRow:
    """A message waiting in the outbox. ``replay`` is set once it was pending when a connection
    was (re)established, i.e. it is delivered late (:meth:`JournalOutbox.mark_replay`)."""

    msg_id: str
    seq: int
    table_id: str
    topic: str
    payload: bytes
    qos: int
    retain: bool
    created_at: str
    attempts: int
    replay: bool
    round_id: str | None
    #: The payload is known to be canonical JSON (sorted keys, no spaces: what a signature
    #: covers, controller/feed_signature.py): a message queued from a mapping, as it was
    #: queued. A row read back from the file says False (an older table may have stored it
    #: otherwise), and is put in canonical form again as it leaves.
    canonical: bool = False

    def json(self) -> Any:
        return json.loads(self.payload)


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: int
    round_id: str | None
    at: str
    kind: str
    payload: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RoundRecord:
    round_id: str
    table_id: str
    seq: int
    opened_at: str
    closed_at: str | None
    status: RoundStatus
    reason: str | None
    result: dict[str, Any] | None
    events: tuple[EventRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class VoidedRound:
    """A round :meth:`JournalRounds.recover` voided; given to its message callback."""

    round_id: str
    table_id: str
    seq: int
    opened_at: str
    closed_at: str
    reason: str


@dataclass(frozen=True, slots=True)
class HourCount:
    hour: str  # "2024-05-01T13:00Z"
    total: int
    by_status: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class JournalStats:
    rounds: int
    by_status: dict[str, int]
    events: int
    outbox_pending: int
    oldest_pending_at: str | None
    last_round_at: str | None
    message_seq: int
    round_seq: int


# --- time and ids ----------------------------------------------------------------------------


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class _UlidSource:
    """ULIDs (48-bit milliseconds + 80 random bits, Crockford base 32): time-ordered, and strictly
    increasing from one source even when the clock stands still or steps back."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._last = 0
        self._lock = threading.Lock()

    def __call__(self) -> str:
        ms = int(self._clock().timestamp() * 1000) & ((1 << 48) - 1)
        value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
        with self._lock:
            if value <= self._last:
                value = self._last + 1
            self._last = value
        return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))


# --- JSON ------------------------------------------------------------------------------------


def _json_default(value: object) -> object:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, datetime):
        return iso(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, set | frozenset):
        return sorted(value)
    raise TypeError(f"cannot journal a {type(value).__name__} as JSON")


def open_read_only(path: str | os.PathLike[str]) -> sqlite3.Connection:
    """A read-only connection (the audit's): it works beside the running daemon."""
    return sqlite3.connect(f"file:{quote(os.fspath(path))}?mode=ro", uri=True, timeout=10.0)


def to_json(value: object) -> str:
    """Compact JSON as the journal stores it (key order kept, non-ASCII kept)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)


def chain_link(
    previous: str, event_id: int, round_id: str | None, at: str, kind: str, payload: str
) -> str:
    """An event's link in the journal's hash chain: SHA-256 (hex) of the link before it and the
    event's row as stored (its id, round, time, kind and payload text), canonical JSON."""
    row = json.dumps(
        [event_id, round_id, at, kind, payload], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(f"{previous}\n{row}".encode()).hexdigest()


def seal_of(round_id: str, status: str, reason: str | None, result: str | None) -> dict[str, Any]:
    """What a round's ``round_sealed`` event holds: its final status and reason and the SHA-256
    of its result as stored."""
    digest = None if result is None else hashlib.sha256(result.encode()).hexdigest()
    return {"round_id": round_id, "status": status, "reason": reason, "result_sha256": digest}


_NOTHING: Any = object()  # no chained record of a kept state

#: Messages the broker acknowledged that the journal keeps a copy of, the newest first, for a
#: consumer's ``resend`` (docs/mqtt.md §3): at a round every 30 s and ~3 messages a round, days.
SENT_KEPT = 20_000

#: Retention never removes a round or an event younger than this (``delete_archived`` refuses;
#: ``audit verify`` finds an ``archived`` event whose cutoff is younger).
MIN_RETENTION = timedelta(days=1)

#: Table state kept across restarts whose every change is chained (latched alarms, the seats, the
#: dealer signed in, game protection's state, the House Way, the last row a start verified): the
#: names controller/kept_state.py remembers.
KEPT_STATE = frozenset(
    {
        "latched_alarms",
        "occupied_seats",
        "dealer_signed_in",
        "protection_state",
        "house_way",
        "chain_verified",
    }
)


def _ranges(ids: Sequence[int]) -> list[list[int]]:
    """Sorted ids as [first, last] runs."""
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return runs


def _payload_bytes(payload: Payload) -> bytes:
    if isinstance(payload, bytes):
        return payload
    if isinstance(payload, str):
        return payload.encode("utf-8")
    if isinstance(payload, BaseModel):
        return payload.model_dump_json().encode("utf-8")
    return to_json(dict(payload)).encode("utf-8")


def _canonical_bytes(value: Mapping[str, Any]) -> bytes:
    """A message's JSON as a signature covers it (sorted keys, no spaces, UTF-8): stored so,
    the publisher signs the bytes it has, without parsing and writing them again."""
    text = json.dumps(
        dict(value),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=_json_default,
    )
    return text.encode("utf-8")


def _event_payload(payload: Mapping[str, Any] | BaseModel) -> str:
    if isinstance(payload, BaseModel):
        return payload.model_dump_json()
    return to_json(dict(payload))


# --- the writes ------------------------------------------------------------------------------


class Transaction:
    """The operations of one open transaction (from :meth:`Journal.transaction`): the journal's
    writes — events linked into the hash chain, rounds opened and closed (sealed), messages
    queued, kept state, archived rows removed."""

    def __init__(self, file: JournalFile) -> None:
        self._file = file
        self._conn = file.connection
        self._time = file.clock()
        self._now = iso(self._time)
        #: The messages this transaction queued, in order (handed to the outbox's listeners
        #: once it has committed: see :meth:`JournalOutbox.on_commit`).
        self.queued: list[OutboxRow] = []

    @property
    def now(self) -> str:
        """The transaction's timestamp: every row it writes carries this time."""
        return self._now

    def _counter(self, name: str) -> int:
        """The next value of a per-table counter in ``meta`` (1 if new), in one statement."""
        row = self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, '1') ON CONFLICT (key) "
            "DO UPDATE SET value = CAST(value AS INTEGER) + 1 RETURNING value",
            (f"{name}/{self._file.table_id}",),
        ).fetchone()
        return int(row[0])

    def remember(self, name: str, value: Any) -> None:
        """Keep a small piece of table state (JSON) across restarts, in this transaction. Kept
        state (:data:`KEPT_STATE`) is also recorded in the chain, as a ``state_kept`` event, when
        it changes: ``meta`` is not chained, so that record is what the table trusts at start
        and what ``audit verify`` compares ``meta`` with (docs/audit.md)."""
        key = f"{name}/{self._file.table_id}"
        text = to_json(value)
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is not None and row[0] == text:
            return
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, text),
        )
        if name in KEPT_STATE:
            self.record_event("state_kept", {"name": name, "value": json.loads(text)})

    def record_event(
        self, kind: str, payload: Mapping[str, Any] | BaseModel, round_id: str | None = None
    ) -> int:
        """Append an event; its ``chain`` hash links it to the event before it
        (:func:`chain_link`, docs/audit.md)."""
        text = _event_payload(payload)
        file = self._file
        # The link covers the row's id: it is made for the id the row should get (the one after
        # the newest this connection wrote or found), and made again in a second statement if
        # SQLite gave another (issue 42: one statement an event instead of two).
        expected = file.last_event_id + 1
        link = chain_link(file.chain_head, expected, round_id, self._now, kind, text)
        try:
            cur = self._conn.execute(
                "INSERT INTO events (round_id, at, kind, payload, chain) VALUES (?, ?, ?, ?, ?)",
                (round_id, self._now, kind, text, link),
            )
        except sqlite3.IntegrityError:
            raise JournalError(f"no round {round_id} in the journal") from None
        event_id = cur.lastrowid
        assert event_id is not None
        if event_id != expected:
            link = chain_link(file.chain_head, event_id, round_id, self._now, kind, text)
            self._conn.execute("UPDATE events SET chain = ? WHERE id = ?", (link, event_id))
        file.chain_head = link
        file.last_event_id = event_id
        return event_id

    def _seal(self, round_id: str, status: str, reason: str | None, result: str | None) -> None:
        """Record the round's final word (status, reason, the result's SHA-256: the values this
        transaction just wrote to its row) in the chain, so an edit of the row is caught
        (docs/audit.md)."""
        self.record_event("round_sealed", seal_of(round_id, status, reason, result), round_id)

    def open_round(self, round_id: str, seq: int | None = None) -> int:
        open_id = _open_round_id(self._conn, self._file.table_id)
        if open_id is not None:
            raise JournalError(f"round {open_id} is still open; close or void it first")
        expected = seq
        seq = self._counter("round_seq")
        if expected is not None and expected != seq:
            raise JournalError(
                f"round {round_id}: the table's next round number is {seq}, not {expected}"
            )
        try:
            self._conn.execute(
                "INSERT INTO rounds (round_id, table_id, seq, opened_at, status) "
                "VALUES (?, ?, ?, ?, 'open')",
                (round_id, self._file.table_id, seq, self._now),
            )
        except sqlite3.IntegrityError:
            raise JournalError(f"round id {round_id} is already in the journal") from None
        return seq

    def close_round(
        self,
        round_id: str,
        status: RoundStatus | str,
        reason: str | None,
        result: Mapping[str, Any] | BaseModel | None,
        outbox: Sequence[OutboxMessage] = (),
    ) -> list[OutboxRow]:
        closed = RoundStatus(status)
        if closed not in CLOSED_STATUSES:
            raise JournalError(f"a round closes as settled, dead, misdeal or void, not {closed}")
        text = None if result is None else _event_payload(result)
        cur = self._conn.execute(
            "UPDATE rounds SET status = ?, reason = ?, result = ?, closed_at = ? "
            "WHERE round_id = ? AND table_id = ? AND status = 'open'",
            (closed.value, reason, text, self._now, round_id, self._file.table_id),
        )
        if cur.rowcount != 1:  # not this table's, or not open: say which
            status, _ = self._round_of_table(round_id)
            raise JournalError(f"round {round_id} is already closed ({status})")
        self._seal(round_id, closed.value, reason, text)
        return [
            self.enqueue(m.topic, m.payload, m.qos, m.retain, round_id=round_id) for m in outbox
        ]

    def _round_of_table(self, round_id: str) -> tuple[str, str | None]:
        """A round's status and result as stored; JournalError if this table has no such round."""
        row = self._conn.execute(
            "SELECT status, result FROM rounds WHERE round_id = ? AND table_id = ?",
            (round_id, self._file.table_id),
        ).fetchone()
        if row is None:
            raise JournalError(f"no round {round_id} at table {self._file.table_id}")
        return str(row[0]), row[1]

    def void_settled_round(
        self,
        round_id: str,
        reason: str,
        result: Mapping[str, Any] | BaseModel,
        outbox: Sequence[OutboxMessage] = (),
    ) -> list[OutboxRow]:
        """Void a round that was already settled (the dealer voided it afterwards). The settled
        result is kept as an event of the round, so the audit trail shows both."""
        status, settled = self._round_of_table(round_id)
        if status != RoundStatus.SETTLED:
            raise JournalError(f"round {round_id} is {status}, not settled: close it instead")
        if settled is not None:
            self.record_event("settled_result_voided", json.loads(settled), round_id)
        text = _event_payload(result)
        self._conn.execute(
            "UPDATE rounds SET status = ?, reason = ?, result = ?, closed_at = ? "
            "WHERE round_id = ?",
            (RoundStatus.VOID.value, reason, text, self._now, round_id),
        )
        self._seal(round_id, RoundStatus.VOID.value, reason, text)
        return [
            self.enqueue(m.topic, m.payload, m.qos, m.retain, round_id=round_id) for m in outbox
        ]

    def delete_archived(
        self,
        round_ids: Sequence[str],
        event_ids: Sequence[int],
        archive: tuple[str, str] | None = None,
        *,
        before: str,
    ) -> None:
        """Remove rounds (with their events) and loose events that an archive file now holds
        (``archive``: its name and SHA-256), all older than ``before`` (ISO), itself at least
        :data:`MIN_RETENTION` before this transaction. Only the oldest rounds go: the rounds
        removed must be this table's lowest round numbers (a prefix), closed, with no message
        waiting for the broker, each opened before ``before``. The chained ``archived`` event
        names the rows, the round numbers, the cutoff, the archive and, for each run of removed
        rows, the last one's link, so the row after the gap is still checked (docs/audit.md)."""
        conn = self._conn
        if before > iso(self._time - MIN_RETENTION):
            raise JournalError(
                f"cutoff {before} is less than {MIN_RETENTION.days} day(s) before now: "
                "retention removes only older rounds"
            )
        seqs, newest = self._removable_prefix(round_ids, before)
        for event_id in event_ids:
            row = conn.execute(
                "SELECT round_id, at, kind FROM events WHERE id = ?", (event_id,)
            ).fetchone()
            if row is None or row[0] is not None or row[1] >= before or row[2] == "archived":
                raise JournalError(f"event row {event_id} cannot be removed: not an old loose one")
        removed = [
            int(i)
            for r in round_ids
            for (i,) in conn.execute("SELECT id FROM events WHERE round_id = ?", (r,))
        ] + [int(e) for e in event_ids]
        runs = _ranges(sorted(removed))
        links = {
            str(last): link
            for _first, last in runs
            for (link,) in conn.execute("SELECT chain FROM events WHERE id = ?", (last,))
            if link is not None
        }
        conn.executemany("DELETE FROM events WHERE round_id = ?", [(r,) for r in round_ids])
        conn.executemany("DELETE FROM rounds WHERE round_id = ?", [(r,) for r in round_ids])
        conn.executemany(
            "DELETE FROM events WHERE id = ? AND round_id IS NULL", [(e,) for e in event_ids]
        )
        # The gap the rows leave in the hash chain is named, so an audit does not call it a
        # deletion (docs/audit.md).
        record: dict[str, Any] = {
            "rounds": len(round_ids),
            "event_ids": runs,
            "round_seqs": _ranges(seqs),
            "links": links,
            "before": before,
            "newest_opened_at": newest,
        }
        if archive is not None:
            record["archive"], record["sha256"] = archive
        self.record_event("archived", record)

    def _removable_prefix(self, round_ids: Sequence[str], before: str) -> tuple[list[int], str]:
        """The round numbers of ``round_ids`` (sorted) and the newest opening time among them,
        if they are this table's oldest rounds, closed, sent and opened before ``before``."""
        conn = self._conn
        seqs: list[int] = []
        newest = ""
        for round_id in round_ids:
            row = conn.execute(
                "SELECT status, seq, opened_at, "
                "(SELECT count(*) FROM outbox o WHERE o.round_id = r.round_id) "
                "FROM rounds r WHERE round_id = ? AND table_id = ?",
                (round_id, self._file.table_id),
            ).fetchone()
            if row is None or row[0] == RoundStatus.OPEN or row[3]:
                raise JournalError(f"round {round_id} cannot be removed: open or with messages")
            if row[2] >= before:
                raise JournalError(f"round {round_id} cannot be removed: opened after {before}")
            seqs.append(int(row[1]))
            newest = max(newest, str(row[2]))
        seqs.sort()
        oldest = [
            int(seq)
            for (seq,) in conn.execute(
                "SELECT seq FROM rounds WHERE table_id = ? ORDER BY seq LIMIT ?",
                (self._file.table_id, len(seqs)),
            )
        ]
        if seqs != oldest:
            raise JournalError(
                "only the oldest rounds can be removed: rounds "
                f"{', '.join(f'#{n}' for n in sorted(set(seqs) - set(oldest))[:5])} are not"
            )
        return seqs, newest

    def enqueue(
        self,
        topic: str,
        payload: Payload | PayloadBuilder,
        qos: Literal[0, 1, 2] = 1,
        retain: bool = False,
        *,
        round_id: str | None = None,
    ) -> OutboxRow:
        stamp = MessageStamp(
            msg_id=self._file.new_id(),
            seq=self._counter("msg_seq"),
            table_id=self._file.table_id,
            at=self._now,
            time=self._time.astimezone(UTC),
        )
        value = payload(stamp) if callable(payload) else payload
        if isinstance(value, bytes | str | BaseModel):
            data, canonical = _payload_bytes(value), False
        else:
            data, canonical = _canonical_bytes(value), True
        self._conn.execute(
            "INSERT INTO outbox (msg_id, table_id, seq, topic, payload, qos, retain, created_at, "
            "round_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                stamp.msg_id,
                stamp.table_id,
                stamp.seq,
                topic,
                data,
                qos,
                int(retain),
                stamp.at,
                round_id,
            ),
        )
        row = OutboxRow(
            stamp.msg_id,
            stamp.seq,
            stamp.table_id,
            topic,
            data,
            qos,
            retain,
            stamp.at,
            0,
            False,
            round_id,
            canonical,
        )
        self.queued.append(row)
        return row


# --- the file and what the parts share -------------------------------------------------------


def _open_round_id(conn: sqlite3.Connection, table_id: str) -> str | None:
    row = conn.execute(
        "SELECT round_id FROM rounds WHERE table_id = ? AND status = 'open'", (table_id,)
    ).fetchone()
    return None if row is None else str(row[0])


_ROUND_COLUMNS = "round_id, table_id, seq, opened_at, closed_at, status, reason, result"


def _round_record(row: Sequence[Any], events: tuple[EventRecord, ...] = ()) -> RoundRecord:
    return RoundRecord(
        round_id=row[0],
        table_id=row[1],
        seq=row[2],
        opened_at=row[3],
        closed_at=row[4],
        status=RoundStatus(row[5]),
        reason=row[6],
        result=None if row[7] is None else json.loads(row[7]),
        events=events,
    )


#: The journal's page cache, KiB (SQLite's ``cache_size`` as a negative number; its default is
#: 2,000 KiB). A table appends and reads back what it wrote last (the round, the outbox's newest
#: messages): the working set is a few pages, so a cache a quarter of the default costs nothing
#: in speed and keeps 1.5 MB of a table's memory (issue 42, ``bench/footprint.py``).
CACHE_KIB = -500

#: How the journal opens its connection: ``sqlite3.connect`` or one with its arguments.
Connect = Callable[..., sqlite3.Connection]


@dataclass(slots=True)
class Commits:
    """The journal's commits by kind (docs/performance.md: the syncs a round costs)."""

    durable: int = 0
    relaxed: int = 0
    switches: int = 0  # changes of ``synchronous`` between a relaxed and a durable commit
    #: Told how long each COMMIT took (seconds) and whether it waited for the disk (the
    #: metrics' fsync time); called in the committing thread, after the commit.
    timed: Callable[[bool, float], None] | None = None


class JournalFile:
    """The journal's one connection and what its parts share over it: the table, the clock, the
    lock that serialises callers from different threads, the id source, the commits, the hash
    chain's head and :meth:`transaction`. Opening creates or migrates the schema; a file
    written by a newer schema is refused."""

    def __init__(
        self,
        path: str,
        table_id: str,
        clock: Clock,
        synchronous: Synchronous,
        connect: Connect,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise ValueError(f"synchronous must be FULL or NORMAL, not {synchronous!r}")
        self.path = path
        self.table_id = table_id
        self.clock = clock
        self.lock = threading.RLock()
        self.commits = Commits()
        #: Told of the messages of each transaction once it has committed (the publisher).
        self.listeners: list[Callable[[list[OutboxRow]], None]] = []
        #: The newest event's link, which the next event's is made from (``record_event``);
        #: a transaction that rolls back puts it back.
        self.chain_head = ""
        #: The newest event id this connection wrote or found (the next event's is one more,
        #: ``AUTOINCREMENT``); a transaction that rolls back puts it back too.
        self.last_event_id = 0
        self._ulid = _UlidSource(clock)
        self._in_transaction = False
        self._synchronous: Synchronous = synchronous
        self._relaxed = False
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE) below.
        self._conn: sqlite3.Connection | None = connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=10.0
        )
        try:
            self._setup(synchronous)
            self.chain_head = self._read_chain_head()
            self.last_event_id = self._read_last_event_id()
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    def _setup(self, synchronous: Synchronous) -> None:
        conn = self.connection
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode != "wal" and self.path != ":memory:":
            raise JournalError(f"cannot put {self.path} in WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute(f"PRAGMA cache_size = {CACHE_KIB}")
        with self.transaction():
            version = self._schema_version(conn)
            if version > SCHEMA_VERSION:
                raise JournalError(
                    f"{self.path} has journal schema {version}; this version reads up to "
                    f"{SCHEMA_VERSION}"
                )
            while version < SCHEMA_VERSION:
                MIGRATIONS[version](conn)
                version += 1
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (str(version),),
                )

    def _read_chain_head(self) -> str:
        row = self.connection.execute(
            "SELECT chain FROM events WHERE chain IS NOT NULL ORDER BY id DESC LIMIT 1"
        ).fetchone()
        return "" if row is None else str(row[0])

    def _read_last_event_id(self) -> int:
        """The newest event id ever given (``sqlite_sequence``: an archived newest is still
        counted, AUTOINCREMENT never gives an id twice)."""
        row = self.connection.execute(
            "SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0), "
            "COALESCE((SELECT max(id) FROM events), 0))"
        ).fetchone()
        return int(row[0])

    @staticmethod
    def _schema_version(conn: sqlite3.Connection) -> int:
        has_meta = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
        ).fetchone()
        if not has_meta:
            return 0
        row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0]) if row else 0

    @property
    def connection(self) -> sqlite3.Connection:
        """The open connection (the parts' queries run on it, under :attr:`lock`)."""
        if self._conn is None:
            raise JournalError("the journal is closed")
        return self._conn

    def new_id(self) -> str:
        """An id unique across restarts and tables: ``"<table_id>-<ULID>"``, time-ordered."""
        return f"{self.table_id}-{self._ulid()}"

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[Transaction]:
        """:meth:`Journal.transaction`."""
        with self.lock:
            if self._in_transaction:
                raise JournalError("transactions do not nest")
            conn = self.connection
            relaxed = not durable and self._synchronous == "FULL"
            if relaxed != self._relaxed:
                conn.execute(f"PRAGMA synchronous = {'NORMAL' if relaxed else self._synchronous}")
                self._relaxed = relaxed
                self.commits.switches += 1
            if relaxed:
                self.commits.relaxed += 1
            else:
                self.commits.durable += 1
            head, last_event = self.chain_head, self.last_event_id
            conn.execute("BEGIN IMMEDIATE")
            self._in_transaction = True
            try:
                tx = Transaction(self)
                yield tx
                started = time.perf_counter()
                conn.execute("COMMIT")
                timed = self.commits.timed
                if timed is not None:
                    timed(not relaxed, time.perf_counter() - started)
            except BaseException:
                self.chain_head = head  # nothing of the transaction was kept
                self.last_event_id = last_event
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._in_transaction = False
            if tx.queued:
                self._committed(tx.queued)

    def _committed(self, rows: list[OutboxRow]) -> None:
        """Hand the messages a transaction queued to the listeners, after its commit: a
        listener's failure is logged, never the commit's (it is on file; the drain reads it)."""
        for listener in self.listeners:
            try:
                listener(rows)
            except Exception as exc:
                log.error("outbox_listener_failed", error=f"{type(exc).__name__}: {exc}")


# --- the journal's parts, by role ------------------------------------------------------------


class JournalRounds:
    """The rounds as the table starts from them: the one still open, the next round's number,
    and voiding what a crash left open (``journal.rounds``)."""

    def __init__(self, file: JournalFile) -> None:
        self._file = file

    def next_seq(self) -> int:
        """The number the next round of this table will get (to seed the state machine)."""
        file = self._file
        with file.lock:
            row = file.connection.execute(
                "SELECT value FROM meta WHERE key = ?", (f"round_seq/{file.table_id}",)
            ).fetchone()
        return (int(row[0]) if row else 0) + 1

    def open_id(self) -> str | None:
        """The id of this table's open round, if any."""
        with self._file.lock:
            return _open_round_id(self._file.connection, self._file.table_id)

    def recover(
        self,
        reason: str = "restart",
        on_void: Callable[[VoidedRound], Sequence[OutboxMessage]] | None = None,
    ) -> list[str]:
        """Void every round of this table still open (a crash mid-round), with ``reason``.

        ``on_void`` returns the messages announcing each voided round; they are queued in the
        same transaction. Returns the voided round ids, oldest first.
        """
        file = self._file
        with file.transaction() as tx:
            rows = file.connection.execute(
                "SELECT round_id, seq, opened_at FROM rounds "
                "WHERE table_id = ? AND status = 'open' ORDER BY seq",
                (file.table_id,),
            ).fetchall()
            for round_id, seq, opened_at in rows:
                messages: Sequence[OutboxMessage] = ()
                if on_void is not None:
                    messages = on_void(
                        VoidedRound(round_id, file.table_id, seq, opened_at, tx.now, reason)
                    )
                tx.close_round(round_id, RoundStatus.VOID, reason, None, messages)
            return [row[0] for row in rows]


class JournalOutbox:
    """The messages waiting for the broker, as the MQTT publisher drains them
    (``journal.outbox``): each in its own short transaction. ``sent_kept`` acknowledged ones
    are kept for a consumer's ``resend``."""

    def __init__(self, file: JournalFile, sent_kept: int) -> None:
        self._file = file
        self._sent_kept = sent_kept

    def pending(self, limit: int = 100) -> list[OutboxRow]:
        """Unacknowledged messages of this table, oldest (lowest seq) first."""
        file = self._file
        with file.lock:
            rows = file.connection.execute(
                "SELECT msg_id, seq, table_id, topic, payload, qos, retain, created_at, attempts, "
                "replay, round_id FROM outbox WHERE table_id = ? ORDER BY seq LIMIT ?",
                (file.table_id, limit),
            ).fetchall()
        return [
            OutboxRow(
                r[0], r[1], r[2], r[3], bytes(r[4]), r[5], bool(r[6]), r[7], r[8], bool(r[9]), r[10]
            )
            for r in rows
        ]

    def count(self) -> int:
        """How many messages wait for the broker (the outbox is small: rows leave when sent)."""
        file = self._file
        with file.lock:
            row = file.connection.execute(
                "SELECT count(*) FROM outbox WHERE table_id = ?", (file.table_id,)
            ).fetchone()
        return int(row[0])

    def on_commit(self, listener: Callable[[list[OutboxRow]], None]) -> Callable[[], None]:
        """Call ``listener`` with the messages each transaction queued, in order, right after it
        commits, in the thread that committed (the daemon's loop, for a round). Returns the
        function that removes it. The publisher sends them without reading them back."""
        listeners = self._file.listeners
        listeners.append(listener)
        return lambda: listeners.remove(listener)

    def depth(self) -> tuple[int, str | None]:
        """How many messages wait and when the oldest was queued (None: none waits)."""
        file = self._file
        with file.lock:
            row = file.connection.execute(
                "SELECT count(*), min(created_at) FROM outbox WHERE table_id = ?",
                (file.table_id,),
            ).fetchone()
        return int(row[0]), row[1]

    def pending_through(self, limit: int = 100) -> tuple[list[OutboxRow], int]:
        """:meth:`pending` and :meth:`message_seq` read together: with no row pending, every
        message through that sequence number has been acknowledged."""
        with self._file.lock:
            return self.pending(limit), self.message_seq()

    def message_seq(self) -> int:
        """The last message sequence number this table assigned (0 before the first), cheaply:
        one row of ``meta``, not the counts of :meth:`JournalHistory.stats`."""
        file = self._file
        with file.lock:
            row = file.connection.execute(
                "SELECT value FROM meta WHERE key = ?", (f"msg_seq/{file.table_id}",)
            ).fetchone()
        return 0 if row is None else int(row[0])

    def ack(self, msg_id: str) -> bool:
        """The broker has the message: delete it. False if it was not pending."""
        with self._file.transaction():
            cur = self._file.connection.execute("DELETE FROM outbox WHERE msg_id = ?", (msg_id,))
            return cur.rowcount > 0

    def ack_many(self, msg_ids: Sequence[str]) -> int:
        """The broker has all of these: delete them in one transaction (one disk sync for a
        whole window of acknowledged messages). Returns how many were pending."""
        if not msg_ids:
            return 0
        # Not durable: an acknowledgement lost in a power cut only resends the message, with
        # the same msg_id (consumers drop it), and the next durable commit makes it durable.
        with self._file.transaction(durable=False):
            conn, ids = self._file.connection, [(m,) for m in msg_ids]
            # Kept for a ``resend`` (docs/mqtt.md §3): the newest SENT_KEPT of them.
            conn.executemany(
                "INSERT OR REPLACE INTO sent (table_id, seq, msg_id, topic, payload, qos, retain, "
                "created_at) SELECT table_id, seq, msg_id, topic, payload, qos, retain, created_at "
                "FROM outbox WHERE msg_id = ?",
                ids,
            )
            cur = conn.executemany("DELETE FROM outbox WHERE msg_id = ?", ids)
            acked = cur.rowcount
            conn.execute(
                "DELETE FROM sent WHERE table_id = ?1 AND seq <= "
                "(SELECT max(seq) FROM sent WHERE table_id = ?1) - ?2",
                (self._file.table_id, self._sent_kept),
            )
            return acked

    def requeue(self, first: int, last: int) -> tuple[int, int | None]:
        """A consumer lost seqs ``first``..``last`` downstream of the broker (``resend``): the
        kept copies of those already acknowledged go back into the outbox, marked replayed (the
        same msg_id and envelope, so a consumer that has one drops it). Returns how many were
        queued, and the oldest seq still kept (None when none is)."""
        file = self._file
        with file.transaction(durable=False):
            conn = file.connection
            cur = conn.execute(
                "INSERT OR IGNORE INTO outbox (msg_id, table_id, seq, topic, payload, qos, retain, "
                "created_at, replay) SELECT msg_id, table_id, seq, topic, payload, qos, retain, "
                "created_at, 1 FROM sent WHERE table_id = ? AND seq BETWEEN ? AND ?",
                (file.table_id, first, last),
            )
            queued = cur.rowcount
            row = conn.execute(
                "SELECT min(seq) FROM sent WHERE table_id = ?", (file.table_id,)
            ).fetchone()
        return queued, (None if row is None or row[0] is None else int(row[0]))

    def mark_attempts(self, msg_ids: Sequence[str]) -> None:
        """Count one failed send attempt on each of these messages, in one transaction."""
        if not msg_ids:
            return
        # Not durable: a count for the supervisor, not a result.
        with self._file.transaction(durable=False) as tx:
            self._file.connection.executemany(
                "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = ? WHERE msg_id = ?",
                [(tx.now, m) for m in msg_ids],
            )

    def mark_attempt(self, msg_id: str) -> int:
        """Count one send attempt; returns the attempts so far (0 if the message is gone)."""
        with self._file.transaction() as tx:
            conn = self._file.connection
            conn.execute(
                "UPDATE outbox SET attempts = attempts + 1, last_attempt_at = ? WHERE msg_id = ?",
                (tx.now, msg_id),
            )
            row = conn.execute("SELECT attempts FROM outbox WHERE msg_id = ?", (msg_id,)).fetchone()
            return 0 if row is None else int(row[0])

    def mark_replay(self) -> int:
        """Flag every pending message of this table as replayed (call on (re)connect, before
        draining the backlog); returns how many were flagged."""
        with self._file.transaction():
            cur = self._file.connection.execute(
                "UPDATE outbox SET replay = 1 WHERE table_id = ? AND replay = 0",
                (self._file.table_id,),
            )
            return cur.rowcount


class JournalHistory:
    """The record read back (``journal.history``): rounds with their events, counts for the
    supervisor, the commands and deals seen lately, the hash chain's head."""

    def __init__(self, file: JournalFile) -> None:
        self._file = file

    @property
    def table_id(self) -> str:
        return self._file.table_id

    def get_round(self, round_id: str) -> RoundRecord | None:
        """A round with all its events in order (None if unknown)."""
        with self._file.lock:
            conn = self._file.connection
            row = conn.execute(
                f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE round_id = ?", (round_id,)
            ).fetchone()
            if row is None:
                return None
            events = tuple(
                EventRecord(e[0], e[1], e[2], e[3], json.loads(e[4]))
                for e in conn.execute(
                    "SELECT id, round_id, at, kind, payload FROM events WHERE round_id = ? "
                    "ORDER BY id",
                    (round_id,),
                )
            )
        return _round_record(row, events)

    def recent_rounds(self, limit: int = 50, offset: int = 0) -> list[RoundRecord]:
        """This table's rounds, newest first (without their events)."""
        file = self._file
        with file.lock:
            rows = file.connection.execute(
                f"SELECT {_ROUND_COLUMNS} FROM rounds WHERE table_id = ? "
                "ORDER BY seq DESC LIMIT ? OFFSET ?",
                (file.table_id, limit, offset),
            ).fetchall()
        return [_round_record(r) for r in rows]

    def round_counts_by_hour(self, since: datetime | None = None) -> list[HourCount]:
        """Rounds opened per UTC hour (oldest first), by status."""
        since_text = iso(since) if since is not None else ""
        file = self._file
        with file.lock:
            rows = file.connection.execute(
                "SELECT substr(opened_at, 1, 13) AS hour, status, count(*) FROM rounds "
                "WHERE table_id = ? AND opened_at >= ? GROUP BY hour, status ORDER BY hour",
                (file.table_id, since_text),
            ).fetchall()
        hours: dict[str, dict[str, int]] = {}
        for hour, status, count in rows:
            hours.setdefault(hour, {})[status] = count
        return [HourCount(f"{h}:00Z", sum(s.values()), s) for h, s in hours.items()]

    def stats(self) -> JournalStats:
        """Counts for the supervisor page and audits."""
        table_id = self._file.table_id
        with self._file.lock:
            conn = self._file.connection
            by_status = dict(
                conn.execute(
                    "SELECT status, count(*) FROM rounds WHERE table_id = ? GROUP BY status",
                    (table_id,),
                ).fetchall()
            )
            events = conn.execute(
                "SELECT count(*) FROM events e LEFT JOIN rounds r USING (round_id) "
                "WHERE e.round_id IS NULL OR r.table_id = ?",
                (table_id,),
            ).fetchone()[0]
            pending, oldest = conn.execute(
                "SELECT count(*), min(created_at) FROM outbox WHERE table_id = ?", (table_id,)
            ).fetchone()
            last = conn.execute(
                "SELECT max(opened_at) FROM rounds WHERE table_id = ?", (table_id,)
            ).fetchone()[0]
            counters = dict(
                conn.execute(
                    "SELECT key, value FROM meta WHERE key IN (?, ?)",
                    (f"msg_seq/{table_id}", f"round_seq/{table_id}"),
                ).fetchall()
            )
        return JournalStats(
            rounds=sum(by_status.values()),
            by_status=by_status,
            events=events,
            outbox_pending=pending,
            oldest_pending_at=oldest,
            last_round_at=last,
            message_seq=int(counters.get(f"msg_seq/{table_id}", 0)),
            round_seq=int(counters.get(f"round_seq/{table_id}", 0)),
        )

    def chain_position(self) -> tuple[int, str] | None:
        """The newest chained event: its row id and chain hash (a checkpoint's content)."""
        with self._file.lock:
            row = self._file.connection.execute(
                "SELECT id, chain FROM events WHERE chain IS NOT NULL ORDER BY id DESC LIMIT 1"
            ).fetchone()
        return (int(row[0]), str(row[1])) if row else None

    def recent_command_ids(self, since: str) -> list[tuple[str, str]]:
        """(request id, time) of the commands journaled at or after ``since`` (ISO): a signed
        command's request id may not come again, across a restart too."""
        with self._file.lock:
            rows = self._file.connection.execute(
                "SELECT payload, at FROM events WHERE kind >= 'command.' AND kind < 'command/' "
                "AND at >= ?",
                (since,),
            ).fetchall()
        out = []
        for payload, at in rows:
            request_id = json.loads(payload).get("request_id")
            if isinstance(request_id, str) and request_id:
                out.append((request_id, str(at)))
        return out

    def recent_deals(self, limit: int = 20_000) -> list[tuple[int, str, str]]:
        """(round number, shuffle id, fingerprint) of this table's last ``limit`` complete deals
        (``deal_seen`` events, found by the ``events_kind`` index), oldest first: the table
        refuses a deal that repeats one."""
        file = self._file
        with file.lock:
            rows = file.connection.execute(
                "SELECT r.seq, e.payload FROM events e JOIN rounds r USING (round_id) "
                "WHERE e.kind = 'deal_seen' AND r.table_id = ? ORDER BY e.id DESC LIMIT ?",
                (file.table_id, limit),
            ).fetchall()
        deals = []
        for seq, payload in reversed(rows):
            data = json.loads(payload)
            deals.append((int(seq), str(data.get("shuffle_id", "")), str(data["fingerprint"])))
        return deals


class JournalKept:
    """What a start reads back (``journal.kept``): the table state kept across restarts (kept
    by :meth:`Transaction.remember`; for :data:`KEPT_STATE`, its last chained record is what
    counts) and a journal fault the process did not live to finish."""

    def __init__(self, file: JournalFile) -> None:
        self._file = file

    def remembered(self, name: str) -> Any:
        """What :meth:`Transaction.remember` kept under ``name`` (None if nothing): for kept
        state, its last chained record (``meta`` only for a journal from before those)."""
        recorded = self._recorded_state(name) if name in KEPT_STATE else _NOTHING
        if recorded is not _NOTHING:
            return recorded
        return self._meta_value(name)

    def chained(self, name: str) -> Any:
        """The last chained record of the kept state ``name``, never ``meta`` (None if there is
        none): what a start may trust where an edit of ``meta`` would matter."""
        recorded = self._recorded_state(name)
        return None if recorded is _NOTHING else recorded

    def edited(self) -> list[str]:
        """Kept state whose ``meta`` copy differs from its last chained record: ``meta`` was
        edited outside the table (the table goes by the chained record)."""
        edited = []
        for name in sorted(KEPT_STATE):
            recorded = self._recorded_state(name)
            if recorded is not _NOTHING and recorded != self._meta_value(name):
                edited.append(name)
        return edited

    def _meta_value(self, name: str) -> Any:
        with self._file.lock:
            row = self._file.connection.execute(
                "SELECT value FROM meta WHERE key = ?", (f"{name}/{self._file.table_id}",)
            ).fetchone()
        return None if row is None else json.loads(row[0])

    def _recorded_state(self, name: str) -> Any:
        with self._file.lock:
            row = self._file.connection.execute(
                "SELECT payload FROM events WHERE kind = 'state_kept' AND chain IS NOT NULL "
                "AND json_extract(payload, '$.name') = ? ORDER BY id DESC LIMIT 1",
                (name,),
            ).fetchone()
        return _NOTHING if row is None else json.loads(row[0]).get("value")

    def unfinished_fault(self) -> tuple[datetime, str, list[str]] | None:
        """The last ``journal_fault_began`` with no ``journal_fault`` (its end) after it: when it
        began, why, and the shuffle ids of the deals seen during it (docs/faults.md)."""
        with self._file.lock:
            conn = self._file.connection
            began = conn.execute(
                "SELECT id, payload FROM events WHERE kind = 'journal_fault_began' "
                "ORDER BY id DESC LIMIT 1"
            ).fetchone()
            if began is None:
                return None
            ended = conn.execute(
                "SELECT 1 FROM events WHERE kind = 'journal_fault' AND id > ? LIMIT 1", (began[0],)
            ).fetchone()
            if ended is not None:
                return None
            deals = [
                str(json.loads(p).get("shuffle_id", ""))
                for (p,) in conn.execute(
                    "SELECT payload FROM events WHERE kind = 'deal_seen_in_fault' AND id > ? "
                    "ORDER BY id",
                    (began[0],),
                )
            ]
        record = json.loads(began[1])
        since = datetime.fromisoformat(str(record.get("since")))
        return since, str(record.get("detail", "")), deals


class JournalUpkeep:
    """The file's upkeep (``journal.upkeep``): SQLite's integrity check, the online backup,
    and what retention may archive (controller/journal/maintenance.py archives it; the rows go
    through :meth:`Transaction.delete_archived`)."""

    def __init__(self, file: JournalFile) -> None:
        self._file = file

    def integrity_check(self) -> list[str]:
        """SQLite's integrity check: ``["ok"]`` for a sound file."""
        with self._file.lock:
            conn = self._file.connection
            return [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]

    def backup(self, destination: str | os.PathLike[str]) -> None:
        """A consistent copy of the journal while it is in use (SQLite online backup)."""
        with self._file.lock:
            target = sqlite3.connect(os.fspath(destination))
            try:
                self._file.connection.backup(target)
            finally:
                target.close()

    def archive_candidates(
        self, before: str, limit: int
    ) -> tuple[list[RoundRecord], list[EventRecord]]:
        """This table's oldest rounds (a prefix, by round number) that are closed, opened before
        ``before`` (ISO time) and whose messages have all been sent, with their events — up to
        the first that is not, and at most ``limit``; and loose events (of no round) older than
        ``before``, at most ``10 × limit``, never an ``archived`` event nor the last
        ``state_kept`` record of a name (what a start trusts)."""
        with self._file.lock:
            conn = self._file.connection
            rows = conn.execute(
                f"SELECT {_ROUND_COLUMNS}, status = 'open' OR opened_at >= ? "
                "OR EXISTS (SELECT 1 FROM outbox o WHERE o.round_id = r.round_id) "
                "FROM rounds r WHERE table_id = ? ORDER BY seq LIMIT ?",
                (before, self._file.table_id, limit),
            ).fetchall()
            prefix = list(itertools.takewhile(lambda row: not row[-1], rows))
            events: dict[str, list[EventRecord]] = {}
            for row in prefix:
                events[row[0]] = [
                    EventRecord(e[0], e[1], e[2], e[3], json.loads(e[4]))
                    for e in conn.execute(
                        "SELECT id, round_id, at, kind, payload FROM events WHERE round_id = ? "
                        "ORDER BY id",
                        (row[0],),
                    )
                ]
            loose = [
                EventRecord(e[0], e[1], e[2], e[3], json.loads(e[4]))
                for e in conn.execute(
                    "SELECT id, round_id, at, kind, payload FROM events "
                    "WHERE round_id IS NULL AND at < ? AND kind != 'archived' "
                    "AND id NOT IN (SELECT max(id) FROM events WHERE kind = 'state_kept' "
                    "GROUP BY json_extract(payload, '$.name')) "
                    "ORDER BY id LIMIT ?",
                    (before, 10 * limit),
                )
            ]
        return [_round_record(r[:-1], tuple(events[r[0]])) for r in prefix], loose

    def pending_old_rounds(self, before: str) -> int:
        """Closed rounds opened before ``before`` kept because their messages still wait."""
        with self._file.lock:
            row = self._file.connection.execute(
                "SELECT count(*) FROM rounds r WHERE table_id = ? AND status != 'open' "
                "AND opened_at < ? "
                "AND EXISTS (SELECT 1 FROM outbox o WHERE o.round_id = r.round_id)",
                (self._file.table_id, before),
            ).fetchone()
        return int(row[0])


# --- the journal -----------------------------------------------------------------------------


class Journal:
    """The journal of one table in the SQLite file at ``path`` (``":memory:"`` for tests): the
    owner of its one connection, and its parts by role, each a class over that connection:

    - :meth:`transaction`: the one write API (:class:`Transaction`); :meth:`new_round_id` ids
    - ``rounds`` (:class:`JournalRounds`): the open round, the next number, ``recover``
    - ``outbox`` (:class:`JournalOutbox`): what waits for the broker, acknowledged, resent
    - ``history`` (:class:`JournalHistory`): rounds, counts, commands and deals, the chain's head
    - ``kept`` (:class:`JournalKept`): kept state and an unfinished fault, read back at start
    - ``upkeep`` (:class:`JournalUpkeep`): integrity, backup, what retention may archive

    ``clock`` gives every timestamp (timezone-aware; stored as UTC ISO 8601). Opening creates or
    migrates the schema; a file written by a newer schema is refused. ``connect`` opens the
    connection (``sqlite3.connect``'s arguments; a test may keep the connection it returns).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        table_id: str,
        *,
        clock: Clock = utc_now,
        synchronous: Synchronous = "FULL",
        connect: Connect = sqlite3.connect,
    ) -> None:
        self._file = JournalFile(os.fspath(path), table_id, clock, synchronous, connect)
        self.path = self._file.path
        self.table_id = table_id
        self.clock = clock
        self.commits = self._file.commits
        self.rounds = JournalRounds(self._file)
        self.outbox = JournalOutbox(self._file, SENT_KEPT)
        self.history = JournalHistory(self._file)
        self.kept = JournalKept(self._file)
        self.upkeep = JournalUpkeep(self._file)

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        table_id: str,
        *,
        clock: Clock = utc_now,
        synchronous: Synchronous = "FULL",
        connect: Connect = sqlite3.connect,
    ) -> Self:
        return cls(path, table_id, clock=clock, synchronous=synchronous, connect=connect)

    def close(self) -> None:
        """Close the connection (idempotent); the WAL is checkpointed into the main file."""
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[Transaction]:
        """One ``BEGIN IMMEDIATE`` … ``COMMIT``: everything done through the yielded
        :class:`Transaction` is committed together, or, if the block raises, not at all.

        ``durable=False`` commits without waiting for the disk (``synchronous = NORMAL`` for this
        transaction): a crash of the program loses nothing, a power cut may lose it — and every
        other such commit since the last durable one, which makes them all durable (the WAL is
        synced as a whole). For what a restart would void anyway: the packets of an open round,
        a message's acknowledgement (resent, same msg_id)."""
        with self._file.transaction(durable=durable) as tx:
            yield tx

    def new_round_id(self) -> str:
        """A round id unique across restarts and tables: ``"<table_id>-<ULID>"``, time-ordered
        (the journal's id source: alarms and messages get theirs from it too)."""
        return self._file.new_id()
