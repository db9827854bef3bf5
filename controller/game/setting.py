"""A set hand (front and back) and the rule switches of docs/rules.md that change the game's
results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from controller.game.cards import DECK, Card, card_texts
from controller.game.hands import FrontValue, HandValue, evaluate, front_key, is_foul_keys


def display_order(cards: Sequence[Card]) -> list[Card]:
    """How a person reads a hand: bigger rank groups first ("K K K 3 3"), then higher ranks, the
    joker after the natural Aces."""
    counts: dict[int, int] = {}
    for c in cards:
        counts[c.rank] = counts.get(c.rank, 0) + 1
    return sorted(cards, key=lambda c: (-counts[c.rank], -c.rank, c.is_joker, -c.suit))


WheelRank = Literal["second_highest", "lowest"]


@dataclass(frozen=True, slots=True)
class Rules:
    """The switches of docs/rules.md, with its defaults."""

    wheel_rank: WheelRank = "second_highest"  # docs/rules.md §3
    ace_high_pushes_pai_gow: bool = False  # docs/rules.md §5

    @property
    def wheel_high(self) -> bool:
        return self.wheel_rank == "second_highest"


DEFAULT_RULES = Rules()


@dataclass(frozen=True, slots=True)
class Setting:
    """Seven cards split into a two-card front and a five-card back; ``rule`` names the House Way
    rule that chose it (None for a setting a player entered)."""

    front: tuple[Card, Card]
    back: tuple[Card, Card, Card, Card, Card]
    rule: str | None = None
    wheel_high: bool = field(default=True, compare=False)

    @classmethod
    def from_front(
        cls,
        cards: Sequence[Card],
        front: Sequence[Card],
        rule: str | None = None,
        wheel_high: bool = True,
    ) -> Setting:
        """The setting of seven distinct cards that puts ``front`` in front."""
        if len(cards) != 7 or len(set(cards)) != 7:
            raise ValueError("a setting needs seven distinct cards")
        if len(front) != 2 or front[0] == front[1] or any(c not in cards for c in front):
            raise ValueError("the front must be two of the seven cards")
        back = tuple(c for c in cards if c not in front)
        return cls((front[0], front[1]), back, rule, wheel_high)  # type: ignore[arg-type]

    @classmethod
    def from_positions(
        cls, ordered: Sequence[int], i: int, j: int, rule: str | None, wheel_high: bool = True
    ) -> Setting:
        """The setting of seven card codes in ascending order with ``ordered[i]`` and
        ``ordered[j]`` (i < j) in front, in the canonical (code) order ``house_way`` gives."""
        d = DECK
        back = [d[c] for k, c in enumerate(ordered) if k != i and k != j]
        return cls(
            (d[ordered[i]], d[ordered[j]]),
            (back[0], back[1], back[2], back[3], back[4]),
            rule,
            wheel_high,
        )

    @property
    def front_value(self) -> FrontValue:
        return FrontValue(front_key(self.front[0], self.front[1]))

    @property
    def back_value(self) -> HandValue:
        return HandValue(evaluate(self.back, self.wheel_high))

    @property
    def is_foul(self) -> bool:
        return is_foul_keys(
            front_key(self.front[0], self.front[1]), evaluate(self.back, self.wheel_high)
        )

    @property
    def cards(self) -> tuple[Card, ...]:
        return self.front + self.back

    def to_dict(self) -> dict[str, object]:
        return {
            "front": card_texts(display_order(self.front)),
            "back": card_texts(display_order(self.back)),
            "rule": self.rule,
            "front_hand": self.front_value.name,
            "back_hand": self.back_value.name,
        }
