"""The clock's synchronisation (controller/clock_sync.py): read without privileges, reported in
the status, an alarm when no time service disciplines the clock (docs/operations.md, Time)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from controller import clock_sync
from controller.table import AlarmRaised
from simulators import demo
from tests.harness import running_table


def test_the_kernel_says_or_the_timesyncd_flag_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert clock_sync.kernel_state() in (True, False, None)  # never raises
    flag = tmp_path / "timesync" / "synchronized"
    monkeypatch.setattr(clock_sync, "kernel_state", lambda: None)  # as under ProtectClock=yes
    assert clock_sync.clock_synchronized(flag) is None  # no timesyncd: cannot tell
    flag.parent.mkdir()
    assert clock_sync.clock_synchronized(flag) is False  # timesyncd, not synchronised yet
    flag.touch()
    assert clock_sync.clock_synchronized(flag) is True
    monkeypatch.setattr(clock_sync, "kernel_state", lambda: False)
    assert clock_sync.clock_synchronized(flag) is False  # the kernel's word first


async def test_an_unsynchronised_clock_is_an_alarm_and_in_the_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        demo, "DEMO_CONFIG", demo.DEMO_CONFIG.replace("time_sync = false", "time_sync = true")
    )
    state: list[bool | None] = [True]
    async with running_table(tmp_path) as t:
        watch = t.service("clock_sync")
        watch.probe = lambda: state[0]

        async def looked(expected: bool) -> None:
            watch.look_now.set()  # look again now
            async with asyncio.timeout(10):
                while t.daemon.table.status().clock_synchronized is not expected:
                    await asyncio.sleep(0.05)

        await looked(True)
        assert not [e for e in t.effects if isinstance(e, AlarmRaised)]  # no news at start
        state[0] = False
        await looked(False)
        alarms = [e.payload for e in t.effects if isinstance(e, AlarmRaised)]
        assert [a.code for a in alarms] == ["clock_unsynchronized"]
        assert alarms[0].severity == "warning" and not alarms[0].ack_required
        state[0] = True
        await looked(True)
        codes = [e.payload.code for e in t.effects if isinstance(e, AlarmRaised)]
        assert codes == ["clock_unsynchronized", "clock_synchronized"]
    with sqlite3.connect(tmp_path / "journal.sqlite3") as conn:
        recorded = conn.execute("SELECT payload FROM events WHERE kind = 'clock_sync'").fetchall()
    assert recorded == [
        ('{"synchronized":true}',),
        ('{"synchronized":false}',),
        ('{"synchronized":true}',),
    ]
