"""Reference RNG box (docs/protocols.md "RNG box").

The dealer presses the box's button; the box draws a number 1–7 and sends DRAW. The number names
the position that receives the first packet (docs/rules.md §6).
"""

from __future__ import annotations

from typing import ClassVar

from drivers.events import DeviceEvent, PositionDrawn
from drivers.framing import Frame, Message, MsgType, ReferenceCodec, msg_fault, msg_status

__all__ = ["ReferenceRngCodec", "msg_draw", "msg_fault", "msg_status"]

POSITIONS = range(1, 8)


def msg_draw(number: int) -> Message:
    """DRAW: the number drawn, 1–7."""
    return MsgType.DRAW, bytes((number,))


class ReferenceRngCodec(ReferenceCodec):
    """Host side of the reference RNG box: PositionDrawn(method="rng")."""

    accepts: ClassVar[frozenset[MsgType]] = frozenset({MsgType.STATUS, MsgType.FAULT, MsgType.DRAW})

    def _decode(self, msg_type: MsgType, frame: Frame) -> list[DeviceEvent]:
        if msg_type is MsgType.DRAW:
            if len(frame.payload) != 1 or frame.payload[0] not in POSITIONS:
                return self._bad_payload(frame, "1 byte, a number 1–7")
            return [PositionDrawn(device=self.device, method="rng", number=frame.payload[0])]
        return super()._decode(msg_type, frame)
