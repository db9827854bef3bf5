"""Hand values: five-card (back) and two-card (front) hands, with every joker rule (docs/rules.md
§2–4).

A value is an int key, so values compare with ``<`` and sort; ``HandValue`` is that int with a
name ("three of a kind, sevens"). The key packs the category in bits 20–23 and up to five rank
nibbles below it (most significant first), so ties between equal hands are exact and suits never
matter. Straights carry one "straight rank" nibble: 15 for A-K-Q-J-T, 14 for the wheel when it
ranks second highest (docs/rules.md §3), 5 when it ranks lowest, otherwise the high card.

``evaluate`` takes 5, 6 or 7 cards and returns the value of the best five-card hand among them,
computed directly from rank counts and suit masks (no enumeration of subsets), which the tests
check against a brute-force reference over every subset and every joker substitution.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import IntEnum
from typing import Final

from controller.game.cards import ACE, JOKER_CODE, RANK_NAMES, RANK_PLURALS


class Category(IntEnum):
    HIGH_CARD = 0
    ONE_PAIR = 1
    TWO_PAIR = 2
    THREE_OF_A_KIND = 3
    STRAIGHT = 4
    FLUSH = 5
    FULL_HOUSE = 6
    FOUR_OF_A_KIND = 7
    STRAIGHT_FLUSH = 8
    FIVE_ACES = 9


CATEGORY_LABELS: Final = {
    Category.HIGH_CARD: "high card",
    Category.ONE_PAIR: "one pair",
    Category.TWO_PAIR: "two pair",
    Category.THREE_OF_A_KIND: "three of a kind",
    Category.STRAIGHT: "straight",
    Category.FLUSH: "flush",
    Category.FULL_HOUSE: "full house",
    Category.FOUR_OF_A_KIND: "four of a kind",
    Category.STRAIGHT_FLUSH: "straight flush",
    Category.FIVE_ACES: "five aces",
}

ROYAL_STRAIGHT: Final = 15
WHEEL_HIGH: Final = 14
WHEEL_LOW: Final = 5

_CAT_SHIFT: Final = 20
_JOKER_BIT: Final = 1 << 13


def _build_straight_table(wheel_high: bool) -> list[int]:
    """Best straight rank for every 13-bit rank mask, with or without joker."""
    windows: list[tuple[int, int]] = []
    for high in range(ACE, 5, -1):
        mask = 0
        for r in range(high - 4, high + 1):
            mask |= 1 << (r - 2)
        windows.append((ROYAL_STRAIGHT if high == ACE else high, mask))
    wheel_mask = (1 << (ACE - 2)) | 0b1111
    windows.append((WHEEL_HIGH if wheel_high else WHEEL_LOW, wheel_mask))
    table = [0] * (1 << 14)
    for joker in (0, 1):
        for mask in range(1 << 13):
            best = 0
            for key, window in windows:
                if (window & mask).bit_count() + joker >= 5 and key > best:
                    best = key
            table[mask | (joker << 13)] = best
    return table


_STRAIGHT_TABLES: dict[bool, list[int]] = {}


def straight_table(wheel_high: bool = True) -> list[int]:
    """The straight look-up table for a wheel setting (built once, on first use)."""
    table = _STRAIGHT_TABLES.get(wheel_high)
    if table is None:
        table = _STRAIGHT_TABLES[wheel_high] = _build_straight_table(wheel_high)
    return table


def _flush_key(mask: int, joker: int) -> int:
    """Five highest ranks of a suit mask; the joker takes the highest rank missing (docs/rules.md
    §2)."""
    ranks: list[int] = []
    joker_left = joker
    for r in range(ACE, 1, -1):
        if mask >> (r - 2) & 1:
            ranks.append(r)
        elif joker_left:
            ranks.append(r)
            joker_left = 0
        if len(ranks) == 5:
            break
    return (
        (Category.FLUSH << _CAT_SHIFT)
        | (ranks[0] << 16)
        | (ranks[1] << 12)
        | (ranks[2] << 8)
        | (ranks[3] << 4)
        | ranks[4]
    )


def evaluate(cards: Sequence[int], wheel_high: bool = True) -> int:
    """Key of the best five-card hand among 5–7 cards (joker semi-wild, docs/rules.md §2–3)."""
    counts = [0] * 15
    suits = [0, 0, 0, 0]
    joker = 0
    for c in cards:
        if c == JOKER_CODE:
            joker = 1
            continue
        r = (c >> 2) + 2
        counts[r] += 1
        suits[c & 3] |= 1 << (r - 2)

    if joker and counts[ACE] == 4:
        return Category.FIVE_ACES << _CAT_SHIFT

    table = straight_table(wheel_high)
    jbit = joker << 13
    best_sf = 0
    flush_suit_mask = -1
    for m in suits:
        if m.bit_count() + joker >= 5:
            flush_suit_mask = m
            sf = table[m | jbit]
            if sf > best_sf:
                best_sf = sf
    if best_sf:
        return (Category.STRAIGHT_FLUSH << _CAT_SHIFT) | (best_sf << 16)

    # From here on the joker is an Ace (docs/rules.md §2), except for completing a flush or
    # straight.
    counts[ACE] += joker
    straight = (suits[0] | suits[1] | suits[2] | suits[3]) | jbit
    return _by_groups(counts, flush_suit_mask, joker, table, straight)


def _by_groups(  # noqa: C901 — every hand's value goes through here: one pass, no calls
    counts: list[int], flush_suit_mask: int, joker: int, table: Sequence[int], straight: int
) -> int:
    """The key of a hand without a straight flush, from its rank counts (the joker counted as
    an Ace), its flush suit's ranks (-1: none) and its ranks for a straight."""
    quad = trip = trip2 = pair1 = pair2 = pair3 = 0
    singles: list[int] = []
    for r in range(ACE, 1, -1):
        n = counts[r]
        if n == 0:
            continue
        if n >= 4:
            quad = r
        elif n == 3:
            if trip:
                trip2 = r
            else:
                trip = r
        elif n == 2:
            if not pair1:
                pair1 = r
            elif not pair2:
                pair2 = r
            else:
                pair3 = r
        else:
            singles.append(r)

    if quad:
        kicker = 0
        for r in range(ACE, 1, -1):
            if r != quad and counts[r]:
                kicker = r
                break
        return (Category.FOUR_OF_A_KIND << _CAT_SHIFT) | (quad << 16) | (kicker << 12)
    if trip and (trip2 or pair1):
        return (Category.FULL_HOUSE << _CAT_SHIFT) | (trip << 16) | (max(trip2, pair1) << 12)
    if flush_suit_mask >= 0:
        return _flush_key(flush_suit_mask, joker)
    st = table[straight]
    if st:
        return (Category.STRAIGHT << _CAT_SHIFT) | (st << 16)
    if trip:
        return (
            (Category.THREE_OF_A_KIND << _CAT_SHIFT)
            | (trip << 16)
            | (singles[0] << 12)
            | (singles[1] << 8)
        )
    if pair2:
        kicker = max(pair3, singles[0]) if singles else pair3
        return (Category.TWO_PAIR << _CAT_SHIFT) | (pair1 << 16) | (pair2 << 12) | (kicker << 8)
    if pair1:
        return (
            (Category.ONE_PAIR << _CAT_SHIFT)
            | (pair1 << 16)
            | (singles[0] << 12)
            | (singles[1] << 8)
            | (singles[2] << 4)
        )
    return (
        (singles[0] << 16) | (singles[1] << 12) | (singles[2] << 8) | (singles[3] << 4) | singles[4]
    )


def front_key(a: int, b: int) -> int:
    """Key of a two-card (front) hand, comparable with back keys for the foul test (docs/rules.md
    §4).

    The joker is an Ace here (JK A is a pair of Aces; JK K is A-K).
    """
    ra = ACE if a == JOKER_CODE else (a >> 2) + 2
    rb = ACE if b == JOKER_CODE else (b >> 2) + 2
    if ra == rb:
        return (Category.ONE_PAIR << _CAT_SHIFT) | (ra << 16)
    if ra < rb:
        ra, rb = rb, ra
    return (ra << 16) | (rb << 12)


def is_foul_keys(front: int, back: int) -> bool:
    """docs/rules.md §4: the back must outrank the front; equal leading ranks favour the back."""
    return front > back


def category_of(key: int) -> Category:
    return Category(key >> _CAT_SHIFT)


def _nibbles(key: int) -> list[int]:
    return [(key >> shift) & 0xF for shift in (16, 12, 8, 4, 0)]


def _straight_name(top: int) -> str:
    if top in (WHEEL_HIGH, WHEEL_LOW):
        return "five high (wheel)"
    return f"{RANK_NAMES[ACE if top == ROYAL_STRAIGHT else top]} high"


def describe(key: int, *, two_card: bool = False) -> str:  # noqa: C901 — one branch a hand category
    """A person's name for a hand key: "full house, kings over twos", "king-nine"."""
    cat = category_of(key)
    n = _nibbles(key)
    if two_card:
        if cat == Category.ONE_PAIR:
            return f"pair of {RANK_PLURALS[n[0]]}"
        return f"{RANK_NAMES[n[0]]}-{RANK_NAMES[n[1]]}"
    if cat == Category.FIVE_ACES:
        return "five aces"
    if cat == Category.STRAIGHT_FLUSH:
        if n[0] == ROYAL_STRAIGHT:
            return "royal flush"
        return f"straight flush, {_straight_name(n[0])}"
    if cat == Category.FOUR_OF_A_KIND:
        return f"four of a kind, {RANK_PLURALS[n[0]]}"
    if cat == Category.FULL_HOUSE:
        return f"full house, {RANK_PLURALS[n[0]]} over {RANK_PLURALS[n[1]]}"
    if cat == Category.FLUSH:
        return f"flush, {RANK_NAMES[n[0]]} high"
    if cat == Category.STRAIGHT:
        return f"straight, {_straight_name(n[0])}"
    if cat == Category.THREE_OF_A_KIND:
        return f"three of a kind, {RANK_PLURALS[n[0]]}"
    if cat == Category.TWO_PAIR:
        return f"two pair, {RANK_PLURALS[n[0]]} and {RANK_PLURALS[n[1]]}"
    if cat == Category.ONE_PAIR:
        return f"pair of {RANK_PLURALS[n[0]]}"
    return f"{RANK_NAMES[n[0]]} high"


class HandValue(int):
    """A hand's comparable key that also names the hand. Two-card values say so."""

    __slots__ = ()
    two_card: bool = False

    @property
    def category(self) -> Category:
        return category_of(self)

    @property
    def is_royal(self) -> bool:
        return self.category == Category.STRAIGHT_FLUSH and (self >> 16) & 0xF == ROYAL_STRAIGHT

    @property
    def name(self) -> str:
        return describe(self, two_card=self.two_card)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __str__(self) -> str:
        return self.name


class FrontValue(HandValue):
    """The value of a two-card (front) hand."""

    __slots__ = ()
    two_card = True


def hand_value(cards: Sequence[int], wheel_high: bool = True) -> HandValue:
    """The best five-card hand among 5–7 cards, as a named value."""
    if not 5 <= len(cards) <= 7:
        raise ValueError(f"a hand value needs 5 to 7 cards, got {len(cards)}")
    return HandValue(evaluate(cards, wheel_high))


def front_value(cards: Sequence[int]) -> FrontValue:
    """The value of a two-card hand."""
    if len(cards) != 2:
        raise ValueError(f"a front hand has 2 cards, got {len(cards)}")
    return FrontValue(front_key(cards[0], cards[1]))


def is_foul(front: Sequence[int], back: Sequence[int], wheel_high: bool = True) -> bool:
    """True when the two-card front outranks the five-card back (docs/rules.md §4)."""
    return is_foul_keys(front_key(front[0], front[1]), evaluate(back, wheel_high))


def is_ace_high_pai_gow(key: int) -> bool:
    """Ace-high pai gow: no pair, straight or flush, the highest card an Ace (joker included)."""
    return key >> _CAT_SHIFT == Category.HIGH_CARD and (key >> 16) & 0xF == ACE
