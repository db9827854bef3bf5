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
import logging
import time
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from pit.admission import UNREGISTERED
from pit.config import PitConfig, parse_pit_config
from pit.record import REJECT_SAMPLE_EVERY, REJECT_SAMPLES, UNREGISTERED_ALARMS
from pit.service import Pit, install_throttle
from simulators.feed import SimTable, unsigned, wire
from simulators.mosquitto import Mosquitto
from tests.pit.conftest import feed_keys_file, publish, read_store
from tests.pit.test_resend import _running

NAMES = 3000
#: What one burst sends before the next (Mosquitto queues 1,000 a client by default).
CHUNK = 500


def _seen(pit: Pit) -> int:
    """Messages the pit has judged or dropped unread."""
    return pit.ingest.stats.rejected + pit.ingest.admission.dropped_total


def _config(tmp: Path, broker: int, db_url: str) -> PitConfig:
    keys = feed_keys_file(tmp / "feed-keys", ["PG-01"])
    return parse_pit_config(
        f'[site]\nid = "demo"\n[broker]\nport = {broker}\nprotocol = "5"\nclient_id = "pit-f4"\n'
        f'[database]\nurl = "{db_url}"\n[record]\nfeed_keys_file = "{keys}"\n'
        "[web]\nenabled = false\n"
    )


async def test_made_up_names_cannot_grow_the_record_nor_the_log(
    broker: Mosquitto, db_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = _config(tmp_path, broker.port, db_url)
    install_throttle()
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
                while _seen(pit) < min(NAMES, start + CHUNK):
                    await asyncio.sleep(0.1)
        await publish(broker.port, genuine)
        async with asyncio.timeout(60):
            while pit.ingest.stats.stored < len(genuine):
                await asyncio.sleep(0.1)
    store = read_store(config)
    try:
        # Every one counted, under one name for the names nobody registered: rejected while
        # their shared budget lasted, then dropped unread (pit.admission).
        counts = dict(
            store.db.all(
                "SELECT reason, count FROM reject_counts WHERE table_id = ?", (UNREGISTERED,)
            )
        )
        assert set(counts) <= {"unsigned", "flood"} and sum(counts.values()) == NAMES, counts
        samples = int(store.db.all("SELECT count(*) FROM rejects")[0][0])
        assert samples <= REJECT_SAMPLES + NAMES // REJECT_SAMPLE_EVERY
        alarms = store.db.all("SELECT table_id, kind FROM record_alarms WHERE acked_at IS NULL")
        # The bound, then one for the rest, one for their burst and one for their flood.
        assert len(alarms) <= UNREGISTERED_ALARMS + 3
        assert (UNREGISTERED, "unsigned") in alarms
        assert store.pages.counts()["rejects"] == NAMES  # the page's figure is the count
        assert store.pages.seqs("PG-01") == list(range(1, table.seq + 1))  # the real table's, whole
        # Past the retention period the samples, the counts and acknowledged findings go.
        store.db.x(
            "UPDATE record_alarms SET acked_at = ?, acked_by = 'S1'", (time.time() - 40 * 86_400,)
        )
        with store.db.transaction():  # 31 days on
            gone = store.record.expire(time.time() + 31 * 86_400, 30)
        assert gone >= samples + 1
        assert store.db.all("SELECT count(*) FROM rejects") == [(0,)]
    finally:
        store.close()
    lines = [
        r.getMessage() for r in caplog.records if r.getMessage().startswith("pit_record_alarm")
    ]
    assert len(lines) <= 12, len(lines)  # backing off: 1, 2, 4 … s, each with what it held
    rejects = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pit_reject")]
    assert len(rejects) <= 12, len(rejects)


def _flood_config(tmp: Path, broker: int, db_url: str) -> PitConfig:
    keys = feed_keys_file(tmp / "feed-keys", ["PG-01", "PG-02", "PG-07"])
    return parse_pit_config(
        f'[site]\nid = "demo"\n[broker]\nport = {broker}\nprotocol = "5"\nclient_id = "pit-f1"\n'
        f'[database]\nurl = "{db_url}"\n[record]\nfeed_keys_file = "{keys}"\n'
        "[liveness]\nprobe_after = 2\nsilent_after = 4\n"
        # A budget a test can run over in a few MB (the defaults are 20 MB at once, 2 MB/s).
        "[admission]\nburst_bytes = 2000000\nbytes_per_s = 200000\n"
        "[web]\nenabled = false\n"
    )


async def test_one_tables_flood_is_dropped_and_the_others_keep_their_pace(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    """F1: PG-07's account publishes 1,000 unsigned 200 KB messages on its round topic while
    PG-01 and PG-02 deal a round a second. The flood costs its bytes: over PG-07's budget it is
    dropped unread with one ``flood`` alarm; the other tables' every message is stored, and
    neither is called silent (the pit's liveness runs at 2 s and 4 s here)."""
    config = _flood_config(tmp_path, broker.port, db_url)
    tables = [SimTable("PG-01", seed=1), SimTable("PG-02", seed=2)]
    big = b'{"schema":"paigow.round","pad":"' + b"x" * 200_000 + b'"}'
    async with _running(config) as pit:

        async def dealing() -> None:
            for _ in range(12):
                now = datetime.now(UTC)
                batch = [(t, wire(b)) for table in tables for t, b in table.next_round(now)]
                await publish(broker.port, batch)
                await asyncio.sleep(1.0)  # a round a second at each table, for 12 s

        async def flooding() -> None:
            await asyncio.sleep(1.0)
            await publish(broker.port, [("casino/demo/paigow/PG-07/round", big)] * 1000)

        await asyncio.gather(dealing(), flooding())
        async with asyncio.timeout(60):
            while pit.ingest.stats.stored < sum(t.seq for t in tables):
                await asyncio.sleep(0.2)
        dropped = pit.ingest.admission.dropped_total
    store = read_store(config)
    try:
        for table in tables:
            assert store.pages.seqs(table.table_id) == list(range(1, table.seq + 1))
        # PG-07 itself sent nothing genuine: silent it is. The dealing tables never were.
        silent = store.db.all("SELECT table_id FROM record_alarms WHERE kind = 'table_silent'")
        assert {t for (t,) in silent} <= {"PG-07"}, silent
        flood = store.db.all("SELECT table_id, kind FROM record_alarms WHERE kind = 'flood'")
        assert flood == [("PG-07", "flood")]
        counted = store.db.all("SELECT count FROM reject_counts WHERE reason = 'flood'")
        assert dropped >= 800 and counted == [(dropped,)]
        assert int(store.db.all("SELECT count(*) FROM rejects")[0][0]) <= 2 * REJECT_SAMPLES
        # The page's live stream encodes the tiles (a Decimal from PostgreSQL's sum once
        # stopped it for good, silently, in bench/pit.py --flood).
        tiles = {t["table_id"]: t for t in store.pages.tiles()}
        assert type(tiles["PG-07"]["rejected_last_hour"]) is int
        assert orjson.dumps(list(tiles.values()))
    finally:
        store.close()
