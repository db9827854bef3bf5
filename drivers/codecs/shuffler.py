"""Reference card-recognizing shuffler, packet mode (docs/protocols.md "Shuffler").

A deal is DEAL_START, seven PACKETs of seven cards (index 0–6), a STUB of four cards and
DEAL_END; STATUS and FAULT may come at any time.
"""

from __future__ import annotations

from typing import ClassVar

from drivers.events import DeviceEvent, PacketDealt
from drivers.framing import (
    Frame,
    Message,
    MsgType,
    ReferenceCodec,
    msg_deal_end,
    msg_deal_start,
    msg_fault,
    msg_status,
    msg_stub,
)

__all__ = [
    "ReferenceShufflerCodec",
    "msg_deal_end",
    "msg_deal_start",
    "msg_fault",
    "msg_packet",
    "msg_status",
    "msg_stub",
]


def msg_packet(index: int, codes: bytes | list[int]) -> Message:
    """PACKET: the packet's index in this deal (0–6), then its card codes."""
    return MsgType.PACKET, bytes((index,)) + bytes(codes)


class ReferenceShufflerCodec(ReferenceCodec):
    """Host side of the reference shuffler: DealStarted, PacketDealt, StubVerified, DealEnded."""

    accepts: ClassVar[frozenset[MsgType]] = frozenset(
        {
            MsgType.STATUS,
            MsgType.FAULT,
            MsgType.DEAL_START,
            MsgType.PACKET,
            MsgType.STUB,
            MsgType.DEAL_END,
        }
    )

    def _decode(self, msg_type: MsgType, frame: Frame) -> list[DeviceEvent]:
        if msg_type is MsgType.PACKET:
            if not frame.payload:
                return self._bad_payload(frame, "at least 1 (packet index)")
            index = frame.payload[0]
            cards, errors = self._cards(frame, frame.payload[1:], f"packet {index}")
            return [*errors, PacketDealt(device=self.device, index=index, cards=cards)]
        return super()._decode(msg_type, frame)
