"""What the round state machine takes in (device events, commands, ticks) and gives out: the
effects the daemon journals and every listener hears, in order."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.messages import (
    AlarmPayload,
    Command,
    DevicePayload,
    PlayerPayload,
    PositionDraw,
    RoundPayload,
    StatusPayload,
)
from drivers.events import (
    DeviceEvent,
)

PACKETS = 7
PACKET_SIZE = 7
DEALER_POSITION = 1


@dataclass(frozen=True, slots=True)
class Tick:
    """The daemon's clock, fed every second or so: lets a silent deal time out."""

    now: datetime


TableEvent = DeviceEvent | Command | Tick


# --- effects --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoundOpened:
    """A round begins. ``draw``: a first-position draw made before the deal, now this round's."""

    round_id: str
    round_seq: int
    shuffle_id: str
    opened_at: datetime
    draw: PositionDraw | None = None


@dataclass(frozen=True, slots=True)
class RoundClosed:
    """A round's final word (settled, dead, misdeal or void): journal it, then send and show it.
    ``revises_settled``: a void of a round that had already settled (its results are void)."""

    payload: RoundPayload
    revises_settled: bool = False


@dataclass(frozen=True, slots=True)
class PlayerSettled:
    payload: PlayerPayload


@dataclass(frozen=True, slots=True)
class AlarmRaised:
    payload: AlarmPayload


@dataclass(frozen=True, slots=True)
class DeviceChanged:
    payload: DevicePayload


@dataclass(frozen=True, slots=True)
class StatusChanged:
    payload: StatusPayload


@dataclass(frozen=True, slots=True)
class RoundProgress:
    """For the display only: how far the current deal has got."""

    round_id: str
    packets: int
    cards: int
    position: PositionDraw | None
    waiting_for: str


@dataclass(frozen=True, slots=True)
class CommandReply:
    request_id: str | None
    command: str
    ok: bool
    error: str | None = None
    data: dict[str, Any] | None = None


Effect = (
    RoundOpened
    | RoundClosed
    | PlayerSettled
    | AlarmRaised
    | DeviceChanged
    | StatusChanged
    | RoundProgress
    | CommandReply
)
