"""The pit page's live stream keeps the floor (issue 42): a page that connects or reconnects is
sent the tiles the Hub keeps, never a read of every table; a batch pushes only the tiles it
changed; the whole floor is read again now and then and only what differs is pushed; a read
the database does not answer is tried again. Through ``pit.web.Hub`` with a database of dicts."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from pit.store import Outcome
from pit.web import FLOOR_REFRESH, Hub


class Floor:
    """A stand-in for the page's database: the tiles it holds, and the reads it was asked."""

    def __init__(self, n: int) -> None:
        self.tiles = {f"PG-{i:02d}": {"table_id": f"PG-{i:02d}", "rounds": 0} for i in range(n)}
        self.reads: list[list[str] | None] = []
        self.fail = 0

    async def read(self, tables: list[str] | None) -> list[dict[str, Any]]:
        self.reads.append(tables)
        await asyncio.sleep(0.01)  # the database's thread
        if self.fail:
            self.fail -= 1
            raise ConnectionError("the database went away")
        names = sorted(self.tiles) if tables is None else tables
        return [dict(self.tiles[t]) for t in names if t in self.tiles]

    def whole_reads(self) -> int:
        return sum(1 for r in self.reads if r is None)


@contextlib.asynccontextmanager
async def watched(
    db: Floor, refresh: float = FLOOR_REFRESH, pages: int = 1
) -> AsyncIterator[tuple[Hub, asyncio.Queue[str], list[list[dict[str, Any]]]]]:
    """A running Hub, the floors ``pages`` pages asked for at once, and one page's queue."""
    hub = Hub(db.read, refresh=refresh)
    hub.interval = 0.0
    running = asyncio.create_task(hub.run())
    try:
        floors = await asyncio.gather(*(hub.snapshot() for _ in range(pages)))
        page: asyncio.Queue[str] = asyncio.Queue()
        hub.queues.add(page)
        yield hub, page, floors
    finally:
        running.cancel()


async def next_push(page: asyncio.Queue[str]) -> dict[str, Any]:
    item = await asyncio.wait_for(page.get(), 10)
    assert item.startswith("event: tiles\ndata: ")
    push: dict[str, Any] = json.loads(item.split("data: ", 1)[1])
    return push


async def test_pages_that_connect_are_sent_the_kept_floor_not_a_read_of_every_table() -> None:
    db = Floor(200)
    # Fifty pages at once (a pit restarted: every supervisor's page reconnects): one read.
    async with watched(db, pages=50) as (hub, page, floors):
        assert db.whole_reads() == 1 and hub.floor_reads == 1
        assert all(len(f) == 200 for f in floors)
        db.tiles["PG-07"]["rounds"] = 5
        hub.on_batch(Outcome(tables={"PG-07"}))
        push = await next_push(page)
        assert [t["table_id"] for t in push["tiles"]] == ["PG-07"]  # the batch's table alone
        assert db.reads[-1] == ["PG-07"]
        # A page reconnecting now is sent the change it would have heard, without a read.
        reads = len(db.reads)
        again = {t["table_id"]: t for t in await hub.snapshot()}
        assert again["PG-07"]["rounds"] == 5 and len(again) == 200
        assert len(db.reads) == reads and hub.floor_reads == 1
        # A table the floor did not have yet joins the kept floor with its first batch.
        db.tiles["PG-NEW"] = {"table_id": "PG-NEW", "rounds": 1}
        hub.on_batch(Outcome(tables={"PG-NEW"}))
        assert [t["table_id"] for t in (await next_push(page))["tiles"]] == ["PG-NEW"]
        assert len(await hub.snapshot()) == 201 and hub.floor_reads == 1


async def test_the_whole_floor_is_read_again_and_only_the_tiles_that_differ_are_pushed() -> None:
    """What no batch announced (another pit's writes on the same database, a count that ages
    with the hour) reaches the pages at the next whole read, and only the tiles it changed."""
    db = Floor(100)
    async with watched(db, refresh=0.3) as (hub, page, _):
        db.tiles["PG-03"]["rounds"] = 9
        db.tiles["PG-40"]["rounds"] = 2
        push = await next_push(page)
        assert sorted(t["table_id"] for t in push["tiles"]) == ["PG-03", "PG-40"]
        assert hub.floor_reads >= 2
        assert {t["table_id"]: t["rounds"] for t in await hub.snapshot()}["PG-40"] == 2
        # Nothing differs: the reads go on, and nothing is pushed.
        reads = hub.floor_reads
        while hub.floor_reads < reads + 2:
            await asyncio.sleep(0.1)
        assert page.empty()


async def test_a_read_the_database_does_not_answer_is_tried_again_and_nothing_is_lost() -> None:
    db = Floor(10)
    async with watched(db) as (hub, page, _):
        db.tiles["PG-01"]["rounds"] = 3
        db.fail = 1
        hub.on_batch(Outcome(tables={"PG-01"}))
        while db.fail:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        assert page.empty()  # the failed read pushed nothing
        db.tiles["PG-02"]["rounds"] = 4
        hub.on_batch(Outcome(tables={"PG-02"}))
        push = await next_push(page)
        assert sorted(t["table_id"] for t in push["tiles"]) == ["PG-01", "PG-02"]
        # The database back after an outage: the whole floor is read at once (renew).
        reads = hub.floor_reads
        hub.renew()
        while hub.floor_reads == reads:
            await asyncio.sleep(0.01)


async def test_a_first_read_that_fails_is_said_to_the_page_and_the_next_page_reads_again() -> None:
    db = Floor(5)
    hub = Hub(db.read)
    db.fail = 1
    with pytest.raises(ConnectionError):
        await hub.snapshot()  # the page is told (its stream sends the links instead)
    assert hub.floor is None
    assert len(await hub.snapshot()) == 5 and hub.floor_reads == 1


async def test_a_database_down_is_tried_every_few_seconds_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The whole floor's read due while the database is down: tried again every
    ``FLOOR_RETRY`` s, not at every step (before, every 0.1 s, with a warning each time: ten
    log lines a second for as long as the outage lasted); said once, and once when back."""
    import logging
    import time

    from pit.web import FLOOR_RETRY

    db = Floor(10)
    async with watched(db, refresh=0.2) as (hub, page, _):
        with caplog.at_level(logging.INFO, logger="pit.web"):
            db.fail = 10**6  # down
            start, reads = time.monotonic(), hub.floor_reads
            tries = len(db.reads)
            await asyncio.sleep(1.5)
            tried = len(db.reads) - tries
            assert 1 <= tried <= 1 + int(1.5 / FLOOR_RETRY) + 1, tried
            failed = [r for r in caplog.records if "pit_web_read_failed" in r.getMessage()]
            assert len(failed) == 1
            db.fail = 0  # back (the links' watch would renew at once)
            hub.renew()
            while hub.floor_reads == reads:
                await asyncio.sleep(0.01)
            assert time.monotonic() - start < 10
            while not any("pit_web_read_back" in r.getMessage() for r in caplog.records):
                await asyncio.sleep(0.01)
        assert page.empty()  # nothing changed, nothing pushed
