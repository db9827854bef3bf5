"""The House Way of Dealer Open Pai Gow (docs/rules.md §7): seven cards → front, back, rule id.

A rule names the front by ranks ("the low pair", "the two highest singletons"). ``_Ranks`` turns
the seven cards into rank groups (the joker grouped as an Ace, docs/rules.md §2); each rule
returns a *front spec*, a list of (rank, how many cards of that rank), and ``_choose`` picks the
physical cards: the split whose back has the highest value, then the one that keeps the joker in
back, then the smallest card codes (docs/rules.md §7, last paragraph). Complete hands (straight,
flush, straight flush) that the rules do not defer are set by searching the 21 splits
(``_complete_hand``).

Guarantee: the result uses exactly the seven cards, never fouls (a foul raises HouseWayError, a
program error) and does not depend on the order of the input.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations, product
from typing import Final

from controller.game.cards import (
    ACE,
    DECK,
    JACK,
    JOKER_CODE,
    KING,
    QUEEN,
    TEN,
    CardError,
    check_distinct,
)
from controller.game.hands import Category, evaluate, front_key, is_foul_keys, straight_table
from controller.game.setting import DEFAULT_RULES, Rules, Setting

FrontSpec = list[tuple[int, int]]

_CAT_SHIFT: Final = 20
_SEVEN: Final = 7
_SIX: Final = 6
_KING_HIGH_MIN: Final = KING << 16
_JACK_HIGH_MIN: Final = JACK << 16
_ROYAL_KEY: Final = (Category.STRAIGHT_FLUSH << _CAT_SHIFT) | (15 << 16)
_COMPLETE: Final = frozenset({Category.STRAIGHT, Category.FLUSH, Category.STRAIGHT_FLUSH})

RULE_IDS: Final = (
    "5A-KK",
    "5A",
    "4K-A-PAIR",
    "4K-A",
    "4K-JK-PAIR",
    "4K-JK",
    "4K-7T-PAIR",
    "4K-7T-ACE",
    "4K-7T",
    "4K-26-PAIR",
    "4K-26",
    "FH-33",
    "FH-322",
    "FH-22-K",
    "FH",
    "3K-A",
    "3K",
    "2P-3P",
    "2P-77",
    "2P-J6-A",
    "2P-AA",
    "2P",
    "1P",
    "HC",
    "CH→4K",
    "CH→FH",
    "CH→2P",
    "CH-K",
    "CH-RF",
    "CH-J",
    "CH-SF",
    "CH-SF5",
)


class HouseWayError(AssertionError):
    """The House Way produced an impossible setting: a program error, never to be shown."""


def _rank(c: int) -> int:
    return ACE if c == JOKER_CODE else (c >> 2) + 2


_RANK_OF: Final = tuple(_rank(c) for c in range(53))


class _Ranks:
    """Rank groups of seven cards, the joker grouped with the Aces (docs/rules.md §2), and whether a
    straight or flush is possible at all (only then is the hand's class worth evaluating)."""

    __slots__ = ("cards", "counts", "maybe_complete", "pairs", "quads", "singles", "trips")

    def __init__(self, cards: Sequence[int], wheel_high: bool) -> None:
        counts = [0] * 15
        suit_counts = [0, 0, 0, 0]
        rank_mask = 0
        joker = 0
        for c in cards:
            if c == JOKER_CODE:
                joker = 1
                counts[ACE] += 1
            else:
                r = (c >> 2) + 2
                counts[r] += 1
                suit_counts[c & 3] += 1
                rank_mask |= 1 << (r - 2)
        self.cards = cards
        self.counts = counts
        self.quads: list[int] = []
        self.trips: list[int] = []
        self.pairs: list[int] = []
        self.singles: list[int] = []
        for r in range(ACE, 1, -1):
            n = counts[r]
            if n == 1:
                self.singles.append(r)
            elif n == 2:
                self.pairs.append(r)
            elif n == 3:
                self.trips.append(r)
            elif n:
                self.quads.append(r)
        self.maybe_complete = max(suit_counts) + joker >= 5 or bool(
            straight_table(wheel_high)[rank_mask | (joker << 13)]
        )

    def group(self, rank: int) -> list[int]:
        """The cards of a rank, in code order (the joker with the Aces)."""
        return [c for c in self.cards if _RANK_OF[c] == rank]

    def count(self, rank: int) -> int:
        return self.counts[rank]

    @property
    def singleton_ace(self) -> bool:
        return self.count(ACE) == 1

    def two_highest_singletons(self) -> FrontSpec:
        return [(self.singles[0], 1), (self.singles[1], 1)]

    def category(self) -> Category:
        """The class of a hand with no straight or flush, from its rank groups alone."""
        if self.quads:
            return (
                Category.FIVE_ACES if self.counts[self.quads[0]] == 5 else Category.FOUR_OF_A_KIND
            )
        if self.trips:
            if len(self.trips) >= 2 or self.pairs:
                return Category.FULL_HOUSE
            return Category.THREE_OF_A_KIND
        if len(self.pairs) >= 2:
            return Category.TWO_PAIR
        return Category.ONE_PAIR if self.pairs else Category.HIGH_CARD


# --- the rules of docs/rules.md §7, each returning (rule id, front spec) --------------------------


def _five_aces(h: _Ranks) -> tuple[str, FrontSpec]:
    if h.count(KING) >= 2:
        return "5A-KK", [(KING, 2)]  # docs/rules.md §7 Five Aces: two Kings in front
    return "5A", [(ACE, 2)]  # the joker stays in back through _choose's tie-break


def _four_of_a_kind(h: _Ranks) -> tuple[str, FrontSpec]:
    quad = h.quads[0]
    # "Contains a pair" includes a pair taken from a three of a kind (docs/rules.md §7).
    pair = next((r for r in (*h.trips, *h.pairs) if r != quad), 0)
    if quad == ACE:
        if pair >= _SEVEN:
            return "4K-A-PAIR", [(pair, 2)]
        return "4K-A", [(ACE, 2)]
    if quad >= JACK:
        if pair >= TEN:
            return "4K-JK-PAIR", [(pair, 2)]
        return "4K-JK", [(quad, 2)]
    if quad >= _SEVEN:
        if pair:
            return "4K-7T-PAIR", [(pair, 2)]
        if h.singleton_ace:
            return "4K-7T-ACE", h.two_highest_singletons()
        return "4K-7T", [(quad, 2)]
    if pair:
        return "4K-26-PAIR", [(pair, 2)]
    return "4K-26", h.two_highest_singletons()


def _full_house(h: _Ranks) -> tuple[str, FrontSpec]:
    if len(h.trips) >= 2:
        return "FH-33", [(h.trips[0], 2)]
    trip = h.trips[0]
    if len(h.pairs) >= 2:
        return "FH-322", [(max(trip, h.pairs[0]), 2)]  # the pair may come from the three
    if h.pairs[0] == 2 and h.singles and h.singles[0] >= KING:
        return "FH-22-K", h.two_highest_singletons()
    return "FH", [(h.pairs[0], 2)]


def _three_of_a_kind(h: _Ranks) -> tuple[str, FrontSpec]:
    if h.trips[0] == ACE:
        return "3K-A", [(ACE, 1), (h.singles[0], 1)]
    return "3K", h.two_highest_singletons()


def _two_pair(h: _Ranks) -> tuple[str, FrontSpec]:
    if len(h.pairs) >= 3:
        return "2P-3P", [(h.pairs[0], 2)]
    high, low = h.pairs[0], h.pairs[1]
    if low >= _SEVEN and not h.singleton_ace:
        return "2P-77", [(low, 2)]
    if high >= JACK and low >= _SIX and h.singleton_ace:
        return "2P-J6-A", [(low, 2)]
    if high == ACE:
        return "2P-AA", [(low, 2)]
    return "2P", h.two_highest_singletons()


def _one_pair(h: _Ranks) -> tuple[str, FrontSpec]:
    return "1P", h.two_highest_singletons()


def _high_card(h: _Ranks) -> tuple[str, FrontSpec]:
    return "HC", [(h.singles[1], 1), (h.singles[2], 1)]


_BY_CATEGORY = {
    Category.FIVE_ACES: _five_aces,
    Category.FOUR_OF_A_KIND: _four_of_a_kind,
    Category.FULL_HOUSE: _full_house,
    Category.THREE_OF_A_KIND: _three_of_a_kind,
    Category.TWO_PAIR: _two_pair,
    Category.ONE_PAIR: _one_pair,
    Category.HIGH_CARD: _high_card,
}


def _complete_hand_deferral(h: _Ranks) -> tuple[str, str, FrontSpec] | None:
    """docs/rules.md §7 Complete Hand steps 1–3:: the hand holds a 4K, a full house, strong two
    pair."""
    if h.quads:
        rule, spec = _four_of_a_kind(h)
        return "CH→4K", rule, spec
    if h.trips and (len(h.trips) >= 2 or h.pairs):
        rule, spec = _full_house(h)
        return "CH→FH", rule, spec
    if len(h.pairs) >= 2:
        high, low = h.pairs[0], h.pairs[1]
        # The joker counts as the Ace of "two pair and at least one Ace" (docs/rules.md §7).
        if (high >= QUEEN and low >= _SIX) or h.count(ACE) >= 1:
            rule, spec = _two_pair(h)
            return "CH→2P", rule, spec
    return None


# --- choosing physical cards --------------------------------------------------------------------


def _back_of(cards: Sequence[int], front: tuple[int, int]) -> list[int]:
    a, b = front
    return [c for c in cards if c != a and c != b]


def _choose(
    cards: Sequence[int], h: _Ranks, spec: FrontSpec, wheel_high: bool
) -> tuple[tuple[int, int], int]:
    """The physical front for a spec of ranks (docs/rules.md §7: highest back, joker in back,
    order), with the value of its back."""
    counts = h.counts
    if all(counts[rank] == n for rank, n in spec):  # the ranks name the cards: no choice
        f = [c for rank, _ in spec for c in h.group(rank)]
        front = (f[0], f[1])
        return front, evaluate(_back_of(cards, front), wheel_high)
    options = [combinations(h.group(rank), n) for rank, n in spec]
    best: tuple[int, int] | None = None
    best_key: tuple[int, int, tuple[int, ...]] | None = None
    for combo in product(*options):
        f = [c for part in combo for c in part]
        front = (f[0], f[1])
        back_value = evaluate(_back_of(cards, front), wheel_high)
        key = (back_value, 0 if JOKER_CODE in front else 1, tuple(-c for c in sorted(front)))
        if best_key is None or key > best_key:
            best, best_key = front, key
    assert best is not None and best_key is not None
    return best, best_key[0]


def _may_be_complete(back: Sequence[int], table: list[int]) -> bool:
    """Whether five cards can be a straight or a flush (the joker filling a gap or a suit)."""
    joker = 0
    mask = 0
    suits = 0
    first_suit = -1
    for c in back:
        if c == JOKER_CODE:
            joker = 1
            continue
        mask |= 1 << (c >> 2)
        if first_suit < 0:
            first_suit = c & 3
        if c & 3 == first_suit:
            suits += 1
    return suits + joker >= 5 or bool(table[mask | (joker << 13)])


def _best_complete(
    candidates: Sequence[tuple[int, int, tuple[int, int]]],
) -> tuple[int, int, tuple[int, int]]:
    """Of (front key, back key, front) splits whose back is a straight or flush: the highest
    front, then the highest back, then the joker kept in back, then the lowest codes in front
    (docs/rules.md §7)."""
    return max(
        candidates,
        key=lambda c: (c[0], c[1], 0 if JOKER_CODE in c[2] else 1, tuple(-x for x in sorted(c[2]))),
    )


def _complete_hand(cards: Sequence[int], wheel_high: bool) -> tuple[str, tuple[int, int], int]:
    """docs/rules.md §7 Complete Hand step 4: first rule with a candidate: highest front, then
    back."""
    candidates: list[tuple[int, int, tuple[int, int]]] = []
    table = straight_table(wheel_high)
    for i, j in combinations(range(7), 2):
        front = (cards[i], cards[j])
        back = _back_of(cards, front)
        if not _may_be_complete(back, table):
            continue  # a cheap look-up spares most of the 21 evaluations
        back_value = evaluate(back, wheel_high)
        if back_value >> _CAT_SHIFT in _COMPLETE:
            candidates.append((front_key(front[0], front[1]), back_value, front))
    rules = (
        ("CH-K", lambda fk, bk: fk >= _KING_HIGH_MIN),
        ("CH-RF", lambda fk, bk: bk == _ROYAL_KEY),
        ("CH-J", lambda fk, bk: fk >= _JACK_HIGH_MIN),
        ("CH-SF", lambda fk, bk: bk >> _CAT_SHIFT == Category.STRAIGHT_FLUSH),
        ("CH-SF5", lambda fk, bk: True),
    )
    for rule, accepts in rules:
        eligible = [c for c in candidates if accepts(c[0], c[1])]
        if eligible:
            _, back_value, front = _best_complete(eligible)
            return rule, front, back_value
    raise HouseWayError(f"complete hand without a straight or flush back: {cards}")


# --- the public function ------------------------------------------------------------------------


def house_way(cards: Sequence[int], rules: Rules = DEFAULT_RULES) -> Setting:
    """Set seven cards by the House Way (docs/rules.md §7). Deterministic; never a foul."""
    if len(cards) != 7:
        raise CardError(f"the House Way sets seven cards, got {len(cards)}")
    check_distinct(cards)
    wheel_high = rules.wheel_high
    ordered = sorted(cards)
    h = _Ranks(ordered, wheel_high)
    category = (
        Category(evaluate(ordered, wheel_high) >> _CAT_SHIFT) if h.maybe_complete else h.category()
    )
    if category in _COMPLETE:
        deferral = _complete_hand_deferral(h)
        if deferral is None:
            rule, front, back_value = _complete_hand(ordered, wheel_high)
        else:
            step, sub_rule, spec = deferral
            rule = f"{step}/{sub_rule}"
            front, back_value = _choose(ordered, h, spec, wheel_high)
    else:
        rule, spec = _BY_CATEGORY[category](h)
        front, back_value = _choose(ordered, h, spec, wheel_high)
    if is_foul_keys(front_key(front[0], front[1]), back_value):
        raise HouseWayError(f"House Way rule {rule} fouled: front {front}")
    # Cards stay in code order (canonical, so equal settings compare equal); people see
    # Setting.to_dict's display order.
    b = _back_of(ordered, front)
    f0, f1 = (front[0], front[1]) if front[0] < front[1] else (front[1], front[0])
    return Setting(
        (DECK[f0], DECK[f1]),
        (DECK[b[0]], DECK[b[1]], DECK[b[2]], DECK[b[3]], DECK[b[4]]),
        rule,
        wheel_high,
    )


def rule_family(rule: str) -> str:
    """The rule id that decided the front: the last step of a deferral ("CH→2P/2P-AA" → "2P-AA")."""
    return rule.rsplit("/", 1)[-1]
