"""The pit's batching and its live stream: ``[broker] batch_wait`` gathers messages into fewer
batches and a stop does not wait for it; the page hears a batch at once and at most every
interval; a stalled page is ended so it reconnects. (Reading and acknowledging on the broker:
tests/pit/test_broker.py.)"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiomqtt

from simulators.feed import SimTable, wire
from simulators.mosquitto import Mosquitto
from tests.pit.conftest import KEY, RunningIngest, make_config, publish


async def test_batch_wait_gathers_messages_and_a_stop_cuts_it_short(
    broker: Mosquitto, tmp_path: Path
) -> None:
    db = f"sqlite:///{tmp_path / 'pit.sqlite3'}"
    table = SimTable("PG-01", key=KEY)
    feed = [(t, wire(b)) for _ in range(4) for t, b in table.next_round(datetime.now(UTC))]
    # The longest wait the config allows (2 s): the messages are gathered into one batch even
    # on a loaded machine, and a stop visibly cuts the wait short.
    config = make_config(broker.port, db, batch_wait=2.0)
    async with RunningIngest(config) as pit:
        async with aiomqtt.Client("127.0.0.1", broker.port) as client:
            for topic, payload in feed:  # one every 50 ms, all within one wait
                await client.publish(topic, payload, qos=1)
                await asyncio.sleep(0.05)
        await pit.until(lambda: pit.ingest.stats.stored == len(feed))
        assert pit.ingest.stats.batches <= 2, pit.ingest.stats
        # A stop while a batch waits: the run ends well within the wait, the batch stored.
        await publish(broker.port, [(t, wire(b)) for t, b in table.next_round(datetime.now(UTC))])
        await asyncio.sleep(0.05)
        stopped = time.monotonic()
        pit.stop.set()
        assert pit.task is not None
        await asyncio.wait_for(pit.task, 5)
        assert time.monotonic() - stopped < 1.5  # within the 2 s wait
        assert pit.ingest.stats.stored == pit.ingest.stats.received > len(feed)
    config0 = make_config(broker.port, f"sqlite:///{tmp_path / 'pit0.sqlite3'}", batch_wait=0,
                          client_id="pit-nowait")  # fmt: skip
    async with RunningIngest(config0) as pit:
        async with aiomqtt.Client("127.0.0.1", broker.port) as client:
            for topic, payload in feed:
                await client.publish(topic, payload, qos=1)
                await asyncio.sleep(0.05)
        await pit.until(lambda: pit.ingest.stats.received >= len(feed))
        assert pit.ingest.stats.batches >= len(feed) // 2, pit.ingest.stats


async def test_the_page_hears_a_batch_at_once_and_at_most_every_interval() -> None:
    """The live stream's Hub (pit.web): a batch after a quiet spell goes to the pages at once
    (not an interval later: a batch already waited ``batch_wait``); batches closer together
    than the interval are gathered into one push, no sooner than the interval after the last."""
    from pit.store import Outcome
    from pit.web import Hub

    read: list[tuple[float, list[str]]] = []

    async def tiles(tables: list[str] | None) -> list[dict[str, Any]]:
        assert tables is not None  # no page asked for the whole floor here
        read.append((time.monotonic(), tables))
        return [{"table_id": t} for t in tables]

    hub = Hub(tiles)
    hub.interval = 5.0  # far longer than a loaded machine's delay: "at once" stays at once
    page: asyncio.Queue[str] = asyncio.Queue()
    hub.queues.add(page)
    running = asyncio.create_task(hub.run())
    try:
        start = time.monotonic()
        hub.on_batch(Outcome(tables={"PG-01"}))
        first = await asyncio.wait_for(page.get(), 5)
        assert time.monotonic() - start < 2.5  # at once, not after the interval
        assert '"PG-01"' in first
        hub.on_batch(Outcome(tables={"PG-02"}))
        await asyncio.sleep(0.1)
        hub.on_batch(Outcome(tables={"PG-03"}))
        second = await asyncio.wait_for(page.get(), 5)
        assert read[1][0] - read[0][0] >= 4.95  # no sooner than the interval after the last
        assert read[1][1] == ["PG-02", "PG-03"] and '"PG-03"' in second
    finally:
        running.cancel()


async def test_a_stalled_page_is_ended_so_it_reconnects_instead_of_going_deaf() -> None:
    """A page that leaves more than ``STALLED`` pushes unread: its stream is ended (the empty
    item the event stream's handler stops on) with nothing stale before it, so the browser
    reconnects and is sent the whole floor. Before, it was only taken off the list and its
    stream stayed open on pings: that page never heard another change. A page that reads
    keeps its stream."""
    from pit.store import Outcome
    from pit.web import STALLED, Hub

    async def tiles(tables: list[str] | None) -> list[dict[str, Any]]:
        assert tables is not None  # no page asked for the whole floor here
        return [{"table_id": t} for t in tables]

    hub = Hub(tiles)
    hub.interval = 0.0
    stalled: asyncio.Queue[str] = asyncio.Queue()
    reading: asyncio.Queue[str] = asyncio.Queue()
    hub.queues |= {stalled, reading}
    running = asyncio.create_task(hub.run())
    heard = 0
    try:
        for i in range(STALLED + 5):
            hub.on_batch(Outcome(tables={f"PG-{i:02d}"}))
            heard += len((await asyncio.wait_for(reading.get(), 5)).splitlines()[:1])
        assert stalled not in hub.queues and reading in hub.queues
        assert stalled.qsize() == 1 and stalled.get_nowait() == ""  # ended, nothing stale
        assert heard == STALLED + 5
    finally:
        running.cancel()
