"""Device roles and the reconnect policy every transport shares (docs/architecture.md "Drivers")."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from drivers.events import DeviceEvent


class EventSink(Protocol):
    """Where drivers put their events: in the daemon, the table's one asyncio.Queue."""

    def put_nowait(self, item: DeviceEvent, /) -> None: ...


class Device(Protocol):
    """A running device driver: ``run`` connects, reads, reconnects forever until cancelled."""

    name: str

    async def run(self, sink: EventSink) -> None: ...


class DisplaySink(Protocol):
    """A device that shows text lines (the pole display)."""

    name: str

    async def show(self, lines: Sequence[str]) -> None: ...


@dataclass(frozen=True, slots=True)
class Backoff:
    """Capped exponential backoff with jitter: ``initial * factor**n``, at most ``cap`` seconds."""

    initial: float = 0.1
    factor: float = 2.0
    cap: float = 5.0
    jitter: float = 0.1

    def delay(self, attempt: int) -> float:
        # Past the cap the exponent no longer matters; clamping it keeps a device that stays
        # away for hours from overflowing the float.
        base = min(self.cap, self.initial * self.factor ** min(max(0, attempt), 64))
        return base * (1 + random.uniform(-self.jitter, self.jitter))

    async def sleep(self, attempt: int) -> None:
        await asyncio.sleep(self.delay(attempt))
