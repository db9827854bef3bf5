"""Issue 31: what the broker lost after taking it still reaches the database once. The pit asks
the table for a seq still missing after ``resend_after`` (a signed ``resend``); the table
publishes its kept copies again and the gap fills, without a false ``chain_skipped``.

The loss is made the way a casino meets it: the pit's session on the broker is gone (a pit
started under another client id, as after its session expired) while the table dealt, so
what the broker queued for the old session never reaches the new one."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import secrets
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pit.config import PitConfig, parse_pit_config
from pit.liveness import seq_ranges
from pit.service import Pit
from simulators.mosquitto import Mosquitto
from simulators.tables import TableDaemon, table_mqtt_section
from tests.pit.conftest import feed_keys_file, read_store


def _journaled(journal: Path) -> tuple[int, int]:
    """The table's own count: its last message seq, and its closed rounds."""
    with sqlite3.connect(journal) as conn:
        (seq,) = conn.execute("SELECT value FROM meta WHERE key = 'msg_seq/PG-09'").fetchone()
        (rounds,) = conn.execute("SELECT count(*) FROM rounds WHERE status <> 'open'").fetchone()
    return int(seq), int(rounds)


def _secret(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def _config(tmp: Path, broker: int, db_url: str, client_id: str, command_key: Path) -> PitConfig:
    keys = tmp / "feed-keys"
    return parse_pit_config(
        f'[site]\nid = "demo"\n[broker]\nport = {broker}\nprotocol = "5"\n'
        f'client_id = "{client_id}"\n[database]\nurl = "{db_url}"\n'
        f'[record]\nfeed_keys_file = "{keys}"\n'
        f'[commands]\nkey_file = "{command_key}"\nkey_id = "pit"\n'
        "[liveness]\nprobe_after = 60\nsilent_after = 90\nresend_after = 0.5\n"
        "[web]\nenabled = false\n"
    )


@contextlib.asynccontextmanager
async def _running(config: PitConfig) -> AsyncIterator[Pit]:
    pit, stop = Pit(config), asyncio.Event()
    task = asyncio.create_task(pit.run(stop))
    try:
        await asyncio.wait_for(pit.ingest.connected.wait(), 20)
        yield pit
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)


async def _until(predicate: object, timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():  # type: ignore[operator]
            await asyncio.sleep(0.1)


async def test_messages_the_broker_lost_are_asked_for_and_stored_once(
    broker: Mosquitto, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = secrets.token_hex(32)
    command_key = _secret(tmp_path / "pit-command.key", secret)
    command_keys = _secret(tmp_path / "command-keys", f"pit hmac-sha256 {secret}")
    feed_keys_file(tmp_path / "feed-keys", daemons={"PG-09": tmp_path / "PG-09"})
    extra = table_mqtt_section(broker.port, command_keys_file=command_keys, protocol="5")
    table = TableDaemon("PG-09", tmp_path / "PG-09", extra=extra, seed=9)
    first = _config(tmp_path, broker.port, db_url, "pit-first", command_key)
    store = read_store(first)
    try:
        async with _running(first):
            await table.start()
            await table.deal()
            await _until(lambda: store.pages.counts()["rounds"] == 1)
        # The pit is away; the broker queues for its session. It comes back as another one.
        for _ in range(3):
            await table.deal()
        await asyncio.sleep(1.0)  # the table has published them (the broker took them)
        async with _running(_config(tmp_path, broker.port, db_url, "pit-new", command_key)) as pit:
            await table.deal()  # its seq jumps over what the old session holds: a gap
            await _until(lambda: store.pages.counts()["gaps_reported"] > 0)
            # Every seq the table has journaled, read again at each look: a table on a loaded
            # machine may journal another message after the gap (a device's state), and the
            # copy is whole when it holds that one too. Two minutes: a gap never filled fails.
            await _until(
                lambda: (
                    store.pages.seqs("PG-09") == list(range(1, _journaled(table.journal)[0] + 1))
                ),
                120,
            )
            journaled = _journaled(table.journal)
            assert pit.ingest.liveness.resends_sent >= 1
            # The gap outlived its grace: now it is a warning, naming its seqs (issue 39).
            warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert [w for w in warned if w.startswith("pit_gap table=PG-09 seqs=")], warned
    finally:
        await table.close()
    counts = store.pages.counts()
    assert counts["rounds"] == journaled[1] and counts["gaps_open"] == 0
    assert counts["record_alarms"] == 0 and counts["rejects"] == 0  # no chain_skipped
    replayed = store.db.one(
        "SELECT count(*) FROM messages WHERE table_id = 'PG-09' AND replayed = 1"
    )
    assert replayed is not None and replayed[0] >= 3  # the three rounds came as resends
    store.close()


@given(st.sets(st.integers(1, 5000), max_size=300), st.integers(1, 50))
def test_seq_ranges_cover_exactly_the_seqs_none_longer_than_allowed(
    seqs: set[int], longest: int
) -> None:
    ranges = seq_ranges(sorted(seqs), longest)
    covered = [s for first, last in ranges for s in range(first, last + 1)]
    assert covered == sorted(seqs)
    assert all(0 <= last - first < longest for first, last in ranges)
    # Consecutive ranges that touch do so only because the longer one was full.
    for (a, b), (c, _) in itertools.pairwise(ranges):
        assert c > b + 1 or b - a + 1 == longest
