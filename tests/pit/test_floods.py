"""One table's broker account cannot harm the floor (issue 40), attacked through a real Mosquitto
and a real pit on SQLite and PostgreSQL.

F4: 3,000 messages under made-up table names once wrote 3,000 ``record_alarms`` rows, 3,000
rejects of up to 16 KB and 3,000 ERROR lines. Now rejects are counted per (name, reason) —
names the keys file does not register all together — and kept whole only as samples; record
alarms on unregistered names stop at a bound, past which one alarm stands for the rest; the
log's lines of a flood back off with the count they stand for; and what outlived the retention
period goes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pit.config import PitConfig, parse_pit_config
from pit.record import REJECT_SAMPLE_EVERY, REJECT_SAMPLES, UNREGISTERED, UNREGISTERED_ALARMS
from pit.service import Pit, install_backoff
from pit.simfeed import SimTable, unsigned, wire
from simulators.mosquitto import Mosquitto
from tests.pit.conftest import feed_keys_file, publish, read_store

NAMES = 3000
#: What one burst sends before the next (Mosquitto queues 1,000 a client by default).
CHUNK = 500


def _config(tmp: Path, broker: int, db_url: str) -> PitConfig:
    keys = feed_keys_file(tmp / "feed-keys", ["PG-01"])
    return parse_pit_config(
        f'[site]\nid = "demo"\n[broker]\nport = {broker}\nprotocol = "5"\nclient_id = "pit-f4"\n'
        f'[database]\nurl = "{db_url}"\n[record]\nfeed_keys_file = "{keys}"\n'
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
        await asyncio.wait_for(task, 30)


async def test_made_up_names_cannot_grow_the_record_nor_the_log(
    broker: Mosquitto, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path, broker.port, db_url)
    install_backoff()
    caplog.set_level(logging.INFO)
    now = datetime.now(UTC)
    flood = []
    for n in range(NAMES):
        topic, body = SimTable(f"X-{n:04d}").status(now)
        flood.append((topic, unsigned(body)))
    table = SimTable("PG-01")
    genuine = [(t, wire(b)) for t, b in table.next_round(now)]
    async with _running(config) as pit:
        for start in range(0, NAMES, CHUNK):
            await publish(broker.port, flood[start : start + CHUNK])
            async with asyncio.timeout(60):
                while pit.ingest.stats.rejected < min(NAMES, start + CHUNK):
                    await asyncio.sleep(0.1)
        await publish(broker.port, genuine)
        async with asyncio.timeout(60):
            while pit.ingest.stats.stored < len(genuine):
                await asyncio.sleep(0.1)
    store = read_store(config)
    try:
        # Every one counted, under one name for the names nobody registered.
        assert store.all("SELECT table_id, reason, count FROM reject_counts") == [
            (UNREGISTERED, "unsigned", NAMES)
        ]
        samples = int(store.all("SELECT count(*) FROM rejects")[0][0])
        assert samples <= REJECT_SAMPLES + NAMES // REJECT_SAMPLE_EVERY
        alarms = store.all("SELECT table_id, kind FROM record_alarms WHERE acked_at IS NULL")
        assert len(alarms) <= UNREGISTERED_ALARMS + 2  # the bound, and one for the rest
        assert (UNREGISTERED, "unsigned") in alarms
        assert store.counts()["rejects"] == NAMES  # the page's figure is the count
        assert store.seqs("PG-01") == list(range(1, table.seq + 1))  # the real table's, whole
        # Past the retention period the samples, the counts and acknowledged findings go.
        store.x(
            "UPDATE record_alarms SET acked_at = ?, acked_by = 'S1'", (time.time() - 40 * 86_400,)
        )
        with store.transaction():  # 31 days on
            gone = store.expire(time.time() + 31 * 86_400, 30)
        assert gone >= samples + 1
        assert store.all("SELECT count(*) FROM rejects") == [(0,)]
    finally:
        store.close()
    lines = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("pit_record_alarm")
    ]
    assert len(lines) <= 12, len(lines)  # backing off: 1, 2, 4 … s, each with what it held
    rejects = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pit_reject")]
    assert len(rejects) <= 12, len(rejects)
