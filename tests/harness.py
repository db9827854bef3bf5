"""A whole table for tests: the real daemon, the real serial drivers, simulated devices on ptys.

    async with running_table(tmp_path) as t:
        result = await t.deal(rng_number=3)        # one round, returns its RoundPayload
        reply = await t.daemon.submit(VoidRound())

``services`` adds the daemon services under test (MQTT publisher, display server), and
``config_extra`` appends TOML sections (``[mqtt]``, ``[display]``) to the demo config.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
import weakref
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.daemon import Daemon
from controller.devices import build_devices
from controller.journal import Journal
from controller.journal.store import open_read_only
from controller.messages import RoundPayload
from controller.ports import Service
from controller.table import DeviceChanged, Effect, RoundClosed
from controller.wiring import build_daemon
from simulators.demo import demo_config
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator


@dataclass
class RunningTable:
    daemon: Daemon
    journal: Journal
    shuffler: ShufflerSimulator
    rng: RngSimulator
    workdir: Path
    closed: asyncio.Queue[RoundPayload] = field(default_factory=asyncio.Queue)
    effects: list[Effect] = field(default_factory=list)

    def service(self, name: str) -> Any:
        """The running service ``name`` (its own type: tests look inside)."""
        return next((s for s in self.daemon.services if s.name == name), None)

    @property
    def protection(self) -> Any:
        """Game protection's monitor, or None when the watch is off."""
        service = self.service("protection")
        return service.monitor if service is not None else None

    async def deal(
        self,
        rng_number: int | None = None,
        faults: str | list[str] | None = None,
        timeout: float = 10.0,
    ) -> RoundPayload:
        """Press the RNG box, deal one deck, and return the round as the table closed it."""
        await self.rng.press(rng_number)
        await self.shuffler.deal(faults)
        return await asyncio.wait_for(self.closed.get(), timeout)

    async def next_closed(self, timeout: float = 10.0) -> RoundPayload:
        return await asyncio.wait_for(self.closed.get(), timeout)


@contextlib.asynccontextmanager
async def running_table(
    workdir: Path,
    *,
    services: Sequence[Service] = (),
    config_extra: str = "",
    table_id: str = "PG-T1",
    seed: int = 1,
    journal_path: Path | None = None,
    journal_extra: str = "",
    bias: str | None = None,
) -> AsyncIterator[RunningTable]:
    workdir.mkdir(parents=True, exist_ok=True)
    journal_path = journal_path or workdir / "journal.sqlite3"
    config = demo_config(
        workdir, journal_path, table=table_id, extra=config_extra, journal_extra=journal_extra
    )
    shuffler = ShufflerSimulator(PtyPort(workdir / "shuffler"), seed=seed, bias=bias)
    rng = RngSimulator(PtyPort(workdir / "rng"), seed=seed)
    async with shuffler, rng:
        devices, _sinks = build_devices(config)
        opened: list[sqlite3.Connection] = []

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            opened.append(sqlite3.connect(*args, **kwargs))
            return opened[-1]

        with Journal.open(journal_path, config.table.id, connect=connect) as journal:
            _CONNECTIONS[journal] = opened[0]
            daemon = build_daemon(config, journal, devices, services)
            table = RunningTable(daemon, journal, shuffler, rng, workdir)
            online: set[str] = set()
            up = asyncio.Event()

            def listen(effect: Effect) -> None:
                table.effects.append(effect)
                if isinstance(effect, RoundClosed):
                    table.closed.put_nowait(effect.payload)
                elif isinstance(effect, DeviceChanged) and effect.payload.online:
                    online.add(effect.payload.device)
                    if {"shuffler", "rng"} <= online:
                        up.set()

            daemon.subscribe(listen)
            stop = asyncio.Event()
            task = asyncio.create_task(daemon.run(stop), name="test-daemon")
            try:
                await asyncio.wait_for(up.wait(), timeout=15)
                yield table
            finally:
                stop.set()
                await asyncio.wait_for(task, timeout=15)


# --- a full disk: SQLite's own SQLITE_FULL ---------------------------------------------------

NO_LIMIT = 1_073_741_823  # SQLite's largest max_page_count


#: The connection each running table's journal opened (``Journal``'s ``connect``), kept for
#: the tests that fill its disk: SQLite's page limit is a setting of one connection.
_CONNECTIONS: weakref.WeakKeyDictionary[Journal, sqlite3.Connection] = weakref.WeakKeyDictionary()


def limit_pages(journal: Journal, pages: int | None) -> None:
    """Make the journal's file "full" at its current size (None: lift the limit again), on
    the daemon's own connection (the limit is per connection) of a ``running_table``."""
    conn = _CONNECTIONS[journal]
    if pages is None:
        conn.execute(f"PRAGMA max_page_count = {NO_LIMIT}")
    else:
        conn.execute(f"PRAGMA max_page_count = {pages}")


def page_count(journal: Journal) -> int:
    return int(_CONNECTIONS[journal].execute("PRAGMA page_count").fetchone()[0])


def journal_events(journal: Journal) -> list[tuple[str, dict[str, Any]]]:
    """Every event in the journal's file, oldest first, as (kind, payload): what was committed,
    read as another reader of the file (the audit, a backup) reads it."""
    with contextlib.closing(open_read_only(journal.path)) as conn:
        rows = conn.execute("SELECT kind, payload FROM events ORDER BY id").fetchall()
    return [(str(kind), json.loads(payload)) for kind, payload in rows]


async def deal_until_fault(t: RunningTable, deals: list[str], most: int = 12) -> None:
    """Deal until the table is in its fault state; the shuffle ids dealt go to ``deals``."""
    for _ in range(most):
        await t.rng.press()
        plan = await t.shuffler.deal()
        deals.append(plan.shuffle_id)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            if t.daemon.table.fault is not None:
                return
            await asyncio.sleep(0.05)
    raise AssertionError("the journal never filled up")
