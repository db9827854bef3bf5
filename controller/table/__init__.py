"""The round: a pure state machine (``machine``), what it takes in and gives out (``effects``),
and the results it builds (``results``). No I/O, no clock of its own (docs/rules.md §6)."""

from controller.table.effects import (
    DEALER_POSITION,
    PACKET_SIZE,
    PACKETS,
    AlarmRaised,
    CommandReply,
    DeviceChanged,
    Effect,
    PlayerSettled,
    RoundClosed,
    RoundOpened,
    RoundProgress,
    StatusChanged,
    TableEvent,
    Tick,
)
from controller.table.machine import Phase, Table, TableSettings
from controller.table.results import player_result

__all__ = [
    "DEALER_POSITION",
    "PACKETS",
    "PACKET_SIZE",
    "AlarmRaised",
    "CommandReply",
    "DeviceChanged",
    "Effect",
    "Phase",
    "PlayerSettled",
    "RoundClosed",
    "RoundOpened",
    "RoundProgress",
    "StatusChanged",
    "Table",
    "TableEvent",
    "TableSettings",
    "Tick",
    "player_result",
]
