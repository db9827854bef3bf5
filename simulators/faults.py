"""Fault scenarios the simulators can play, by name (docs/protocols.md "Simulators").

Card faults change what the device reports (the deal plan); line faults change the bytes or
the timing of the frame that carries packet ``FAULT_PACKET`` (for the shoe, that packet's first
card). Every scenario hits that one place, so a test knows where to look.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from controller.game.cards import DECK_SIZE, JOKER_CODE

PACKETS: Final = 7
PACKET_SIZE: Final = 7
STUB_SIZE: Final = DECK_SIZE - PACKETS * PACKET_SIZE
FAULT_PACKET: Final = 3
FOREIGN_CODE: Final = 0x7F


class Fault(StrEnum):
    SHORT_PACKET = "short_packet"  # packet 3 has six cards: one stuck in the machine
    EIGHT_CARDS = "eight_cards"  # packet 3 has eight cards: a stub card went into it
    DUPLICATE_CARD = "duplicate_card"  # packet 3 holds a second copy of packet 0's first card
    FOREIGN_CARD = "foreign_card"  # packet 3 holds a card code no deck has (0x7f)
    SECOND_JOKER = "second_joker"  # packet 3 holds a second joker
    GARBLED_BYTES = "garbled_bytes"  # line noise before packet 3's frame
    CHECKSUM_ERROR = "checksum_error"  # packet 3's frame is corrupted on the line
    SILENCE_MID_DEAL = "silence_mid_deal"  # the device stops before packet 3 and says no more
    UNPLUG_REPLUG = "unplug_replug"  # cable pulled before packet 3, back after the deal
    STUB_THREE_CARDS = "stub_three_cards"  # the stub report has three cards


FAULTS: Final = tuple(fault.value for fault in Fault)
LINE_FAULTS: Final = frozenset(
    {Fault.GARBLED_BYTES, Fault.CHECKSUM_ERROR, Fault.SILENCE_MID_DEAL, Fault.UNPLUG_REPLUG}
)


def parse_faults(faults: str | Iterable[str] | None) -> frozenset[Fault]:
    """Fault names from ``"a,b"`` or an iterable; ValueError names an unknown one."""
    if faults is None:
        return frozenset()
    names = faults.replace(",", " ").split() if isinstance(faults, str) else list(faults)
    out = set()
    for name in names:
        try:
            out.add(Fault(name))
        except ValueError:
            raise ValueError(
                f"unknown fault {name!r}; expected one of {', '.join(FAULTS)}"
            ) from None
    return frozenset(out)


@dataclass(slots=True)
class DealPlan:
    """What the device will report for one deal: raw card codes (the Card int, or foreign)."""

    shuffle_id: str
    deck: list[int]
    packets: list[list[int]] = field(default_factory=list)
    stub: list[int] = field(default_factory=list)

    @property
    def cards(self) -> list[int]:
        """The dealt cards in order, packet by packet (what a shoe reads one at a time)."""
        return [code for packet in self.packets for code in packet]


def plan_deal(deck: list[int], shuffle_id: str, faults: frozenset[Fault]) -> DealPlan:
    """Seven packets of seven and a stub of four from a shuffled deck, with card faults applied."""
    packets = [deck[i * PACKET_SIZE : (i + 1) * PACKET_SIZE] for i in range(PACKETS)]
    stub = deck[PACKETS * PACKET_SIZE :]
    target = packets[FAULT_PACKET]
    if Fault.SHORT_PACKET in faults:
        target.pop()
    if Fault.EIGHT_CARDS in faults:
        target.append(stub.pop())
    if Fault.DUPLICATE_CARD in faults:
        target[1] = packets[0][0]
    if Fault.FOREIGN_CARD in faults:
        target[2] = FOREIGN_CODE
    if Fault.SECOND_JOKER in faults:
        spot = next(i for i in range(3, len(target)) if target[i] != JOKER_CODE)
        target[spot] = JOKER_CODE
        if JOKER_CODE not in deck:
            raise ValueError("second_joker needs a deck with its joker")
    if Fault.STUB_THREE_CARDS in faults:
        stub = stub[:3]
    return DealPlan(shuffle_id=shuffle_id, deck=list(deck), packets=packets, stub=stub)


def line_noise(rng: random.Random, size: int = 12) -> bytes:
    """Junk bytes that hold no STX, so the host sees exactly one garbled run."""
    return bytes(rng.choice(range(3, 256)) for _ in range(size))


def corrupt(frame: bytes) -> bytes:
    """The frame with one payload bit flipped (or its CRC, if it has no payload)."""
    out = bytearray(frame)
    out[4 if len(frame) > 6 else -1] ^= 0x10
    return bytes(out)
