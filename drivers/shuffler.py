"""The shuffler driver: a card-recognizing shuffler in packet mode (a CardSource)."""

from __future__ import annotations

from typing import ClassVar

from drivers.codecs.shuffler import ReferenceShufflerCodec
from drivers.stream import StreamDevice

DEFAULT_SILENCE_TIMEOUT = 10.0


class ShufflerDevice(StreamDevice):
    """A shuffler on ``transport``; the reference codec unless a vendor's is given.

    Emits DealStarted, PacketDealt ×7, StubVerified, DealEnded per deal; DeviceFault for the
    shuffler's own faults and ``code="silence"`` when a deal stops for ``silence_timeout`` s.
    """

    role: ClassVar[str] = "cards"
    default_codec = ReferenceShufflerCodec
    default_silence_timeout = DEFAULT_SILENCE_TIMEOUT
