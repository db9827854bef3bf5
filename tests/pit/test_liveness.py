"""Issue 30: a crashed or silent table shows as such within seconds, and the pit stops on SIGTERM
in every state.

- A real table daemon killed -9 under a real ``pit run`` (default liveness settings): its tile
  says offline within 30 s (the broker's last will, applied by arrival though its claimed time
  and seq are those of the connect), with the pit's "last heard".
- A table that falls silent without a will (a simulated table: nobody answers for it) is probed
  with ``status_request``, then marked silent with a ``table_silent`` record alarm; a real idle
  daemon, probed the same way, answers and stays online.
- ``pit run`` with its broker refusing, or accepting and never answering: SIGTERM ends it
  within a few seconds.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

from simulators.feed import SimTable, wire
from simulators.mosquitto import Mosquitto
from simulators.tables import TableDaemon, table_mqtt_section
from tests.pit.conftest import (
    KEY,
    RunningIngest,
    feed_keys_file,
    make_config,
    publish,
    read_store,
)
from tests.pit.test_tables import _pit_process, _wait


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _floor(url: str) -> dict[str, dict[str, Any]]:
    async with aiohttp.ClientSession() as http, http.get(f"{url}/api/floor") as r:
        assert r.status == 200, await r.text()
        return {t["table_id"]: t for t in (await r.json())["tiles"]}


async def test_a_killed_table_shows_offline_within_30_s(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    web = _free_port()
    keys, workdir = tmp_path / "feed-keys", tmp_path / "PG-01"
    config = tmp_path / "pit.toml"
    config.write_text(
        f'[site]\nid = "demo"\n[broker]\nport = {broker.port}\nprotocol = "5"\n'
        f'client_id = "pit-kill"\n[database]\nurl = "{db_url}"\n'
        f'[record]\nfeed_keys_file = "{feed_keys_file(keys, daemons={"PG-01": workdir})}"\n'
        f'[web]\nhost = "127.0.0.1"\nport = {web}\n'
    )
    log = tmp_path / "pit.log"
    pit = _pit_process(config, log)
    table = TableDaemon("PG-01", tmp_path / "PG-01", extra=table_mqtt_section(broker.port), seed=5)
    url = f"http://127.0.0.1:{web}"
    try:
        await _wait(lambda: "pit_web_listening" in log.read_text(), 60)
        await table.start()
        await table.deal()
        floor: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 30
        while floor.get("PG-01", {}).get("last_round") is None:
            assert time.monotonic() < deadline, floor
            floor = await _floor(url)
            await asyncio.sleep(0.2)
        tile = floor["PG-01"]
        assert tile["state"] in ("online", "closed")
        killed = time.monotonic()
        await table.stop(kill=True)
        while (await _floor(url))["PG-01"]["state"] not in ("offline", "silent"):
            assert time.monotonic() - killed < 30, "the killed table still shows as online"
            await asyncio.sleep(0.2)
        shown = time.monotonic() - killed
        tile = (await _floor(url))["PG-01"]
        print(f"killed table shown {tile['state']} after {shown:.2f} s")
        assert time.time() - 60 < tile["last_heard"] <= time.time()
    finally:
        pit.send_signal(signal.SIGTERM)
        pit.wait(30)
        await table.close()
    assert pit.returncode == 0


async def test_a_silent_table_is_probed_then_marked_and_a_live_one_answers(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    keys = feed_keys_file(tmp_path / "feed-keys", daemons={"PG-02": tmp_path / "PG-02"})
    extra = (
        f'[liveness]\nprobe_after = 1.0\nsilent_after = 3.0\n[record]\nfeed_keys_file = "{keys}"\n'
    )
    config = make_config(broker.port, db_url, protocol="5", client_id="pit-live", extra=extra)
    table = TableDaemon("PG-02", tmp_path / "PG-02", extra=table_mqtt_section(broker.port), seed=6)
    ghost = SimTable("PG-03", key=KEY)  # it said online once; nothing answers for it since
    try:
        async with RunningIngest(config) as pit:
            await table.start()
            await publish(broker.port, [(t, wire(b)) for t, b in [ghost.status(datetime.now(UTC))]])
            store = read_store(config)
            await pit.until(lambda: {"PG-02", "PG-03"} <= set(store.pages.table_ids()))
            started = time.monotonic()
            await pit.until(lambda: store.pages.tiles(["PG-03"])[0]["state"] == "silent", 15)
            marked = time.monotonic() - started
            # The real daemon was quiet as long, was probed, answered: not silent.
            await pit.until(lambda: pit.ingest.liveness.probes_sent >= 4, 15)
            live = store.pages.tiles(["PG-02"])[0]
            assert live["state"] in ("online", "closed") and live["silent_since"] is None
            assert live["last_heard"] > time.time() - 3
            kinds = [a["kind"] for a in store.pages.tiles(["PG-03"])[0]["record_alarms"]]
            assert kinds == ["table_silent"]
            assert store.pages.tiles(["PG-02"])[0]["record_alarms"] == []
            print(f"silent table marked after {marked:.2f} s (silent_after 3 s)")
            # It speaks again: the mark goes (the record alarm stays until acknowledged).
            await publish(broker.port, [(t, wire(b)) for t, b in [ghost.status(datetime.now(UTC))]])
            await pit.until(lambda: store.pages.tiles(["PG-03"])[0]["silent_since"] is None, 10)
            assert store.pages.tiles(["PG-03"])[0]["state"] in ("online", "closed")
            store.close()
    finally:
        await table.close()


class _Mute:
    """A broker address that accepts connections and never answers."""

    def __init__(self) -> None:
        self.accepted = asyncio.Event()
        self.writers: list[asyncio.StreamWriter] = []

    async def _on(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.writers.append(writer)
        self.accepted.set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._on, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        for w in self.writers:
            w.close()
        self.server.close()


async def _stops_within(config: Path, log: Path, ready: Any, seconds: float) -> float:
    pit = _pit_process(config, log)
    try:
        await ready()
        sent = time.monotonic()
        pit.send_signal(signal.SIGTERM)
        while pit.poll() is None:
            assert time.monotonic() - sent < seconds, "pit run ignored SIGTERM"
            await asyncio.sleep(0.05)
        assert pit.returncode == 0, log.read_text()
        return time.monotonic() - sent
    finally:
        if pit.poll() is None:
            pit.kill()
            pit.wait()


async def test_sigterm_ends_pit_run_while_the_broker_is_unreachable(tmp_path: Path) -> None:
    refused, mute = _free_port(), _Mute()
    mute_port = await mute.start()
    try:
        for name, port in (("refused", refused), ("mute", mute_port)):
            config = tmp_path / f"{name}.toml"
            config.write_text(
                f'[site]\nid = "demo"\n[broker]\nport = {port}\n'
                f'[database]\nurl = "sqlite:///{tmp_path / name}.sqlite3"\n[web]\nenabled = false\n'
            )
            log = tmp_path / f"{name}.log"
            log.touch()

            async def ready(log: Path = log, name: str = name) -> None:
                if name == "mute":
                    await asyncio.wait_for(mute.accepted.wait(), 30)
                else:
                    await _wait(lambda: "pit_mqtt_lost" in log.read_text(), 30)

            took = await _stops_within(config, log, ready, 5.0)
            print(f"broker {name}: SIGTERM ended pit run in {took:.2f} s")
    finally:
        await mute.close()
