"""The pit's tests: a real private Mosquitto (persistence on, as a casino's broker), and the
pit's database both ways: an SQLite file and a PostgreSQL database of the test's own (created on
the machine's PostgreSQL at 127.0.0.1:5432 under a unique name, dropped afterwards)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from playwright import async_api as playwright_api

from controller.mqtt.wire import NODELAY
from pit.config import PitConfig, parse_pit_config
from pit.ingest import Ingest
from pit.store import Outcome, Store, migrate
from simulators.feed import SimulatedKeys
from simulators.mosquitto import Mosquitto

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
KEY = bytes(range(32, 64))  # the tables' checkpoint key in these tests


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(sql)


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    name = f"pit_test_{uuid.uuid4().hex[:12]}"
    _pg_admin(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        _pg_admin(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
        )
        _pg_admin(f"DROP DATABASE IF EXISTS {name}")


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'pit.sqlite3'}"
    else:
        with postgres_database() as url:
            yield url


@pytest.fixture
async def browser() -> AsyncIterator[playwright_api.Browser]:
    """Debian's chromium for the pit page's tests: a test's own (they run on the test's event
    loop; the display's module-scoped one runs on its module's)."""
    from tests.display.conftest import chromium

    async with chromium() as b:
        yield b


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Mosquitto]:
    async with Mosquitto(tmp_path / "broker", persistence=True) as b:
        yield b


def make_config(broker_port: int, db_url: str, *, extra: str = "", **broker: Any) -> PitConfig:
    lines = [f"{k} = {json.dumps(v)}" for k, v in broker.items()]
    text = (
        '[site]\nid = "demo"\n'
        f'[broker]\nhost = "127.0.0.1"\nport = {broker_port}\n' + "\n".join(lines) + "\n"
        f"[database]\nurl = {json.dumps(db_url)}\n"
        "[web]\nenabled = false\n" + extra
    )
    return parse_pit_config(text)


def make_store(config: PitConfig) -> Store:
    """The pit's store as the tests run it: every simulated table's feed key registered."""
    return Store(
        config.database_url,
        default_checkpoint_key=KEY,
        root=config.site.root,
        feed_keys=SimulatedKeys(path=config.record.feed_keys_file),
    )


class RunningIngest:
    def __init__(self, config: PitConfig) -> None:
        migrate(config.database_url)
        self.config = config
        self.outcomes: list[Outcome] = []
        self.changed = asyncio.Event()
        self.ingest = Ingest(config, lambda: make_store(config), self._on_batch)
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def _on_batch(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)
        self.changed.set()

    async def __aenter__(self) -> RunningIngest:
        self.task = asyncio.create_task(self.ingest.run(self.stop))
        await asyncio.wait_for(self.ingest.connected.wait(), 15)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.stop.set()
        assert self.task is not None
        await asyncio.wait_for(self.task, 15)

    async def until(self, predicate: Any, timeout: float = 20.0) -> None:
        async with asyncio.timeout(timeout):
            while not predicate():
                self.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait(), 0.5)


async def publish(port: int, messages: list[tuple[str, bytes]], *, retain: bool = False) -> None:
    async with aiomqtt.Client("127.0.0.1", port, socket_options=NODELAY) as client:
        for topic, payload in messages:
            await client.publish(topic, payload, qos=1, retain=retain)


def read_store(config: PitConfig) -> Store:
    return make_store(config)


def feed_keys_file(
    path: Path, simulated: list[str] | tuple[str, ...] = (), daemons: dict[str, Path] | None = None
) -> Path:
    """A ``[record] feed_keys_file`` registering simulated tables' keys and each real table
    daemon's own ``feed.key`` (made here in its workdir, as ``paigow-table feed-key init`` does
    at install; the daemon finds it beside its journal)."""
    from controller.mqtt.feed_key import create_feed_key
    from pit.keys import keys_line
    from simulators.feed import sim_keys_text

    lines = [sim_keys_text(list(simulated))]
    for table_id, workdir in (daemons or {}).items():
        workdir.mkdir(parents=True, exist_ok=True)
        signer, _ = create_feed_key(workdir / "feed.key")
        lines.append(keys_line(table_id, signer.public_key))
    path.write_text("".join(lines), encoding="utf-8")
    return path
