"""Position sources for the first packet (docs/rules.md §6): the RNG box, or software.

``RngBoxDevice`` reads the box's button presses (PositionDrawn method "rng"). ``SoftwareRng``
is for tables without a box: it draws only when asked — the controller awaits ``draw()`` when
it needs a position (after DealStarted); it never draws on its own.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import ClassVar

import structlog

from drivers.base import EventSink
from drivers.codecs.rng import ReferenceRngCodec
from drivers.events import DeviceOffline, DeviceOnline, PositionDrawn
from drivers.stream import StreamDevice

_log = structlog.get_logger(__name__)


class RngBoxDevice(StreamDevice):
    """An RNG box on ``transport``; the reference codec unless a vendor's is given. It has no
    silence timer: the box speaks only when the button is pressed."""

    role: ClassVar[str] = "position"
    default_codec = ReferenceRngCodec


class SoftwareRng:
    """A position source drawn with ``secrets`` (PositionDrawn method "software_rng").

    ``run`` reports DeviceOnline and then waits (so it fits the daemon's Device list);
    ``draw`` returns the drawn event and also puts it on the sink ``run`` was given, if running.
    """

    role: ClassVar[str] = "position"

    def __init__(self, name: str) -> None:
        self.name = name
        self._sink: EventSink | None = None

    async def run(self, sink: EventSink) -> None:
        self._sink = sink
        sink.put_nowait(DeviceOnline(device=self.name, detail="software rng (secrets)"))
        try:
            await asyncio.Event().wait()
        finally:
            self._sink = None
            sink.put_nowait(DeviceOffline(device=self.name, reason="driver stopped"))

    async def draw(self) -> PositionDrawn:
        """A uniformly drawn position 1–7."""
        event = PositionDrawn(
            device=self.name, method="software_rng", number=secrets.randbelow(7) + 1
        )
        _log.info("position_drawn", device=self.name, number=event.number)
        if self._sink is not None:
            self._sink.put_nowait(event)
        return event
