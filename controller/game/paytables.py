"""Paytables of the side wagers as data, selected by name (docs/rules.md §8).

A paytable maps a line id to what the line pays: "to 1" for Chan Chu, Jacks Beat and Push Ace
High (0 is a push, -1 a loss), whole dollars for the Chan Chu Envy bonus. Line ids are a contract
shared with the wager settlement and the JSON feed; they never change spelling. Paytables are
immutable and their lines are listed highest line first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final, Literal

PUSH: Final = 0
LOSS: Final = -1

PayUnit = Literal["to_1", "dollars"]

# docs/rules.md §8 Chan Chu, highest line first; settlement breaks equal pays by this order.
CHAN_CHU_LINES: Final[tuple[str, ...]] = (
    "any_7_straight_flush",
    "natural_7_straight_flush",
    "royal_flush_royal_match",
    "wild_7_straight_flush",
    "super_full_house",
    "five_aces",
    "natural_7_flush",
    "royal_flush",
    "natural_7_straight",
    "straight_flush",
    "four_of_a_kind",
    "full_house",
    "flush",
    "three_of_a_kind",
    "straight",
    "three_pair",
    "other",
)

# docs/rules.md §8 Envy bonus.
ENVY_LINES: Final[tuple[str, ...]] = (
    "natural_7_straight_flush",
    "royal_flush_royal_match",
    "wild_7_straight_flush",
    "five_aces",
    "royal_flush",
    "straight_flush",
    "four_of_a_kind",
)

# docs/rules.md §8 Jacks Beat: the player's best five-card hand.
JACKS_BEAT_LINES: Final[tuple[str, ...]] = (
    "five_aces",
    "royal_flush",
    "straight_flush",
    "four_of_a_kind",
    "full_house",
    "flush",
    "straight",
    "three_of_a_kind",
    "two_pair",
    "pair",
    "high_card",
)

# docs/rules.md §8 Push Ace High.
PUSH_ACE_HIGH_LINES: Final[tuple[str, ...]] = (
    "dealer_and_player_ace_high",
    "dealer_ace_high_joker",
    "dealer_ace_high",
)


class PaytableError(ValueError):
    """A paytable name or line that this game does not have; the message says what exists."""


@dataclass(frozen=True, slots=True)
class Paytable:
    """One paytable: ``pays`` maps line id → pay, highest line first (a read-only mapping)."""

    game: str
    name: str
    unit: PayUnit
    pays: Mapping[str, int]
    posted_house_edge: float | None = None  # percent, as the seed posts it; None if unpublished

    def __post_init__(self) -> None:
        # Copy and freeze, so that no one holding the caller's dict can edit a shared paytable.
        object.__setattr__(self, "pays", MappingProxyType(dict(self.pays)))

    def __hash__(self) -> int:
        return hash((self.game, self.name, self.unit, tuple(self.pays.items())))

    def __contains__(self, line: object) -> bool:
        return line in self.pays

    def __iter__(self) -> Iterator[str]:
        return iter(self.pays)

    def pay(self, line: str) -> int:
        """What ``line`` pays; PaytableError if this paytable has no such line."""
        try:
            return self.pays[line]
        except KeyError:
            raise PaytableError(
                f'{self.game} paytable {self.name} has no line "{line}" '
                f"(it has {', '.join(self.pays)})"
            ) from None

    def to_dict(self) -> dict[str, object]:
        return {
            "game": self.game,
            "name": self.name,
            "unit": self.unit,
            "lines": [{"line": line, "pays": pays} for line, pays in self.pays.items()],
            "posted_house_edge": self.posted_house_edge,
        }


_CC = "Chan Chu"
_ENVY = "Envy"
_JB = "Jacks Beat"
_NO = None  # the paytable has no such line

# The tables below are docs/rules.md §8 row for row, so they are kept aligned by hand.
# fmt: off
# docs/rules.md §8 Chan Chu ("to 1"; the rule sheet decides: PT4 and PT5 pay three of a kind 3 to
# 1).
_CHAN_CHU_ROWS: Final[dict[str, tuple[int | None, ...]]] = {
    #                            PT1   PT2   PT3   PT4   PT5
    "any_7_straight_flush":     (5000, 2000, _NO,  _NO,  _NO),
    "natural_7_straight_flush": (_NO,  _NO,  5000, 8000, 2500),
    "royal_flush_royal_match":  (_NO,  _NO,  1000, 2000, 1000),
    "wild_7_straight_flush":    (_NO,  _NO,  750,  1000, 750),
    "super_full_house":         (2000, 1000, _NO,  _NO,  _NO),
    "five_aces":                (500,  300,  250,  400,  250),
    "natural_7_flush":          (200,  125,  _NO,  _NO,  _NO),
    "royal_flush":              (100,  100,  100,  150,  125),
    "natural_7_straight":       (50,   50,   _NO,  _NO,  _NO),
    "straight_flush":           (40,   40,   50,   50,   50),
    "four_of_a_kind":           (20,   20,   20,   25,   25),
    "full_house":               (5,    5,    5,    5,    5),
    "flush":                    (4,    4,    4,    4,    4),
    "three_of_a_kind":          (3,    3,    3,    3,    3),
    "straight":                 (2,    2,    2,    2,    2),
    "three_pair":               (LOSS, LOSS, PUSH, LOSS, LOSS),
    "other":                    (LOSS, LOSS, LOSS, LOSS, LOSS),
}
_CHAN_CHU_NAMES: Final = ("PT1", "PT2", "PT3", "PT4", "PT5")
_CHAN_CHU_EDGES: Final = (4.35, 5.84, 8.00, 7.77, 8.49)  # percent, the rule sheet

# docs/rules.md §8 Envy bonus (dollars); only Chan Chu paytables 3–5 have one.
_ENVY_ROWS: Final[dict[str, tuple[int | None, ...]]] = {
    #                            PT3   PT4   PT5
    "natural_7_straight_flush": (1000, 5000, 1000),
    "royal_flush_royal_match":  (250,  1000, 750),
    "wild_7_straight_flush":    (100,  500,  250),
    "five_aces":                (50,   250,  100),
    "royal_flush":              (25,   50,   50),
    "straight_flush":           (10,   20,   20),
    "four_of_a_kind":           (5,    5,    5),
}
_ENVY_NAMES: Final = ("PT3", "PT4", "PT5")

# docs/rules.md §8 Jacks Beat (the rule sheet's second copy Table 1, "to 1").
_JACKS_BEAT_ROWS: Final[dict[str, tuple[int | None, ...]]] = {
    #                    A     B     C     D
    "five_aces":        (1000, 1000, 1000, 1000),
    "royal_flush":      (500,  500,  500,  500),
    "straight_flush":   (250,  250,  200,  200),
    "four_of_a_kind":   (100,  100,  100,  100),
    "full_house":       (60,   50,   40,   50),
    "flush":            (25,   25,   25,   30),
    "straight":         (20,   20,   20,   25),
    "three_of_a_kind":  (15,   15,   15,   15),
    "two_pair":         (10,   10,   10,   10),
    "pair":             (5,    5,    5,    5),
    "high_card":        (5,    5,    5,    5),
}
_JACKS_BEAT_NAMES: Final = ("A", "B", "C", "D")
_JACKS_BEAT_EDGES: Final = (None, 8.84, None, None)  # the outside analysis analyses column B only

# docs/rules.md §8 Push Ace High ("to 1"), one posted paytable.
_PUSH_ACE_HIGH_ROWS: Final[dict[str, tuple[int | None, ...]]] = {
    #                              standard
    "dealer_and_player_ace_high": (40,),
    "dealer_ace_high_joker":      (15,),
    "dealer_ace_high":            (5,),
}
# fmt: on


def _columns(
    game: str,
    unit: PayUnit,
    order: tuple[str, ...],
    rows: dict[str, tuple[int | None, ...]],
    names: tuple[str, ...],
    edges: tuple[float | None, ...],
) -> Mapping[str, Paytable]:
    if list(rows) != list(order) or any(len(pays) != len(names) for pays in rows.values()):
        raise AssertionError(f"{game}: the rows do not match the line ids")
    tables: dict[str, Paytable] = {}
    for i, name in enumerate(names):
        pays: dict[str, int] = {}
        for line, row in rows.items():
            pay = row[i]
            if pay is not None:
                pays[line] = pay
        tables[name] = Paytable(game, name, unit, pays, edges[i])
    return MappingProxyType(tables)


CHAN_CHU_PAYTABLES: Final = _columns(
    _CC, "to_1", CHAN_CHU_LINES, _CHAN_CHU_ROWS, _CHAN_CHU_NAMES, _CHAN_CHU_EDGES
)
ENVY_PAYTABLES: Final = _columns(
    _ENVY, "dollars", ENVY_LINES, _ENVY_ROWS, _ENVY_NAMES, (None, None, None)
)
JACKS_BEAT_PAYTABLES: Final = _columns(
    _JB, "to_1", JACKS_BEAT_LINES, _JACKS_BEAT_ROWS, _JACKS_BEAT_NAMES, _JACKS_BEAT_EDGES
)
PUSH_ACE_HIGH_PAYTABLES: Final = _columns(
    "Push Ace High", "to_1", PUSH_ACE_HIGH_LINES, _PUSH_ACE_HIGH_ROWS, ("standard",), (None,)
)
PUSH_ACE_HIGH: Final = PUSH_ACE_HIGH_PAYTABLES["standard"]


def _lookup(tables: Mapping[str, Paytable], game: str, name: object) -> Paytable:
    key = name.strip().upper() if isinstance(name, str) else name
    for table_name, table in tables.items():
        if key == table_name.upper():
            return table
    raise PaytableError(f'unknown {game} paytable "{name}" (expected {", ".join(tables)})')


def chan_chu_paytable(name: str) -> Paytable:
    """The Chan Chu paytable "PT1"–"PT5" (any case); PaytableError naming the choices otherwise."""
    return _lookup(CHAN_CHU_PAYTABLES, _CC, name)


def envy_paytable(name: str) -> Paytable:
    """The Envy bonus paytable "PT3"–"PT5" (Chan Chu PT1 and PT2 have none)."""
    return _lookup(ENVY_PAYTABLES, _ENVY, name)


def jacks_beat_paytable(name: str) -> Paytable:
    """The Jacks Beat paytable "A"–"D"."""
    return _lookup(JACKS_BEAT_PAYTABLES, _JB, name)


def push_ace_high_paytable(name: str = "standard") -> Paytable:
    """The Push Ace High paytable; the rules post one, named "standard"."""
    return _lookup(PUSH_ACE_HIGH_PAYTABLES, "Push Ace High", name)
