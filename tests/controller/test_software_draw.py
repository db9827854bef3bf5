"""A table without an RNG box: the daemon draws the first position in software as each deal
opens (``software_rng``), through the real daemon, the real serial shuffler driver on a pty and
the real journal. Nobody presses anything: every round's first position comes from the draw."""

from __future__ import annotations

import asyncio
from pathlib import Path

from controller.config import parse_config
from controller.devices import build_devices
from controller.journal import Journal
from controller.messages import RoundPayload
from controller.table import DeviceChanged, Effect, RoundClosed
from controller.wiring import build_daemon
from simulators.demo import DEMO_CONFIG
from simulators.pty import PtyPort
from simulators.shuffler import ShufflerSimulator

RNG_BOX = DEMO_CONFIG[DEMO_CONFIG.index("[devices.rng]") : DEMO_CONFIG.index("[journal]")]
SOFTWARE = '[devices.rng]\ndriver = "software_rng"\nrole = "position"\ntransport = "none"\n\n'


async def test_each_deal_is_given_a_software_draw_as_it_opens(tmp_path: Path) -> None:
    text = DEMO_CONFIG.replace(RNG_BOX, SOFTWARE).format(
        table="PG-SOFT", shuffler=tmp_path / "shuffler", rng="", journal=tmp_path / "j.sqlite3"
    )
    config = parse_config(text, check_files=False)
    closed: asyncio.Queue[RoundPayload] = asyncio.Queue()
    online: set[str] = set()
    up = asyncio.Event()

    def listen(effect: Effect) -> None:
        if isinstance(effect, RoundClosed):
            closed.put_nowait(effect.payload)
        elif isinstance(effect, DeviceChanged) and effect.payload.online:
            online.add(effect.payload.device)
            if {"shuffler", "rng"} <= online:
                up.set()

    shuffler = ShufflerSimulator(PtyPort(tmp_path / "shuffler"), seed=7)
    async with shuffler:
        devices, _sinks = build_devices(config)
        with Journal.open(tmp_path / "j.sqlite3", config.table.id) as journal:
            daemon = build_daemon(config, journal, devices, [])
            daemon.subscribe(listen)
            stop = asyncio.Event()
            task = asyncio.create_task(daemon.run(stop))
            try:
                await asyncio.wait_for(up.wait(), 15)
                rounds = []
                for _ in range(12):
                    await shuffler.deal()
                    rounds.append(await asyncio.wait_for(closed.get(), 15))
            finally:
                stop.set()
                await asyncio.wait_for(task, 15)
            assert not daemon._draw.tasks  # noqa: SLF001 - every draw finished, none held
    assert [r.status for r in rounds] == ["settled"] * 12
    draws = [r.first_position for r in rounds]
    assert all(d is not None and d.method == "software_rng" for d in draws)
    numbers = {d.number for d in draws if d is not None}
    assert numbers <= set(range(1, 8)) and len(numbers) > 1  # drawn, not one fixed number
