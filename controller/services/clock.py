"""Whether a time service synchronises the table computer's clock (controller/clock_sync.py;
docs/operations.md, "Time"), a service: it looks every minute and puts a change on the table's
queue as a ``ClockSync`` event (an alarm when synchronisation stops, a notice when it is back).
Only with ``[table] time_sync = true``."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Protocol

from controller.clock_sync import clock_synchronized
from controller.ports import EventSink
from controller.table import ClockSync


class ClockHost(EventSink, Protocol):
    """What the clock watch uses: the table's queue."""


class ClockSyncService:
    name = "clock_sync"

    def __init__(
        self,
        probe: Callable[[], bool | None] = clock_synchronized,
        *,
        interval: float = 60.0,
        first_look: float = 1.0,
    ) -> None:
        self.probe = probe
        self.interval = interval
        self.first_look = first_look  # after the start, once the devices had a moment
        #: What the table was last told (None: nothing yet, or the probe cannot tell).
        self.state: bool | None = None
        self.look_now = asyncio.Event()  # set to look before the interval is over (tests)

    async def run(self, host: ClockHost) -> None:
        await asyncio.sleep(self.first_look)
        while True:
            # In a thread: the probe reads the kernel (and the first time finds the C library),
            # which must not stall the loop between a deal's last card and its publish.
            state = await asyncio.to_thread(self.probe)
            if state is not None and state != self.state:
                self.state = state
                host.put_nowait(ClockSync(synchronized=state))
            self.look_now.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.look_now.wait(), self.interval)
