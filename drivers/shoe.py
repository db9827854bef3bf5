"""The shoe driver: a smart dealing shoe in card mode (a CardSource).

The shoe emits one CardDealt per card; forming packets of seven is the controller's job.
"""

from __future__ import annotations

from typing import ClassVar

from drivers.codecs.shoe import ReferenceShoeCodec
from drivers.stream import StreamDevice

# a dealer draws cards by hand, so a pause is longer than a shuffler's
DEFAULT_SILENCE_TIMEOUT = 60.0


class ShoeDevice(StreamDevice):
    """A shoe on ``transport``; the reference codec unless a vendor's is given.

    Emits DealStarted, CardDealt ×49, StubVerified, DealEnded per deal; DeviceFault for the
    shoe's own faults and ``code="silence"`` when a deal stops for ``silence_timeout`` s.
    """

    role: ClassVar[str] = "cards"
    default_codec = ReferenceShoeCodec
    default_silence_timeout = DEFAULT_SILENCE_TIMEOUT
