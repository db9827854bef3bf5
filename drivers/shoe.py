"""The shoe driver: a smart dealing shoe in card mode (a CardSource).

The shoe emits one CardDealt per card; forming packets of seven is the controller's job.
"""

from __future__ import annotations

from typing import ClassVar

from drivers.base import Backoff
from drivers.codecs.shoe import ReferenceShoeCodec
from drivers.framing import Codec
from drivers.stream import DEFAULT_BACKOFF, StreamDevice, Transport

# a dealer draws cards by hand, so a pause is longer than a shuffler's
DEFAULT_SILENCE_TIMEOUT = 60.0


class ShoeDevice(StreamDevice):
    """A shoe on ``transport``; the reference codec unless a vendor's is given.

    Emits DealStarted, CardDealt ×49, StubVerified, DealEnded per deal; DeviceFault for the
    shoe's own faults and ``code="silence"`` when a deal stops for ``silence_timeout`` s.
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
            codec if codec is not None else ReferenceShoeCodec(name),
            backoff=backoff,
            frame_timeout=frame_timeout,
            silence_timeout=silence_timeout,
        )
