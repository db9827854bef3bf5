"""The floor against RabbitMQ's MQTT plugin (MQTT 3.1.1 only, in RabbitMQ 3.10) instead of
Mosquitto: a real table daemon publishing to it, the pit subscribed with a persistent session
(a durable queue on RabbitMQ's side), stopped while rounds are dealt and started again: every
round once, seqs whole. The plugin is switched on by `make rabbitmq-mqtt` (listening on
127.0.0.1:1884, beside the machine's Mosquitto on 1883); PIT_RABBITMQ_MQTT=HOST:PORT points
elsewhere."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
import uuid
from pathlib import Path

import aiomqtt

from simulators.tables import TableDaemon, table_mqtt_section
from tests.pit.conftest import KEY, RunningIngest, feed_keys_file, make_config, read_store
from tests.pit.test_tables import _deal_and_close

HOST, _, PORT = os.environ.get("PIT_RABBITMQ_MQTT", "127.0.0.1:1884").rpartition(":")


def _journal_rounds(journal: Path) -> set[str]:
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as conn:
        return {r[0] for r in conn.execute("SELECT round_id FROM rounds")}


def _outbox(journal: Path) -> int:
    with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM outbox").fetchone()[0])


async def test_a_real_table_through_rabbitmq_reaches_the_pit_once(
    db_url: str, tmp_path: Path
) -> None:
    port = int(PORT)
    site = f"rmq{uuid.uuid4().hex[:8]}"  # a topic tree of this test's own on a shared broker
    client_id = f"pit-rmq-{uuid.uuid4().hex[:8]}"
    key_file = tmp_path / "checkpoint.key"
    key_file.write_text(KEY.hex() + "\n")
    key_file.chmod(0o600)
    config = make_config(
        port, db_url, protocol="3.1.1", client_id=client_id,
        extra="[record]\nfeed_keys_file = "
        f'"{feed_keys_file(tmp_path / "feed-keys", daemons={"PG-R1": tmp_path / "PG-R1"})}"\n',
    )  # fmt: skip
    config = config.model_copy(
        update={
            "site": config.site.model_copy(update={"id": site}),
            "broker": config.broker.model_copy(update={"host": HOST}),
        }
    )
    extra = table_mqtt_section(port, checkpoint_key_file=key_file, host=HOST)
    table = TableDaemon("PG-R1", tmp_path / "PG-R1", seed=5, extra=extra)
    table.write_config()
    text = table.config_path.read_text().replace('site = "demo"', f'site = "{site}"')
    table.config_path.write_text(text)
    try:
        async with RunningIngest(config) as pit:
            await table.start()
            for _ in range(3):
                await _deal_and_close([table])
            store = read_store(config)
            await pit.until(lambda: store.pages.counts()["rounds"] >= 3, 30)
        for _ in range(3):  # the pit is away; RabbitMQ keeps its queue
            await _deal_and_close([table])
        deadline = time.monotonic() + 30
        while _outbox(table.journal) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        async with RunningIngest(config) as pit:
            expected = _journal_rounds(table.journal)
            await pit.until(
                lambda: {r[0] for r in store.db.all("SELECT round_id FROM rounds")} >= expected, 30
            )
        seqs = store.pages.seqs("PG-R1")
        assert seqs == list(range(1, len(seqs) + 1))
        assert len(expected) == 6
        counts = store.pages.counts()
        assert counts["gaps_open"] == 0 and counts["rejects"] == 0
        assert store.db.all("SELECT DISTINCT signature FROM checkpoints") == [("valid",)]
        store.close()
    finally:
        await table.close()
        # Drop the pit's durable session (its queue) on the shared broker.
        async with aiomqtt.Client(HOST, port, identifier=client_id, clean_session=True):
            pass
