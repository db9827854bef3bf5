"""Settlement of the Pai Gow wager and the side wagers (docs/rules.md §5, §8). Pure functions.

Side wagers are settled from the seven cards alone, however they are set. Pays are "to 1"
(0 is a push, -1 a loss) except the Envy bonus, which is whole dollars. Hand ranking is
``controller.game.hands``; this module adds only what is specific to each wager.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from itertools import combinations
from math import comb
from typing import Final

from controller.game.cards import ACE, DECK, JACK, JOKER_CODE, KING, QUEEN, card_texts
from controller.game.hands import (
    Category,
    HandValue,
    evaluate,
    front_key,
    is_ace_high_pai_gow,
    is_foul_keys,
    straight_table,
)
from controller.game.paytables import (
    CHAN_CHU_LINES,
    LOSS,
    PUSH_ACE_HIGH,
    Paytable,
)
from controller.game.setting import Rules, Setting

ENVY_MINIMUM_WAGER: Final = 5  # docs/rules.md §8 Envy: only the player paid needs $5 or more

# Rank bits for 7-card runs: bit r for ranks 2–14, and bit 1 for the Ace playing low.
_LOW_ACE_BIT: Final = 1 << 1
_SEVEN_WINDOWS: Final = tuple(((1 << 7) - 1) << low for low in range(1, 9))  # A-7 … 8-A
_LINE_ORDER: Final = {line: i for i, line in enumerate(CHAN_CHU_LINES)}

Amount = float | Decimal


def _seven(cards7: Sequence[int], who: str = "hand") -> tuple[int, ...]:
    cards = tuple(int(c) for c in cards7)
    if len(cards) != 7:
        raise ValueError(f"a {who} has seven cards, got {len(cards)}")
    if any(not 0 <= c <= JOKER_CODE for c in cards):
        raise ValueError(f"a {who} holds a code that is not a card: {cards}")
    if len(set(cards)) != 7:
        raise ValueError(f"a {who} holds a card twice: {card_texts(cards)}")
    return cards


def _rank_bits(mask13: int) -> int:
    """Bits 2–14 from a hands-style 13-bit mask (bit r-2), plus bit 1 when the Ace is there."""
    bits = mask13 << 2
    if bits >> ACE & 1:
        bits |= _LOW_ACE_BIT
    return bits


@dataclass(frozen=True, slots=True)
class SideResult:
    """A side wager's line and pay "to 1" (-1 = the wager loses)."""

    line: str
    pays: int

    def to_dict(self) -> dict[str, object]:
        return {"line": self.line, "pays": self.pays}


@dataclass(frozen=True, slots=True)
class ChanChuResult:
    """The Chan Chu line paid and its pay "to 1" (0 = push, -1 = loss)."""

    line: str
    pays: int

    def to_dict(self) -> dict[str, object]:
        return {"line": self.line, "pays": self.pays}


def dealer_has_two_jacks(cards7: Sequence[int]) -> bool:
    """True for two or more natural Jacks among the cards (docs/rules.md §2, §5: never the
    joker)."""
    return sum(1 for c in cards7 if c != JOKER_CODE and (c >> 2) + 2 == JACK) >= 2


def chan_chu_lines(cards7: Sequence[int]) -> frozenset[str]:
    """Every Chan Chu line whose combination the seven cards contain (docs/rules.md §8 Chan Chu).

    "other" is never included: it is what a hand is paid when no line of a paytable applies.
    Independent of the cards' order.
    """
    cards = _seven(cards7)
    joker = JOKER_CODE in cards
    suit_masks = [0, 0, 0, 0]
    for c in cards:
        if c != JOKER_CODE:
            suit_masks[c & 3] |= 1 << (c >> 2)
    all_mask = suit_masks[0] | suit_masks[1] | suit_masks[2] | suit_masks[3]
    # docs/rules.md §2: outside straights and flushes the joker groups with the Aces.
    groups = sorted(Counter(DECK[c].rank for c in cards).values(), reverse=True)
    lines = _seven_card_lines(suit_masks, all_mask, joker, groups)
    lines |= _five_card_lines(cards, suit_masks, all_mask, joker)
    lines |= _group_lines(groups)
    return frozenset(lines)


def _seven_card_lines(
    suit_masks: Sequence[int], all_mask: int, joker: bool, groups: Sequence[int]
) -> set[str]:
    """docs/rules.md §8 Chan Chu 7-card straight flush / straight, windows A-7 through 8-A.

    ``suit_masks``: the rank bits of each suit's natural cards; ``all_mask``: of all of them;
    ``groups``: the rank group sizes, largest first."""
    lines: set[str] = set()
    for mask in suit_masks:
        n = mask.bit_count()
        if n + joker < 7:
            continue
        bits = _rank_bits(mask)
        if n == 7:
            lines.add("natural_7_flush")
            if any(bits & w == w for w in _SEVEN_WINDOWS):
                lines.add("natural_7_straight_flush")
        elif any((bits & w).bit_count() == 6 for w in _SEVEN_WINDOWS):
            lines.add("wild_7_straight_flush")  # the joker fills the seventh rank, end or middle
    if not joker and len(groups) == 7:
        bits = _rank_bits(all_mask)
        if any(bits & w == w for w in _SEVEN_WINDOWS):
            lines.add("natural_7_straight")
    if lines & {"natural_7_straight_flush", "wild_7_straight_flush"}:
        lines.add("any_7_straight_flush")
    return lines


def _five_card_lines(
    cards: tuple[int, ...], suit_masks: Sequence[int], all_mask: int, joker: bool
) -> set[str]:
    """The Chan Chu lines of the best five cards: straight flush (royal, royal match), flush,
    straight."""
    lines: set[str] = set()
    best = HandValue(evaluate(cards))
    if best.category == Category.STRAIGHT_FLUSH:
        lines.add("straight_flush")
        if best.is_royal:
            lines.add("royal_flush")
            if _has_royal_match(cards):
                lines.add("royal_flush_royal_match")
    if max(m.bit_count() for m in suit_masks) + joker >= 5:
        lines.add("flush")
    if straight_table()[all_mask | (joker << 13)]:
        lines.add("straight")
    return lines


def _group_lines(groups: Sequence[int]) -> set[str]:
    """docs/rules.md §8 Chan Chu: rank groups (sizes, largest first) with the joker as an Ace."""
    lines: set[str] = set()
    top = groups[0]
    second = groups[1] if len(groups) > 1 else 0
    if top == 5:
        lines.add("five_aces")
    if top >= 4:
        lines.add("four_of_a_kind")
        if second >= 3:
            lines.add("super_full_house")
    if top >= 3:
        lines.add("three_of_a_kind")
        if second >= 2:
            lines.add("full_house")
    if sum(1 for g in groups if g >= 2) >= 3:
        lines.add("three_pair")
    return lines


def _has_royal_match(cards: tuple[int, ...]) -> bool:
    """docs/rules.md §8 Royal Flush + R/M: the other two cards are a natural suited K-Q.

    The five cards left must then be a royal flush; it is of another suit, since the joker can
    stand for only one of that suit's King and Queen.
    """
    present = set(cards)
    for suit in range(4):
        king, queen = (KING - 2) * 4 + suit, (QUEEN - 2) * 4 + suit
        if king in present and queen in present:
            rest = [c for c in cards if c not in (king, queen)]
            if HandValue(evaluate(rest)).is_royal:
                return True
    return False


def _best_line(lines: frozenset[str], paytable: Paytable) -> tuple[str, int] | None:
    """The highest-paying line of ``paytable`` among ``lines``; equal pays go to the higher line."""
    best: tuple[str, int] | None = None
    for line in lines:
        if line not in paytable:
            continue
        pays = paytable.pays[line]
        if (
            best is None
            or pays > best[1]
            or (pays == best[1] and _LINE_ORDER[line] < _LINE_ORDER[best[0]])
        ):
            best = (line, pays)
    return best


def chan_chu(cards7: Sequence[int], paytable: Paytable) -> ChanChuResult:
    """docs/rules.md §8 Chan Chu: the highest-paying line of ``paytable`` the seven cards
    contain."""
    best = _best_line(chan_chu_lines(cards7), paytable)
    if best is None:
        return ChanChuResult("other", paytable.pays.get("other", LOSS))
    return ChanChuResult(*best)


def envy_line(cards7: Sequence[int], paytable: Paytable) -> str | None:
    """docs/rules.md §8 Envy: the highest envy line the seven cards hit, or None."""
    best = _best_line(chan_chu_lines(cards7), paytable)
    return None if best is None else best[0]


@dataclass(frozen=True, slots=True)
class EnvyAward:
    """One Envy payment: ``from_seat`` hit ``line``, worth ``amount`` dollars to the seat paid."""

    from_seat: str
    line: str
    amount: int

    def to_dict(self) -> dict[str, object]:
        return {"from_seat": self.from_seat, "line": self.line, "amount": self.amount}


@dataclass(frozen=True, slots=True)
class EnvySettlement:
    """What one seat is paid by the Envy bonus: ``total`` dollars, one award per triggering seat."""

    seat: str
    qualifies: bool
    total: int
    awards: tuple[EnvyAward, ...]

    def to_dict(self) -> dict[str, object]:
        return {
            "seat": self.seat,
            "qualifies": self.qualifies,
            "total": self.total,
            "awards": [a.to_dict() for a in self.awards],
        }


def settle_envy(
    seats: Mapping[str, tuple[Sequence[int], Amount | None]], paytable: Paytable
) -> dict[str, EnvySettlement]:
    """docs/rules.md §8 Envy bonus, for every seat given (seat label → seven cards, Chan Chu wager).

    A seat with a Chan Chu wager of $5 or more is paid the envy amount for each *other* seat with
    a Chan Chu wager (any amount above zero) whose cards hit an envy line. Only players are seats:
    the dealer's hand is not an argument, so it can never trigger.
    """
    triggers: list[tuple[str, str, int]] = []
    for seat, (cards7, wager) in seats.items():
        if wager is not None and wager < 0:
            raise ValueError(f"seat {seat}: a Chan Chu wager cannot be negative ({wager})")
        if wager:
            line = envy_line(cards7, paytable)
            if line is not None:
                triggers.append((seat, line, paytable.pays[line]))
    result: dict[str, EnvySettlement] = {}
    for seat, (_cards7, wager) in seats.items():
        qualifies = wager is not None and wager >= ENVY_MINIMUM_WAGER
        awards = tuple(
            EnvyAward(other, line, amount)
            for other, line, amount in triggers
            if qualifies and other != seat  # never paid for its own hand
        )
        result[seat] = EnvySettlement(seat, qualifies, sum(a.amount for a in awards), awards)
    return result


def push_ace_high(
    dealer7: Sequence[int],
    player7: Sequence[int],
    rules: Rules,
    paytable: Paytable = PUSH_ACE_HIGH,
) -> SideResult:
    """docs/rules.md §8 Push Ace High: wins when the dealer's best five is exactly Ace-high pai
    gow."""
    dealer = _seven(dealer7, "dealer's hand")
    player = _seven(player7, "player's hand")
    if not is_ace_high_pai_gow(evaluate(dealer, rules.wheel_high)):
        return SideResult("lose", LOSS)
    if is_ace_high_pai_gow(evaluate(player, rules.wheel_high)):
        line = "dealer_and_player_ace_high"
    elif JOKER_CODE in dealer:
        line = "dealer_ace_high_joker"  # with no pair, the joker is the dealer's only Ace
    else:
        line = "dealer_ace_high"
    return SideResult(line, paytable.pay(line))


_JACKS_BEAT_LINE: Final = {
    Category.FIVE_ACES: "five_aces",
    Category.STRAIGHT_FLUSH: "straight_flush",
    Category.FOUR_OF_A_KIND: "four_of_a_kind",
    Category.FULL_HOUSE: "full_house",
    Category.FLUSH: "flush",
    Category.STRAIGHT: "straight",
    Category.THREE_OF_A_KIND: "three_of_a_kind",
    Category.TWO_PAIR: "two_pair",
    Category.ONE_PAIR: "pair",
    Category.HIGH_CARD: "high_card",
}


def jacks_beat(
    dealer7: Sequence[int], player7: Sequence[int], paytable: Paytable, rules: Rules
) -> SideResult:
    """docs/rules.md §8 Jacks Beat: wins only on two natural dealer Jacks; pays by the player's best
    five-card hand of seven, however the player sets it."""
    dealer = _seven(dealer7, "dealer's hand")
    player = _seven(player7, "player's hand")
    if not dealer_has_two_jacks(dealer):
        return SideResult("lose", LOSS)
    best = HandValue(evaluate(player, rules.wheel_high))
    line = "royal_flush" if best.is_royal else _JACKS_BEAT_LINE[best.category]
    return SideResult(line, paytable.pay(line))


class PaiGowOutcome(StrEnum):
    WIN = "win"
    PUSH = "push"
    LOSE = "lose"


class Comparison(StrEnum):
    """One hand against the dealer's: a copy (equal hands) goes to the dealer (docs/rules.md §5)."""

    WIN = "win"
    LOSE = "lose"
    COPY = "copy"


@dataclass(frozen=True, slots=True)
class PaiGowResult:
    """The Pai Gow wager's outcome, why, and the back and front comparisons.

    ``reason`` is one of "foul", "dealer_two_jacks", "dealer_ace_high", "won_both", "won_one",
    "won_neither". ``back``/``front`` are None when no hands were compared (dealer two Jacks); a
    foul loses both; with the Ace-high push they report the comparisons the push overrides."""

    outcome: PaiGowOutcome
    reason: str
    back: Comparison | None
    front: Comparison | None

    def to_dict(self) -> dict[str, object]:
        return {
            "outcome": str(self.outcome),
            "reason": self.reason,
            "back": None if self.back is None else str(self.back),
            "front": None if self.front is None else str(self.front),
        }


def _compare(player: int, dealer: int) -> Comparison:
    if player > dealer:
        return Comparison.WIN
    return Comparison.COPY if player == dealer else Comparison.LOSE


def _keys(setting: Setting, rules: Rules) -> tuple[int, int]:
    """(back key, front key) under the table's wheel rule, not the one the Setting carries."""
    return evaluate(setting.back, rules.wheel_high), front_key(*setting.front)


def settle_pai_gow(
    player: Setting, dealer: Setting | None, dealer_cards7: Sequence[int], rules: Rules
) -> PaiGowResult:
    """docs/rules.md §5 The Pai Gow wager, settled in this order: the player's foul loses; the
    dealer's two natural Jacks lose (``dealer`` is then None, or ignored); with
    ``rules.ace_high_pushes_pai_gow`` a dealer whose best five of seven is Ace-high pai gow
    pushes; otherwise back against back and front against front, copies to the dealer.

    Raises ValueError for a dealer setting that fouls (a House Way error, docs/rules.md §4) or a
    missing dealer setting when the dealer has no two Jacks.
    """
    dealer_cards = _seven(dealer_cards7, "dealer's hand")
    p_back, p_front = _keys(player, rules)
    if is_foul_keys(p_front, p_back):  # docs/rules.md §4: a foul loses both comparisons
        return PaiGowResult(PaiGowOutcome.LOSE, "foul", Comparison.LOSE, Comparison.LOSE)
    if dealer_has_two_jacks(dealer_cards):
        return PaiGowResult(PaiGowOutcome.LOSE, "dealer_two_jacks", None, None)
    if dealer is None:
        raise ValueError("the dealer has no two Jacks, so the dealer's setting is needed")
    if sorted(dealer.cards) != sorted(dealer_cards):
        raise ValueError("the dealer's setting is not of the dealer's seven cards")
    d_back, d_front = _keys(dealer, rules)
    if is_foul_keys(d_front, d_back):
        raise ValueError(f"the dealer's setting fouls: {dealer.to_dict()}")
    back = _compare(p_back, d_back)
    front = _compare(p_front, d_front)
    if rules.ace_high_pushes_pai_gow and is_ace_high_pai_gow(
        evaluate(dealer_cards, rules.wheel_high)
    ):
        return PaiGowResult(PaiGowOutcome.PUSH, "dealer_ace_high", back, front)
    wins = (back == Comparison.WIN) + (front == Comparison.WIN)
    if wins == 2:
        return PaiGowResult(PaiGowOutcome.WIN, "won_both", back, front)
    if wins == 1:
        return PaiGowResult(PaiGowOutcome.PUSH, "won_one", back, front)
    return PaiGowResult(PaiGowOutcome.LOSE, "won_neither", back, front)


_OUTCOME_RANK: Final = {PaiGowOutcome.LOSE: 0, PaiGowOutcome.PUSH: 1, PaiGowOutcome.WIN: 2}


def best_setting_against(
    player7: Sequence[int], dealer: Setting, rules: Rules
) -> tuple[Setting, PaiGowResult]:
    """The player's best reply to the dealer's set hand: over the 21 splits, fouls skipped, the best
    outcome (win > push > lose); ties go to the highest back, then the highest front, then the
    lexicographically smallest (sorted) front card codes. Deterministic for a set of cards."""
    cards = tuple(DECK[c] for c in sorted(_seven(player7, "player's hand")))
    dealer_cards = dealer.cards
    best: tuple[tuple[int, int, int, tuple[int, ...]], Setting, PaiGowResult] | None = None
    for front in combinations(cards, 2):
        setting = Setting.from_front(cards, front, wheel_high=rules.wheel_high)
        back_key, f_key = _keys(setting, rules)
        if is_foul_keys(f_key, back_key):
            continue
        result = settle_pai_gow(setting, dealer, dealer_cards, rules)
        codes = tuple(-int(c) for c in front)  # negated so that max() prefers the smallest
        rank = (_OUTCOME_RANK[result.outcome], back_key, f_key, codes)
        if best is None or rank > best[0]:
            best = (rank, setting, result)
    if best is None:
        raise AssertionError("seven cards always have a split that does not foul")
    return best[1], best[2]


_JACKS: Final = tuple((JACK - 2) * 4 + s for s in range(4))
_NOT_JACKS: Final = tuple(c for c in range(53) if c not in _JACKS)


def two_jack_hands(jacks: int, others: int) -> int:
    """Seven-card hands with two or more Jacks from a deck of ``jacks`` Jacks and ``others``
    other cards: hands counted by how many Jacks they hold, each kind judged by
    :func:`dealer_has_two_jacks` (the analysis' side-bet figures and game protection's exact
    null share it)."""
    total = 0
    for k in range(min(jacks, 7) + 1):
        kind = _JACKS[:k] + _NOT_JACKS[: 7 - k]  # one hand with k Jacks
        if dealer_has_two_jacks(kind):
            total += comb(jacks, k) * comb(others, 7 - k)
    return total
