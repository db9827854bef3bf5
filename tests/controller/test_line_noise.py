"""Noise before a device's first good frame, end to end (docs/protocols.md §8, docs/faults.md §2):
the real serial driver on a pty, the daemon, its limiter, the table and the journal. Modelled on
``test_line_noise_costs_a_bounded_journal_and_the_page_still_answers`` (tests/controller/
test_faults.py), which covers noise after the first frame."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from pathlib import Path

from controller.table import AlarmRaised, DeviceChanged, Effect
from simulators.pty import PtyPort
from tests.harness import running_table

NOISE_SEED = 2026  # 200 KB of it hold no good frame by chance (tests/drivers/test_noise.py)
NOISE_SIZE = 200_000


async def _until(condition, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def _shuffler_online(effect: Effect, online: bool) -> bool:
    return (
        isinstance(effect, DeviceChanged)
        and effect.payload.device == "shuffler"
        and effect.payload.online is online
    )


async def test_noise_before_a_devices_first_frame_is_a_frame_error_alarm(tmp_path: Path) -> None:
    """The shuffler comes back on a new pty and sends 200 KB of noise before its first good
    frame (as a device on the wrong baud rate, or babbling at power-up, does): one frame_error
    alarm for it, the errors journaled and counted, and the deal after it settles."""
    async with running_table(tmp_path, seed=59) as t:
        port = t.shuffler.port
        assert isinstance(port, PtyPort)
        greeted = asyncio.Event()
        # The device stays mute to the host's greeting, so no good frame precedes the noise.
        port.set_receiver(lambda data: greeted.set())
        await port.unplug()
        await _until(lambda: any(_shuffler_online(e, False) for e in t.effects))
        mark = len(t.effects)
        await port.replug()
        await asyncio.wait_for(greeted.wait(), 10)  # the driver has the new pty open
        noise = random.Random(NOISE_SEED).randbytes(NOISE_SIZE)
        for at in range(0, NOISE_SIZE, 4096):
            assert await port.write(noise[at : at + 4096])
        after = await t.deal(rng_number=2)  # the device's first good frames
        assert after.status == "settled"
        since = t.effects[mark:]
        alarms = [
            i
            for i, e in enumerate(since)
            if isinstance(e, AlarmRaised) and e.payload.code == "frame_error"
        ]
        [online] = [i for i, e in enumerate(since) if _shuffler_online(e, True)]
        held = t.daemon.limiter.holding()
    assert len(alarms) == 1, "noise before the first frame raised no frame_error alarm"
    alarm = since[alarms[0]]
    assert isinstance(alarm, AlarmRaised) and alarm.payload.device == "shuffler"
    assert alarms[0] < online  # heard while the device was not yet online
    assert held > 100  # the rest counted for the interval's summary, not one alarm each
    with sqlite3.connect(tmp_path / "journal.sqlite3") as conn:
        rows = conn.execute("SELECT payload FROM events WHERE kind = 'frame_error'").fetchall()
    journaled = [json.loads(payload) for (payload,) in rows]
    assert len(journaled) == 1 and journaled[0]["device"] == "shuffler"
    assert journaled[0]["discarded"] > 0
