"""Helpers for driver tests: an event sink to wait on, a device running in a task, a port in
memory for codec round trips. Tests wait on events with timeouts, never on sleeps."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TypeVar

import pytest

from controller.game.cards import DECK
from drivers.base import Backoff, Device
from drivers.events import DeviceEvent

FAST_BACKOFF = Backoff(initial=0.02, factor=2.0, cap=0.2, jitter=0.0)
WAIT = 3.0  # generous on a loaded box; the fast path takes milliseconds
ALL_CARDS = frozenset(str(card) for card in DECK)

E = TypeVar("E", bound=DeviceEvent)


class Events:
    """The sink a driver writes to; tests await what they expect, with a timeout."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[DeviceEvent] = asyncio.Queue()
        self.seen: list[DeviceEvent] = []

    def put_nowait(self, item: DeviceEvent, /) -> None:
        self.queue.put_nowait(item)

    async def next(self, timeout: float = WAIT) -> DeviceEvent:
        async with asyncio.timeout(timeout):
            event = await self.queue.get()
        self.seen.append(event)
        return event

    async def until(self, kinds: str | Iterable[str], timeout: float = WAIT) -> list[DeviceEvent]:
        """Events up to and including the first of one of ``kinds``."""
        wanted = {kinds} if isinstance(kinds, str) else set(kinds)
        out: list[DeviceEvent] = []
        async with asyncio.timeout(timeout):
            while True:
                event = await self.queue.get()
                self.seen.append(event)
                out.append(event)
                if event.kind in wanted:
                    return out

    async def expect(self, kind: type[E], timeout: float = WAIT) -> E:
        """The next event, which must be of type ``kind``."""
        event = await self.next(timeout)
        assert isinstance(event, kind), f"expected {kind.__name__}, got {event!r}"
        return event

    def pending(self) -> list[DeviceEvent]:
        out = []
        while not self.queue.empty():
            out.append(self.queue.get_nowait())
        return out


@pytest.fixture
def events() -> Events:
    return Events()


@contextlib.asynccontextmanager
async def running(device: Device, sink: Events) -> AsyncIterator[asyncio.Task[None]]:
    """Run ``device`` in a task; on exit cancel it and check it ended only by cancellation."""
    task = asyncio.create_task(device.run(sink), name=f"test.{device.name}.run")
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled(), "a driver's run ended other than by cancellation"


class MemoryPort:
    """A Port that keeps what the simulator writes, for codec round trips without a line."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.plugged = True
        self.receiver: Callable[[bytes], None] | None = None

    @property
    def path(self) -> str:
        return "memory"

    def describe(self) -> str:
        return "memory"

    def set_receiver(self, receiver: Callable[[bytes], None]) -> None:
        self.receiver = receiver

    async def open(self) -> None:
        self.plugged = True

    async def write(self, data: bytes) -> bool:
        if self.plugged:
            self.data += data
        return self.plugged

    async def unplug(self) -> None:
        self.plugged = False

    async def replug(self) -> None:
        self.plugged = True

    async def close(self) -> None:
        self.plugged = False

    def take(self) -> bytes:
        out = bytes(self.data)
        self.data.clear()
        return out
