"""What the protection tests see of one round: the deal, in the order the device dealt it, and
the first-position draw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from controller.game.cards import CardError, parse_card
from controller.messages import RoundPayload
from controller.protection.exact import DEALT, DECK_CARDS, PACKET_SIZE, PACKETS, STUB_SIZE

DrawMethod = Literal["rng", "software_rng", "dice", "dice_manual"]
DRAW_METHODS: tuple[DrawMethod, ...] = ("rng", "software_rng", "dice", "dice_manual")


@dataclass(frozen=True, slots=True)
class DealObservation:
    """One settled round: ``packets[i]`` is the i-th packet the device dealt (card codes 0–52, in
    the order reported), ``positions[i]`` the position 1–7 that received it (1: the dealer),
    ``stub`` the four cards not dealt (order unknown), and the first-position draw.

    Construction raises ValueError naming the fault when the deal is not seven packets of seven
    and a stub of four from one 53-card deck, or the positions or draw do not make sense."""

    round_id: str
    packets: tuple[tuple[int, ...], ...]
    stub: tuple[int, ...]
    positions: tuple[int, ...]
    draw_method: DrawMethod | None = None
    number: int | None = None
    dice: tuple[int, int, int] | None = None

    def __post_init__(self) -> None:
        if len(self.packets) != PACKETS or any(len(p) != PACKET_SIZE for p in self.packets):
            raise ValueError(f"round {self.round_id}: a deal is {PACKETS} packets of {PACKET_SIZE}")
        if len(self.stub) != STUB_SIZE:
            raise ValueError(f"round {self.round_id}: the stub has {len(self.stub)} cards, not 4")
        cards = {c for p in self.packets for c in p} | set(self.stub)
        if len(cards) != DECK_CARDS or min(cards) < 0 or max(cards) >= DECK_CARDS:
            raise ValueError(f"round {self.round_id}: the deal is not one whole 53-card deck")
        if sorted(self.positions) != list(range(1, PACKETS + 1)):
            raise ValueError(
                f"round {self.round_id}: positions {self.positions} are not 1–7 once each"
            )
        if self.draw_method is not None and self.draw_method not in DRAW_METHODS:
            raise ValueError(f"round {self.round_id}: unknown draw method {self.draw_method!r}")
        if self.number is not None and not 1 <= self.number <= PACKETS:
            raise ValueError(f"round {self.round_id}: RNG number {self.number} is not 1–7")
        if self.dice is not None and (
            len(self.dice) != 3 or any(not 1 <= d <= 6 for d in self.dice)
        ):
            raise ValueError(f"round {self.round_id}: dice {self.dice} are not three faces 1–6")

    @property
    def dealt(self) -> list[int]:
        """The 49 dealt cards in dealing order, packet by packet."""
        return [c for p in self.packets for c in p]


def observation_from_round(payload: RoundPayload) -> DealObservation | None:
    """The observation of a settled round with all seven packets; None for any other round (dead,
    misdealt, voided, or a packet missing). Packets are placed by each PositionCards' ``packet``
    number (1–7 in dealing order); the stub is the deck less the dealt cards, sorted. Raises
    ValueError (CardError) for a card text that is no card."""
    if payload.status != "settled" or len(payload.positions) != PACKETS:
        return None
    packets: list[tuple[int, ...] | None] = [None] * PACKETS
    positions = [0] * PACKETS
    for pc in payload.positions:
        if pc.packet is None or not 1 <= pc.packet <= PACKETS or packets[pc.packet - 1] is not None:
            return None
        packets[pc.packet - 1] = tuple(int(parse_card(text)) for text in pc.cards)
        positions[pc.packet - 1] = pc.position
    full = [p for p in packets if p is not None]
    if len(full) != PACKETS or any(len(p) != PACKET_SIZE for p in full):
        return None
    dealt = {c for p in full for c in p}
    if len(dealt) != DEALT:
        raise CardError(f"round {payload.round_id}: a card appears twice in the deal")
    draw = payload.first_position
    return DealObservation(
        round_id=payload.round_id,
        packets=tuple(full),
        stub=tuple(c for c in range(DECK_CARDS) if c not in dealt),
        positions=tuple(positions),
        draw_method=draw.method if draw is not None else None,
        number=draw.number if draw is not None else None,
        dice=draw.dice if draw is not None else None,
    )
