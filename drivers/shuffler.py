"""The shuffler driver: a card-recognizing shuffler in packet mode (a CardSource)."""

from __future__ import annotations

from typing import ClassVar

from drivers.base import Backoff
from drivers.codecs.shuffler import ReferenceShufflerCodec
from drivers.framing import Codec
from drivers.stream import DEFAULT_BACKOFF, StreamDevice, Transport

DEFAULT_SILENCE_TIMEOUT = 10.0


class ShufflerDevice(StreamDevice):
    """A shuffler on ``transport``; the reference codec unless a vendor's is given.

    Emits DealStarted, PacketDealt ×7, StubVerified, DealEnded per deal; DeviceFault for the
    shuffler's own faults and ``code="silence"`` when a deal stops for ``silence_timeout`` s.
    """

    role: ClassVar[str] = "cards"

    def __init__(
        self,
        name: str,
        transport: Transport,
        codec: Codec | None = None,
        *,
        backoff: Backoff = DEFAULT_BACKOFF,
        frame_timeout: float = 0.25,
        silence_timeout: float | None = DEFAULT_SILENCE_TIMEOUT,
    ) -> None:
        super().__init__(
            name,
            transport,
            codec if codec is not None else ReferenceShufflerCodec(name),
            backoff=backoff,
            frame_timeout=frame_timeout,
            silence_timeout=silence_timeout,
        )
