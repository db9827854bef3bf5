"""controller/journal/store.py: WAL, unique round ids, atomic close, outbox order, seq, recovery,
durability across kill -9."""

from __future__ import annotations

import json
import os
import selectors
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.journal import (
    SCHEMA_VERSION,
    Journal,
    JournalError,
    MessageStamp,
    OutboxMessage,
    RoundStatus,
    VoidedRound,
)

REPO = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2025, 3, 1, 20, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class once:
    """Each call in a transaction of its own (the journal's one write API is Transaction)."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            with self.journal.transaction() as tx:
                return getattr(tx, name)(*args, **kwargs)

        return call


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "journal.sqlite3"


@pytest.fixture
def journal(db: Path, clock: FakeClock) -> Iterator[Journal]:
    with Journal(db, "PG-07", clock=clock) as j:
        yield j


def message(topic: str = "t/round") -> OutboxMessage:
    """A message whose payload carries the id and seq the journal gives it."""
    return OutboxMessage(topic, lambda s: {"msg_id": s.msg_id, "seq": s.seq, "at": s.at})


def play_round(journal: Journal, status: str = "settled") -> str:
    round_id = journal.new_round_id()
    once(journal).open_round(round_id)
    once(journal).record_event("packet_dealt", {"index": 0, "cards": ["As", "JK"]}, round_id)
    once(journal).close_round(round_id, status, None, {"dealer": "Kh Qh"}, [message()])
    return round_id


def test_wal_mode_and_synchronous_full(db: Path) -> None:
    opened: list[sqlite3.Connection] = []

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        """The journal's own connection, kept: ``synchronous`` is a setting of a connection."""
        opened.append(sqlite3.connect(*args, **kwargs))
        return opened[-1]

    with Journal(db, "PG-07", connect=connect):
        raw = sqlite3.connect(db)
        try:
            assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            version = raw.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            assert version[0] == str(SCHEMA_VERSION)
        finally:
            raw.close()
        assert opened[0].execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    with Journal(db, "PG-07", synchronous="NORMAL", connect=connect):
        assert opened[1].execute("PRAGMA synchronous").fetchone()[0] == 1


def test_round_ids_unique_across_instances_and_tables(db: Path, clock: FakeClock) -> None:
    # A clock standing still is the hard case: uniqueness must not depend on time moving.
    a = Journal(db, "PG-07", clock=clock)
    b = Journal(db, "PG-07", clock=clock)
    c = Journal(db, "PG-08", clock=clock)
    ids = [j.new_round_id() for _ in range(500) for j in (a, b, c)]
    assert len(set(ids)) == len(ids)
    from_a = ids[0::3]
    assert from_a == sorted(from_a), "ids of one journal are time-ordered"
    assert all(i.startswith("PG-07-") for i in ids[0::3] + ids[1::3])
    assert all(i.startswith("PG-08-") for i in ids[2::3])
    clock.advance(1)
    assert a.new_round_id() > from_a[-1]
    for j in (a, b, c):
        j.close()


def test_round_lifecycle_and_queries(journal: Journal, clock: FakeClock) -> None:
    round_id = journal.new_round_id()
    assert journal.rounds.next_seq() == 1
    with pytest.raises(JournalError, match="next round number is 1, not 5"):
        once(journal).open_round(round_id, seq=5)
    assert once(journal).open_round(round_id, seq=1) == 1
    assert journal.rounds.next_seq() == 2
    assert journal.rounds.open_id() == round_id
    with pytest.raises(JournalError, match="still open"):
        once(journal).open_round(journal.new_round_id())
    clock.advance(1.5)
    event_id = once(journal).record_event("deal_started", {"device": "shuffler"}, round_id)
    once(journal).record_event("device_online", {"device": "rng"})
    clock.advance(30)
    [row] = once(journal).close_round(
        round_id, "settled", None, {"seats": {"1": "win"}}, [message()]
    )
    record = journal.history.get_round(round_id)
    assert record is not None
    assert record.status is RoundStatus.SETTLED and record.seq == 1
    assert record.opened_at == "2025-03-01T20:00:00.000Z"
    assert record.closed_at == "2025-03-01T20:00:31.500Z"
    assert record.result == {"seats": {"1": "win"}}
    assert [(e.id, e.kind, e.at) for e in record.events] == [
        (event_id, "deal_started", "2025-03-01T20:00:01.500Z"),
        (event_id + 2, "round_sealed", "2025-03-01T20:00:31.500Z"),  # its close, in the chain
    ]
    assert row.round_id == round_id and row.json()["msg_id"] == row.msg_id
    assert row.json()["at"] == row.created_at == "2025-03-01T20:00:31.500Z"
    with pytest.raises(JournalError, match="already closed"):
        once(journal).close_round(round_id, "void", "twice", None)
    with pytest.raises(JournalError, match="no round"):
        once(journal).record_event("x", {}, "PG-07-NOPE")
    assert journal.history.get_round("PG-07-NOPE") is None

    clock.advance(3600)
    second = play_round(journal, "dead")
    recent = journal.history.recent_rounds(limit=10)
    assert [r.round_id for r in recent] == [second, round_id]
    assert [r.round_id for r in journal.history.recent_rounds(limit=1, offset=1)] == [round_id]
    counts = journal.history.round_counts_by_hour()
    assert [(h.hour, h.total, h.by_status) for h in counts] == [
        ("2025-03-01T20:00Z", 1, {"settled": 1}),
        ("2025-03-01T21:00Z", 1, {"dead": 1}),
    ]
    stats = journal.history.stats()
    assert stats.rounds == 2 and stats.by_status == {"settled": 1, "dead": 1}
    assert stats.events == 3 + 2 and stats.outbox_pending == 2  # and the two rounds' seals
    assert stats.round_seq == 2 and stats.message_seq == 2


def test_close_round_is_atomic(journal: Journal) -> None:
    round_id = journal.new_round_id()
    once(journal).open_round(round_id)

    def broken(stamp: MessageStamp) -> dict[str, object]:
        raise RuntimeError("payload builder failed")

    with pytest.raises(RuntimeError):
        once(journal).close_round(
            round_id, "settled", None, {"x": 1}, [message(), OutboxMessage("t", broken)]
        )
    record = journal.history.get_round(round_id)
    assert record is not None and record.status is RoundStatus.OPEN and record.result is None
    assert journal.outbox.pending() == []
    assert journal.history.stats().message_seq == 0

    # A failure after the close inside a wider transaction also leaves nothing.
    with pytest.raises(KeyError), journal.transaction() as tx:
        tx.close_round(round_id, "settled", None, {"x": 1}, [message()])
        tx.record_event("after", {}, round_id)
        raise KeyError("crash")
    assert journal.history.get_round(round_id).status is RoundStatus.OPEN  # type: ignore[union-attr]
    assert journal.outbox.pending() == []

    [row] = once(journal).close_round(round_id, "settled", None, {"x": 1}, [message()])
    assert row.seq == 1, "a rolled-back transaction leaves no gap in the sequence"


def test_outbox_order_ack_attempts_replay(journal: Journal) -> None:
    rows = [once(journal).enqueue(f"t/{i}", {"i": i}, qos=1, retain=i == 0) for i in range(5)]
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5]
    pending = journal.outbox.pending()
    assert [r.topic for r in pending] == ["t/0", "t/1", "t/2", "t/3", "t/4"]
    assert pending[0].retain and not pending[1].retain
    assert pending[2].payload == b'{"i":2}'
    assert journal.outbox.ack(rows[1].msg_id) is True
    assert journal.outbox.ack(rows[1].msg_id) is False
    assert journal.outbox.mark_attempt(rows[0].msg_id) == 1
    assert journal.outbox.mark_attempt(rows[0].msg_id) == 2
    assert journal.outbox.mark_attempt("gone") == 0
    assert [r.seq for r in journal.outbox.pending(limit=2)] == [1, 3]
    assert journal.outbox.pending()[0].attempts == 2
    assert journal.outbox.mark_replay() == 4
    later = once(journal).enqueue("t/5", b"\x00raw")
    flags = {r.seq: r.replay for r in journal.outbox.pending()}
    assert flags == {1: True, 3: True, 4: True, 5: True, 6: False}
    assert later.payload == b"\x00raw"
    for r in journal.outbox.pending():
        journal.outbox.ack(r.msg_id)
    assert journal.outbox.pending() == []


def test_message_seq_has_no_gaps_across_reopen_and_is_per_table(db: Path, clock: FakeClock) -> None:
    seen: list[tuple[int, str]] = []
    for _ in range(3):
        with Journal(db, "PG-07", clock=clock) as j:
            for _ in range(4):
                row = once(j).enqueue("t", lambda s: {"seq": s.seq, "msg_id": s.msg_id})
                assert row.json() == {"seq": row.seq, "msg_id": row.msg_id}
                seen.append((row.seq, row.msg_id))
                j.outbox.ack(row.msg_id)
    assert [s for s, _ in seen] == list(range(1, 13))
    assert len({m for _, m in seen}) == 12
    with Journal(db, "PG-08", clock=clock) as other:
        assert once(other).enqueue("t", "x").seq == 1
        assert once(other).open_round(other.new_round_id()) == 1
    with Journal(db, "PG-07", clock=clock) as j:
        assert once(j).enqueue("t", "x").seq == 13
        assert j.outbox.pending()[0].table_id == "PG-07" and len(j.outbox.pending()) == 1


def test_seq_without_gaps_from_threads(journal: Journal) -> None:
    with ThreadPoolExecutor(max_workers=4) as pool:
        rows = list(pool.map(lambda i: once(journal).enqueue("t", {"i": i}), range(200)))
    assert sorted(r.seq for r in rows) == list(range(1, 201))
    assert [r.seq for r in journal.outbox.pending(limit=500)] == list(range(1, 201))


def test_recover_voids_open_rounds(db: Path, clock: FakeClock) -> None:
    with Journal(db, "PG-07", clock=clock) as before_crash:
        settled = play_round(before_crash)
        crashed = before_crash.new_round_id()
        once(before_crash).open_round(crashed)
        once(before_crash).record_event("packet_dealt", {"index": 0}, crashed)
    clock.advance(60)
    voided: list[VoidedRound] = []

    def announce(r: VoidedRound) -> list[OutboxMessage]:
        voided.append(r)
        return [
            OutboxMessage("t/round", {"round_id": r.round_id, "status": "void", "reason": r.reason})
        ]

    with Journal(db, "PG-07", clock=clock) as after:
        assert after.rounds.recover(on_void=announce) == [crashed]
        record = after.history.get_round(crashed)
        assert record is not None
        assert (record.status, record.reason) == (RoundStatus.VOID, "restart")
        assert record.closed_at == "2025-03-01T20:01:00.000Z"
        kinds = [e.kind for e in record.events]
        assert kinds == ["packet_dealt", "round_sealed"], "the round's events are kept, sealed"
        assert voided == [
            VoidedRound(
                crashed, "PG-07", 2, "2025-03-01T20:00:00.000Z", record.closed_at, "restart"
            )
        ]
        last = after.outbox.pending()[-1]
        assert last.round_id == crashed and last.json()["status"] == "void"
        assert after.history.get_round(settled).status is RoundStatus.SETTLED  # type: ignore[union-attr]
        assert after.rounds.recover() == []
        assert once(after).open_round(after.new_round_id()) == 3


def test_newer_schema_is_refused(db: Path) -> None:
    Journal(db, "PG-07").close()
    raw = sqlite3.connect(db)
    with raw:
        raw.execute(
            "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
        )
    raw.close()
    with pytest.raises(JournalError, match="schema"):
        Journal(db, "PG-07")


def test_backup_is_a_consistent_copy(journal: Journal, tmp_path: Path) -> None:
    round_id = play_round(journal)
    copy = tmp_path / "backup.sqlite3"
    journal.upkeep.backup(copy)
    with Journal(copy, "PG-07") as restored:
        assert restored.history.get_round(round_id) is not None
        assert restored.upkeep.integrity_check() == ["ok"]


CHILD = """
import sys
from controller.journal import Journal, OutboxMessage

journal = Journal(sys.argv[1], "PG-K")
i = 0
while True:
    round_id = journal.new_round_id()
    with journal.transaction() as tx:
        tx.open_round(round_id)
    with journal.transaction() as tx:
        tx.record_event("packet_dealt", {"index": i}, round_id)
    with journal.transaction() as tx:
        [row] = tx.close_round(
            round_id, "settled", None, {"i": i},
            [OutboxMessage("t/round", lambda s: {"msg_id": s.msg_id, "seq": s.seq})],
        )
    print(round_id, row.msg_id, row.seq, flush=True)
    i += 1
"""


def read_lines(proc: subprocess.Popen[bytes], count: int, timeout: float) -> bytes:
    """Wait (on the pipe, not on time) until the child printed ``count`` lines; returns the
    bytes read so far."""
    assert proc.stdout is not None
    buffer = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while buffer.count(b"\n") < count:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"child printed only {buffer!r}"
            if not selector.select(remaining):
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"child exited: {proc.wait()}"
            buffer += chunk
    return buffer


def test_kill_9_loses_no_committed_row(db: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(db)], stdout=subprocess.PIPE, env=env, cwd=REPO
    )
    try:
        head = read_lines(proc, 40, timeout=20)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert proc.stdout is not None
    # Everything the child printed before it died was printed after a commit returned.
    # A last line cut short by the kill is not a commit report.
    printed = (head + proc.stdout.read()).decode().split("\n")[:-1]
    committed = [line.split() for line in printed]
    proc.stdout.close()
    assert len(committed) >= 40

    with Journal(db, "PG-K") as journal:
        assert journal.upkeep.integrity_check() == ["ok"]
        for round_id, _, _ in committed:
            record = journal.history.get_round(round_id)
            assert record is not None and record.status is RoundStatus.SETTLED
        pending = {r.msg_id: r for r in journal.outbox.pending(limit=100_000)}
        for round_id, msg_id, seq in committed:
            assert pending[msg_id].seq == int(seq)
            assert pending[msg_id].round_id == round_id
            assert json.loads(pending[msg_id].payload) == {"msg_id": msg_id, "seq": int(seq)}
        seqs = sorted(r.seq for r in pending.values())
        assert seqs == list(range(1, len(seqs) + 1))
        # At most the round being dealt when the child died is still open.
        assert len(journal.rounds.recover()) <= 1


def test_device_events_read_back_as_the_same_event(journal: Journal) -> None:
    from drivers.events import PacketDealt, parse_event

    round_id = journal.new_round_id()
    once(journal).open_round(round_id)
    event = PacketDealt(device="shuffler", index=3, cards=("As", "JK", "?7f"))
    once(journal).record_event(event.kind, event, round_id)
    record = journal.history.get_round(round_id)
    assert record is not None
    [stored] = record.events
    assert stored.kind == "packet_dealt"
    assert parse_event(stored.payload) == event


def test_ack_many_and_mark_attempts_in_one_transaction(journal: Journal) -> None:
    rows = [once(journal).enqueue(f"t/{i}", {"i": i}) for i in range(5)]
    journal.outbox.mark_attempts([rows[3].msg_id, rows[4].msg_id])
    assert [r.attempts for r in journal.outbox.pending(10)] == [0, 0, 0, 1, 1]
    assert journal.outbox.ack_many([rows[0].msg_id, rows[1].msg_id, "not-pending"]) == 2
    assert [r.msg_id for r in journal.outbox.pending(10)] == [r.msg_id for r in rows[2:]]
    assert journal.outbox.ack_many([]) == 0


def test_cheap_counters_agree_with_stats(journal: Journal) -> None:
    assert (journal.outbox.message_seq(), journal.outbox.count()) == (0, 0)
    rows = [once(journal).enqueue(f"t/{i}", {"i": i}) for i in range(3)]
    journal.outbox.ack(rows[0].msg_id)
    stats = journal.history.stats()
    assert journal.outbox.message_seq() == stats.message_seq == 3
    assert journal.outbox.count() == stats.outbox_pending == 2


def test_a_schema_1_journal_is_migrated_with_its_rows(tmp_path: Path) -> None:
    from controller.journal import MIGRATIONS

    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:
        MIGRATIONS[0](conn)
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', '1')")
        conn.execute(
            "INSERT INTO events (round_id, at, kind, payload) VALUES (NULL, 'x', 'alarm', '{}')"
        )
    with Journal.open(path, "PG-01") as journal:
        assert journal.history.stats().events == 1
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        plan = " ".join(
            str(r[-1])
            for r in conn.execute(
                "EXPLAIN QUERY PLAN SELECT id FROM events WHERE kind = 'deal_seen' ORDER BY id DESC"
            )
        )
    assert version == (str(SCHEMA_VERSION),) and SCHEMA_VERSION >= 2
    assert "events_kind" in indexes and "events_kind" in plan


def test_an_event_links_by_the_id_it_got_when_another_writer_took_the_expected_one(
    db: Path, clock: FakeClock
) -> None:
    """An event's link is made for the id the journal expects its row to get, in the INSERT
    itself (issue 42: one statement an event). If something else took that id (a row another
    connection wrote, an archived newest event, a rolled-back transaction), the link is made
    again for the id the row did get: the chain stays whole and ``audit verify`` passes."""
    from controller.journal.audit import verify_journal
    from controller.journal.store import chain_link

    with Journal(db, "PG-07", clock=clock) as journal:
        play_round(journal)
        with pytest.raises(JournalError), journal.transaction() as tx:  # rolled back
            tx.record_event("note", {"n": 1})
            tx.record_event("note", {"n": 2}, "no-such-round")  # refused: rolls back
    with Journal(db, "PG-07", clock=clock) as journal:
        play_round(journal)
        other = sqlite3.connect(db)
        with other:  # a second writer takes the next id behind the journal's back
            other.execute(
                "INSERT INTO events (round_id, at, kind, payload) VALUES (NULL, 'x', 'x', '{}')"
            )
            planted = other.execute("SELECT max(id) FROM events").fetchone()[0]
            other.execute("DELETE FROM events WHERE id = ?", (planted,))
        other.close()
        with journal.transaction() as tx:
            got = tx.record_event("note", {"after": "the planted row"})
        assert got == planted + 1  # AUTOINCREMENT: the planted id is not given again
        play_round(journal)
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT id, round_id, at, kind, payload, chain FROM events ORDER BY id")
    previous = ""
    for event_id, round_id, at, kind, payload, chain in rows:
        if chain is None:
            continue
        assert chain == chain_link(previous, event_id, round_id, at, kind, payload), event_id
        previous = chain
    conn.close()
    assert verify_journal(db).ok, verify_journal(db).findings
