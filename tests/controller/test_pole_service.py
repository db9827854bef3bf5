"""The pole display service (controller/services/pole.py) through the real pole driver on a pty."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from controller.messages import FaultOut, StatusPayload
from controller.services.pole import PoleService
from controller.table import Effect, StatusChanged
from drivers.events import DeviceOnline
from simulators.pole import PoleDisplaySimulator
from tests.drivers.test_pole import _run, expect


async def test_the_pole_shows_a_table_fault_and_its_end(tmp_path: Path) -> None:
    """The fault needs no disk: the pole service shows it from the status effect alone."""
    listeners: list[Callable[[Effect], None]] = []

    class Source:
        def subscribe(self, listener: Callable[[Effect], None]) -> None:
            listeners.append(listener)

    def hear(effect: Effect) -> None:
        for listener in listeners:
            listener(effect)

    async with PoleDisplaySimulator(link=tmp_path / "pole") as sim:
        async for rig in _run(sim, str(tmp_path / "pole")):
            await expect(rig.events, DeviceOnline)
            service = PoleService(rig.pole)
            task = asyncio.create_task(service.run(Source()))
            try:
                await asyncio.sleep(0)  # the service subscribes
                fault = FaultOut(
                    code="journal_write_failed",
                    detail="database or disk is full",
                    since=datetime(2026, 11, 24, tzinfo=UTC),
                )
                status = StatusPayload(state="fault", table_open=True, devices={}, fault=fault)
                hear(StatusChanged(status))
                shown = await sim.wait_for(lambda lines: "TABLE FAULT" in lines[0])
                assert "DO NOT SETTLE" in shown[1]
                hear(StatusChanged(status.model_copy(update={"state": "online", "fault": None})))
                shown = await sim.wait_for(lambda lines: "TABLE READY" in lines[0])
                assert "JOURNAL OK AGAIN" in shown[1]
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
