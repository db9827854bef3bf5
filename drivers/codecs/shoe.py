"""Reference smart dealing shoe, card mode (docs/protocols.md "Shoe").

The shoe reads one card at a time: DEAL_START, a CARD per card dealt (49 for a whole deal), the
STUB it reads when the dealer runs the last four cards through, DEAL_END. The controller forms
the packets of seven; the shoe knows nothing of packets.
"""

from __future__ import annotations

from typing import ClassVar

from drivers.events import CardDealt, DeviceEvent
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
    "ReferenceShoeCodec",
    "msg_card",
    "msg_deal_end",
    "msg_deal_start",
    "msg_fault",
    "msg_status",
    "msg_stub",
]


def msg_card(code: int) -> Message:
    """CARD: one card code."""
    return MsgType.CARD, bytes((code,))


class ReferenceShoeCodec(ReferenceCodec):
    """Host side of the reference shoe: DealStarted, CardDealt, StubVerified, DealEnded."""

    accepts: ClassVar[frozenset[MsgType]] = frozenset(
        {
            MsgType.STATUS,
            MsgType.FAULT,
            MsgType.DEAL_START,
            MsgType.CARD,
            MsgType.STUB,
            MsgType.DEAL_END,
        }
    )

    def _decode(self, msg_type: MsgType, frame: Frame) -> list[DeviceEvent]:
        if msg_type is MsgType.CARD:
            if len(frame.payload) != 1:
                return self._bad_payload(frame, "1 (card code)")
            cards, errors = self._cards(frame, frame.payload, "card")
            return [*errors, CardDealt(device=self.device, card=cards[0])]
        return super()._decode(msg_type, frame)
