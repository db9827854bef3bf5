"""The pit against real table daemons (``paigow-table run``, simulated devices) over a real
Mosquitto, the pit itself a real process (``paigow-table pit run``) killed -9 mid-shift and the
broker restarted: every round every journal holds reaches the pit's database once, seqs whole,
and the pit's export of each table passes ``paigow-table audit verify --feed`` against the
table's journal (checkpoint signatures checked)."""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from pit.store import Store
from simulators.mosquitto import Mosquitto, with_parent
from simulators.tables import TableDaemon, table_mqtt_section
from tests.pit.conftest import KEY, feed_keys_file


def _pit_process(config: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            with_parent([sys.executable, "-m", "controller.cli", "pit", "run", "--config",
                         str(config)]),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out,
        )  # fmt: skip


def _journal_rounds(journal: Path) -> set[str]:
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as conn:
        return {r[0] for r in conn.execute("SELECT round_id FROM rounds WHERE status <> 'open'")}


def _outbox(journal: Path) -> int:
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM outbox").fetchone()[0])


def _closed(journal: Path) -> int:
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM rounds WHERE status <> 'open'").fetchone()[0])


def _unsent(tables: list[TableDaemon]) -> set[tuple[str, int]]:
    """(table, seq) of the messages still in the tables' outboxes."""
    out: set[tuple[str, int]] = set()
    for t in tables:
        with sqlite3.connect(f"file:{t.journal}?mode=ro", uri=True) as conn:
            out |= {(t.table_id, int(s)) for (s,) in conn.execute("SELECT seq FROM outbox")}
    return out


def _sent_max(journal: Path) -> int:
    """The highest seq the table sent (the broker acknowledged it)."""
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT coalesce(max(seq), 0) FROM sent").fetchone()[0])


def _open_gaps(store: Store) -> set[tuple[str, int]]:
    rows = store.db.all("SELECT table_id, seq FROM missing WHERE filled_at IS NULL")
    return {(str(t), int(s)) for t, s in rows}


async def _deal_and_close(tables: list[TableDaemon]) -> None:
    """A round dealt at each table, and each closed in its journal before the next deal (a
    deal pressed before the last round closed is not one round more)."""
    before = [_closed(t.journal) for t in tables]
    await asyncio.gather(*(t.deal() for t in tables))
    await _wait(
        lambda: all(_closed(t.journal) > n for t, n in zip(tables, before, strict=True)), 60
    )


async def _wait(predicate: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.3)


async def test_real_tables_pit_killed_and_broker_restarted_nothing_lost(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    key_file = tmp_path / "checkpoint.key"
    key_file.write_text(KEY.hex() + "\n")
    key_file.chmod(0o600)
    config = tmp_path / "pit.toml"
    # Each table's own feed key (made as at install) registered with the pit.
    keys = feed_keys_file(
        tmp_path / "feed-keys", daemons={f"PG-0{i}": tmp_path / f"PG-0{i}" for i in (1, 2)}
    )
    config.write_text(
        f'[site]\nid = "demo"\n[broker]\nport = {broker.port}\nprotocol = "5"\n'
        f'client_id = "pit-real"\n[database]\nurl = "{db_url}"\n'
        f'[record]\ncheckpoint_key_file = "{key_file}"\nfeed_keys_file = "{keys}"\n'
        "[web]\nenabled = false\n"
    )
    extra = table_mqtt_section(broker.port, checkpoint_key_file=key_file)
    tables = [TableDaemon(f"PG-0{i}", tmp_path / f"PG-0{i}", extra=extra, seed=i) for i in (1, 2)]
    pit = _pit_process(config, tmp_path / "pit.log")
    store: Store | None = None
    try:
        # The pit's session exists before the first round (the broker keeps only what a
        # session subscribed to).
        await _wait(lambda: "pit_subscribed" in (tmp_path / "pit.log").read_text(), 60)
        await asyncio.gather(*(t.start() for t in tables))
        store = Store(db_url, root="casino/demo/paigow/")
        for _ in range(3):
            await _deal_and_close(tables)
        await _wait(lambda: store.pages.counts()["rounds"] >= 6, 90)  # a loaded machine
        pit.send_signal(signal.SIGKILL)  # a crash mid-shift, with nothing to say
        pit.wait()
        for _ in range(3):  # dealt while the pit is down
            await _deal_and_close(tables)
        await broker.stop()  # and the broker restarts (it saves the pit's session)
        await broker.start()
        pit = _pit_process(config, tmp_path / "pit.log")
        for _ in range(3):
            await _deal_and_close(tables)
        # Everything the tables journaled reached the broker (their outboxes are empty).
        await _wait(lambda: all(_outbox(t.journal) == 0 for t in tables), 60)
        # A gap that needs a resend (a seq the broker lost over its restart) is filled while
        # the tables run and can answer it: a table closed first could not, and the gap would
        # stay open as it should on a floor (the table is gone), which failed this test under
        # a loaded machine (issue 42). The gaps its closing messages make are checked below.
        await _wait(lambda: store.pages.counts()["gaps_open"] == 0, 60)
        await asyncio.gather(*(t.close() for t in tables))
        expected = set().union(*(_journal_rounds(t.journal) for t in tables))
        assert len(expected) >= 18
        await _wait(
            lambda: {r[0] for r in store.db.all("SELECT round_id FROM rounds")} >= expected, 60
        )
        # Gaps the pit saw on the way (a status naming seqs still in a table's outbox) are
        # filled: the last of them by the messages a table publishes as it closes, which may
        # reach the pit after its rounds (CI, four workers on two cores: one was still open).
        # What is still open after the close is a seq the table has not sent: the status
        # named it, the message was still in the table's outbox when it stopped, and it goes at
        # its next start (found under a loaded machine: PG-02 closed with seq 20 unsent while
        # its status said 20). Every seq a table did send is stored.
        await _wait(lambda: _open_gaps(store) <= _unsent(tables), 60)
        # What a table's own stop made (its devices going offline) may still wait in its outbox
        # when it exits, under load: kept, named by its last status, sent at its next start.
        # Every seq it did send is stored: the last of them may still be on its way to the pit
        # (a suite run under load checked at once and found 19 stored, 20 sent), so the check
        # waits for it, and fails only if it never comes.
        await _wait(
            lambda: all(
                _sent_max(t.journal) <= max(store.pages.seqs(t.table_id), default=0) for t in tables
            ),
            60,
        )
        for t in tables:
            seqs = store.pages.seqs(t.table_id)
            assert seqs == list(range(1, len(seqs) + 1)), f"{t.table_id}: {seqs}"
            assert _sent_max(t.journal) <= seqs[-1], f"{t.table_id}: {seqs[-1]}"
        counts = store.pages.counts()
        assert counts["rejects"] == 0
        assert counts["record_alarms"] == 0
        assert store.db.all("SELECT count(*) FROM checkpoints WHERE signature <> 'valid'") == [(0,)]
    finally:
        pit.send_signal(signal.SIGTERM)
        pit.wait(30)
        await asyncio.gather(*(t.close() for t in tables), return_exceptions=True)
        if store is not None:
            store.close()
    assert pit.returncode == 0
    for t in tables:
        feed = tmp_path / f"{t.table_id}.feed.jsonl"
        exported = subprocess.run(
            [sys.executable, "-m", "controller.cli", "pit", "export", "--config", str(config),
             "--table", t.table_id, "--output", str(feed)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert exported.returncode == 0, exported.stderr
        audit = subprocess.run(
            [sys.executable, "-m", "controller.cli", "audit", "verify", "--journal",
             str(t.journal), "--feed", str(feed), "--checkpoint-key", str(key_file)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert audit.returncode == 0, audit.stdout + audit.stderr
        assert "feed" in audit.stdout and "0 without their signature" in audit.stdout
