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

import time
from collections.abc import Mapping, Sequence

from controller.messages import (
    AlarmAckPayload,
    AlarmPayload,
    DevicePayload,
    PlayerPayload,
    RoundPayload,
    StatusPayload,
)
from pit import judge
from pit.admission import Dropped
from pit.awaiting import TAKE, AwaitingKeys
from pit.db import (
    Database,
    Incoming,
    Limits,
    Outcome,
    Shifts,
    database_down,
    migrate,
    parse_time,
    redact,
)
from pit.judge import PAYLOADS, Message, Refused, escaped
from pit.keys import FeedKeys
from pit.pages import STATUS_GAP_GRACE, PageQueries
from pit.projections import THEORETICAL, Projections, round_summary
from pit.record import RecordChecks
from pit.writes import MESSAGES, Batch, BatchState, TableRow

#: A message as the batch found it: the table its topic names, the rest of the topic, and the
#: judged message, why it was refused, or None (a command or a reply: not the feed).
Judged = tuple[str, str, Message | Refused | None]

__all__ = [
    "PAYLOADS",
    "STATUS_GAP_GRACE",
    "THEORETICAL",
    "Incoming",
    "Limits",
    "Outcome",
    "Shifts",
    "Store",
    "database_down",
    "migrate",
    "parse_time",
    "redact",
    "round_summary",
]


class Store:
    """The ingest's store (see the module's text), by composition: its connection (``db``,
    ``pit.db``), the batch it shares with its parts (``batch``, ``pit.writes``), its record
    checks (``record``, ``pit.record``), its projections (``projections``,
    ``pit.projections``), and the page's queries on the same connection (``pages``: for the
    CLI and the tests; the page itself reads through a store of its own, ``pit.pagedb``)."""

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
        self.limits = limits or Limits()
        self.db = Database(url)
        #: what the batch knows and has still to write (issue 31: each table's row read once a
        #: batch, locked in table order, changed in memory; rows written once a batch)
        self.batch = Batch(self.db)
        self.record = RecordChecks(
            self.batch, self.limits, feed_keys if feed_keys is not None else FeedKeys(),
            checkpoint_keys, default_checkpoint_key, root,
        )  # fmt: skip
        self.projections = Projections(self.record, shifts or Shifts(["06:00", "14:00", "22:00"]))
        self.pages = PageQueries(self.db, self.limits)
        #: messages refused only for a key not registered yet (``pit.awaiting``), and whether
        #: the next batch looks for those whose key now is (at start: the file may have changed)
        self.awaiting = AwaitingKeys(self.db.all, self.db.x)
        self._rejudge = True

    @property
    def feed_keys(self) -> FeedKeys:
        """The tables' registered feed keys: a table without any has every message refused."""
        return self.record.feed_keys

    def close(self) -> None:
        self.db.close()

    def ingest(
        self, batch: Sequence[Incoming], dropped: Mapping[str, Dropped] | None = None
    ) -> Outcome:
        """Store a batch in one transaction, each message judged alone (see the module's text
        and :meth:`_batch`), after the messages that waited for a key now registered; with it,
        what admission dropped over its tables' budgets (``pit.admission``: counted, one
        ``flood`` alarm a table). Raises only when the database itself is down."""
        if self.feed_keys.refresh():
            self._rejudge = True
        waiting = self.awaiting.due(self.feed_keys.for_table) if self._rejudge else []
        items = [*(item for _, item in waiting), *batch]
        judged = [self._judge(item) for item in items]  # before any lock is taken
        self.projections.new_tables(items)
        known = set(self.batch.known)
        try:
            with self.db.transaction():
                self.awaiting.taken([row_id for row_id, _ in waiting])
                out = self._batch(items, judged)
                if dropped:
                    self.record.dropped(dropped, out)
                self.record.reject_bursts(out, batch[-1].received_at if batch else time.time())
        except BaseException:
            self.batch.known = known  # rows made in the rolled-back transaction are gone
            raise
        finally:
            self.batch.state = BatchState()  # the locks end with the transaction
        self._rejudge = len(waiting) >= TAKE  # more to take with the next batch
        out.rejudged = len(waiting)
        return out

    def _batch(self, batch: Sequence[Incoming], judged: list[Judged]) -> Outcome:
        """The batch in one savepoint, no savepoint a message, its rows written at its end,
        one statement a database table (issue 31); if the database refuses any of it (a
        constraint, a value), the batch is rolled back to it and each message stored alone in
        its own savepoint (:meth:`_judged`), so the one refused is a reject and the others
        are stored."""
        known = set(self.batch.known)
        self.db.x("SAVEPOINT batch")
        try:
            out = self._run(batch, judged, alone=False)
        except Exception as exc:
            if database_down(exc):
                raise
            self.db.x("ROLLBACK TO SAVEPOINT batch")
            self.batch.known = known
            out = self._run(batch, judged, alone=True)
        self.db.x("RELEASE SAVEPOINT batch")
        return out

    def _run(self, batch: Sequence[Incoming], judged: list[Judged], *, alone: bool) -> Outcome:
        out = Outcome()
        self.batch.state = BatchState()
        self.projections.lock_rows(batch)
        self.projections.prefetch([m for _, _, m in judged if isinstance(m, Message)])
        for item, verdict in zip(batch, judged, strict=True):
            if alone:
                self._judged(item, verdict, out)
            else:
                self._one(item, verdict, out)
        now = batch[-1].received_at if batch else time.time()
        self.projections.write_seqs(now)
        for table_id, at in out.heard.items():  # once a table a batch, not a message
            self.batch.state.set(table_id, last_heard=at, silent_since=None)
        if self.limits.checkpoint_grace:
            self.record.waits_expired(now, out)
        self.projections.unreport_stored(out)
        self.batch.flush()
        return out

    def _judged(self, item: Incoming, verdict: Judged, out: Outcome) -> None:
        """One message in its own savepoint, its rows written in it: whatever it breaks in the
        database (but the database itself) rolls back to before it and makes it a reject."""
        part = Outcome()
        known, state = set(self.batch.known), self.batch.state.snapshot()
        self.db.x("SAVEPOINT msg")
        try:
            self._one(item, verdict, part)
            self.projections.unreport_stored(part)
            self.batch.flush()
        except Exception as exc:
            if database_down(exc):
                raise
            self.db.x("ROLLBACK TO SAVEPOINT msg")
            self.batch.known, self.batch.state = known, state
            part = Outcome()
            first = str(exc).splitlines()[0] if str(exc) else ""
            self.record.reject(
                item, f"refused by the database: {type(exc).__name__}: {first}", part
            )
        self.db.x("RELEASE SAVEPOINT msg")
        out.merge(part)

    def _judge(self, item: Incoming) -> Judged:
        """The message judged alone (``pit.judge.read``), before the batch touches the
        database."""
        topic_table, kind = self.record.topic(item.topic)
        if kind.startswith(("cmd/", "reply/")):
            return topic_table, kind, None
        try:
            msg = judge.read(
                item.payload,
                topic_table,
                self.feed_keys.for_table,
                max_bytes=self.limits.max_bytes,
                max_depth=self.limits.max_depth,
            )
        except Refused as exc:
            return topic_table, kind, exc
        except Exception as exc:  # as before the judging left the savepoint: a reject
            first = str(exc).splitlines()[0] if str(exc) else ""
            return (
                topic_table,
                kind,
                Refused(f"refused by the database: {type(exc).__name__}: {first}"),
            )
        return topic_table, kind, msg

    def _one(self, item: Incoming, verdict: Judged, out: Outcome) -> None:
        topic_table, kind, msg = verdict
        if msg is None:
            out.ignored += 1
            return
        if isinstance(msg, Refused):
            self.record.reject(item, msg.reason, out)
            if msg.key_id is not None and self.awaiting.keep(item, topic_table, msg.key_id):
                out.awaiting += 1  # judged again once its key is registered
            if msg.kind is not None:  # not the table's signed words: a finding on its topic
                self.record.signature_alarm(item, topic_table, kind, msg, out)
            return
        prefix = item.topic[: len(item.topic) - len(kind)] if kind else item.topic
        row = self.projections.table_row(msg.table_id, prefix, item.received_at)
        try:
            self._refuse_claims(msg, row, retained=item.retained)
        except Refused as exc:
            self.record.reject(item, exc.reason, out)
            if exc.kind is not None:
                self.record.record_alarm(msg.table_id, exc.kind, exc.reason, item.received_at, out)
            return
        if not self._store_message(msg, item, out):
            return
        self._heard(msg, item, row, out)

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
        """Why the message names another table's round or alarm, or None (the tables that
        have them: read up front, and the batch's own)."""
        p, state = msg.payload, self.batch.state
        if isinstance(p, RoundPayload | PlayerPayload):
            owners, ident, what = state.round_tables.get(p.round_id, set()), p.round_id, "round"
        elif isinstance(p, AlarmPayload | AlarmAckPayload) and p.alarm_id:
            owners, ident, what = state.alarm_tables.get(p.alarm_id, set()), p.alarm_id, "alarm"
        else:
            return None
        others = sorted(t for t in owners if t != msg.table_id)
        if not others:
            return None
        return f"names {escaped(others[0], 64)}'s {what} {escaped(ident, 80)}: refused"

    def _store_message(self, msg: Message, item: Incoming, out: Outcome) -> bool:
        """The message into the copy, once (``msg_id``); False for a duplicate."""
        state = self.batch.state
        if msg.msg_id in state.stored_ids:
            out.duplicates += 1
            return False
        sequenced = msg.schema != "paigow.status"
        state.add(MESSAGES, (
            msg.msg_id, msg.table_id, msg.seq, int(sequenced), msg.schema, item.topic,
            msg.data["time"], item.received_at, int(msg.replayed), msg.text,
        ))  # fmt: skip
        state.stored_ids.add(msg.msg_id)
        if sequenced:
            state.seqs.setdefault((msg.table_id, msg.seq), msg.msg_id)
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
            self.record.record_alarm(msg.table_id, "time_implausible", implausible, now, out)
        else:
            out.sent[msg.table_id] = max(out.sent.get(msg.table_id, ""), msg.data["time"])
        if isinstance(msg.payload, StatusPayload):
            self.projections.status(msg, row, item, out, apply=implausible is None)
            return
        if isinstance(msg.payload, DevicePayload) and implausible is None:
            # What the device is: a retained state says so too (pit/devices.py orders by seq).
            self.projections.devices.seen(msg.table_id, msg.seq, str(msg.data["time"]), msg.payload)
        if item.retained and (row.first_seq is None or msg.seq < row.first_seq):
            return  # an old retained device state never opens nor extends the copy
        self.projections.sequence(
            msg.table_id, msg.msg_id, msg.seq, row.first_seq, row.high_seq, item, out
        )
        if implausible is None:
            self.projections.project(msg, row, now, out)

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


def _is_will(msg: Message) -> bool:
    """An ``offline`` status: the last will is one, built when the table connected."""
    return isinstance(msg.payload, StatusPayload) and msg.payload.state == "offline"
