"""Side wagers and the Pai Gow wager, from the text of docs/rules.md §5 and §8."""

from __future__ import annotations

import json
import random
from collections import Counter
from decimal import Decimal
from itertools import combinations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.game.cards import DECK, JOKER, Card, card, parse_card, parse_cards
from controller.game.hands import evaluate, front_key, is_ace_high_pai_gow
from controller.game.paytables import chan_chu_paytable, envy_paytable, jacks_beat_paytable
from controller.game.setting import Rules, Setting
from controller.game.wagers import (
    ChanChuResult,
    Comparison,
    PaiGowOutcome,
    SideResult,
    best_setting_against,
    chan_chu,
    chan_chu_lines,
    dealer_has_two_jacks,
    envy_line,
    jacks_beat,
    push_ace_high,
    settle_envy,
    settle_pai_gow,
)

RULES = Rules()
ACE_HIGH_PUSHES = Rules(ace_high_pushes_pai_gow=True)
PT = {name: chan_chu_paytable(name) for name in ("PT1", "PT2", "PT3", "PT4", "PT5")}


def h(text: str) -> list[Card]:
    return parse_cards(text)


def setting(text: str) -> Setting:
    """ "front | back", e.g. "As Kd | 2c 3d 4h 5s 7c"."""
    front, back = text.split("|")
    f, b = h(front), h(back)
    return Setting.from_front(f + b, f)


# --- Chan Chu: which lines seven cards contain (docs/rules.md §8) -------------------------------


def test_natural_7_card_straight_flush_8_to_ace() -> None:
    lines = chan_chu_lines(h("8s 9s Ts Js Qs Ks As"))
    assert lines >= {
        "natural_7_straight_flush",
        "any_7_straight_flush",
        "natural_7_flush",
        "natural_7_straight",
        "royal_flush",
        "straight_flush",
    }
    assert "wild_7_straight_flush" not in lines
    assert chan_chu(h("8s 9s Ts Js Qs Ks As"), PT["PT3"]) == ChanChuResult(
        "natural_7_straight_flush", 5000
    )
    assert chan_chu(h("8s 9s Ts Js Qs Ks As"), PT["PT4"]).pays == 8000
    assert chan_chu(h("8s 9s Ts Js Qs Ks As"), PT["PT1"]) == ChanChuResult(
        "any_7_straight_flush", 5000
    )


def test_natural_7_card_straight_flush_ace_low() -> None:
    cards = h("As 2s 3s 4s 5s 6s 7s")
    assert "natural_7_straight_flush" in chan_chu_lines(cards)
    assert chan_chu(cards, PT["PT5"]) == ChanChuResult("natural_7_straight_flush", 2500)
    assert chan_chu(cards, PT["PT2"]) == ChanChuResult("any_7_straight_flush", 2000)


@pytest.mark.parametrize(
    "text",
    [
        "9d Td Jd Qd Kd Ad JK",  # joker at the low end (the 8)
        "2h 3h 4h 5h 6h 7h JK",  # joker at an end (Ace low, or the 8)
        "Ac 2c 3c 4c 5c 6c JK",  # joker at the high end (the 7)
        "3c 4c 5c 7c 8c 9c JK",  # joker in the middle (the 6)
        "Ah 2h 4h 5h 6h 7h JK",  # joker in the middle of the Ace-low window (the 3)
    ],
)
def test_wild_7_card_straight_flush(text: str) -> None:
    lines = chan_chu_lines(h(text))
    assert {"wild_7_straight_flush", "any_7_straight_flush", "straight_flush"} <= lines
    assert not lines & {"natural_7_straight_flush", "natural_7_flush", "natural_7_straight"}
    assert chan_chu(h(text), PT["PT3"]) == ChanChuResult("wild_7_straight_flush", 750)
    assert chan_chu(h(text), PT["PT4"]).pays == 1000
    assert chan_chu(h(text), PT["PT1"]) == ChanChuResult("any_7_straight_flush", 5000)


def test_six_suited_and_joker_that_are_not_a_7_card_run() -> None:
    lines = chan_chu_lines(h("2h 3h 4h 5h 6h 9h JK"))
    assert "wild_7_straight_flush" not in lines
    assert chan_chu(h("2h 3h 4h 5h 6h 9h JK"), PT["PT3"]) == ChanChuResult("straight_flush", 50)


@pytest.mark.parametrize(
    "text",
    [
        "As Ks Qs Js Ts Kh Qh",  # natural royal, natural suited K-Q of hearts
        "As Ks JK Js Ts Kd Qd",  # the joker completes the royal
        "Ah Kh Qh Jh JK Kc Qc",  # the joker as the Ten
    ],
)
def test_royal_flush_with_royal_match(text: str) -> None:
    assert "royal_flush_royal_match" in chan_chu_lines(h(text))
    assert chan_chu(h(text), PT["PT3"]) == ChanChuResult("royal_flush_royal_match", 1000)
    assert chan_chu(h(text), PT["PT4"]).pays == 2000
    # PT1 has no R/M line: the royal flush pays.
    assert chan_chu(h(text), PT["PT1"]) == ChanChuResult("royal_flush", 100)


@pytest.mark.parametrize(
    "text",
    [
        "As Ks Qs Js Ts Kh JK",  # the joker cannot be the Queen of the match
        "As Ks Qs Js Ts Kh Qd",  # K-Q of two suits
        "As Ks Qs Js Ts Kh Kd",  # not a K-Q
    ],
)
def test_royal_match_needs_a_natural_suited_king_queen(text: str) -> None:
    assert "royal_flush_royal_match" not in chan_chu_lines(h(text))
    assert chan_chu(h(text), PT["PT3"]) == ChanChuResult("royal_flush", 100)


@pytest.mark.parametrize(
    "text",
    [
        "As Ad Ah JK Kc Kd Kh",  # A A A JK + K K K
        "As Ad JK Kc Kd Kh Ks",  # A A JK + K K K K
        "7c 7d 7h 7s 4c 4d 4h",  # natural four and three
    ],
)
def test_super_full_house(text: str) -> None:
    lines = chan_chu_lines(h(text))
    assert {"super_full_house", "four_of_a_kind", "full_house", "three_of_a_kind"} <= lines
    assert chan_chu(h(text), PT["PT1"]) == ChanChuResult("super_full_house", 2000)
    assert chan_chu(h(text), PT["PT2"]).pays == 1000
    # PT3 has no super full house: the four of a kind pays.
    assert chan_chu(h(text), PT["PT3"]) == ChanChuResult("four_of_a_kind", 20)
    assert chan_chu(h(text), PT["PT5"]) == ChanChuResult("four_of_a_kind", 25)


def test_four_and_a_pair_is_not_a_super_full_house() -> None:
    lines = chan_chu_lines(h("7c 7d 7h 7s 4c 4d 9h"))
    assert "super_full_house" not in lines
    assert "full_house" in lines


def test_five_aces() -> None:
    cards = h("As Ad Ah Ac JK Kc Kd")
    lines = chan_chu_lines(cards)
    assert "five_aces" in lines
    assert "super_full_house" not in lines  # the joker is one of the five Aces, not a King
    pays = {name: chan_chu(cards, table) for name, table in PT.items()}
    assert pays == {
        "PT1": ChanChuResult("five_aces", 500),
        "PT2": ChanChuResult("five_aces", 300),
        "PT3": ChanChuResult("five_aces", 250),
        "PT4": ChanChuResult("five_aces", 400),
        "PT5": ChanChuResult("five_aces", 250),
    }


def test_natural_7_card_flush() -> None:
    cards = h("2d 4d 6d 8d Td Qd Ad")
    assert "natural_7_flush" in chan_chu_lines(cards)
    assert chan_chu(cards, PT["PT1"]) == ChanChuResult("natural_7_flush", 200)
    assert chan_chu(cards, PT["PT2"]).pays == 125
    assert chan_chu(cards, PT["PT3"]) == ChanChuResult("flush", 4)
    # Six suited cards and the joker are a flush, never a natural 7-card flush.
    assert "natural_7_flush" not in chan_chu_lines(h("2d 4d 6d 8d Td Qd JK"))


@pytest.mark.parametrize("text", ["5c 6d 7h 8s 9c Td Jh", "Ac 2d 3h 4s 5c 6d 7h"])
def test_natural_7_card_straight(text: str) -> None:
    assert "natural_7_straight" in chan_chu_lines(h(text))
    assert chan_chu(h(text), PT["PT1"]) == ChanChuResult("natural_7_straight", 50)
    assert chan_chu(h(text), PT["PT3"]) == ChanChuResult("straight", 2)


def test_a_7_card_straight_with_the_joker_is_not_natural() -> None:
    cards = h("5c 6d 7h 8s 9c Td JK")
    assert "natural_7_straight" not in chan_chu_lines(cards)
    assert chan_chu(cards, PT["PT1"]) == ChanChuResult("straight", 2)


@pytest.mark.parametrize(
    "text, line",
    [
        ("Ah Kh Qh Jh Th 2c 3d", "royal_flush"),
        ("Ah Kh JK Jh Th 2c 3d", "royal_flush"),
        ("5d 6d 7d 8d 9d Kc 2h", "straight_flush"),
        ("Ac 2c 3c JK 5c 9h Kd", "straight_flush"),
        ("9c 9d 9h 9s 2c 5d Kh", "four_of_a_kind"),
        ("As Ad Ah JK 2c 5d 9h", "four_of_a_kind"),
        ("Kc Kd Kh 4s 4c 8d 2h", "full_house"),
        ("As Ad JK Kc Kd 7h 2s", "full_house"),
        ("2h 5h 9h Jh Kh 3c 4d", "flush"),
        ("2h 5h 9h Jh JK 3c 7d", "flush"),
        ("9c 9d 9h 2s 5c Jd Kh", "three_of_a_kind"),
        ("As Ad JK 2s 5c Jd Kh", "three_of_a_kind"),
        ("Ac 2d 3h 4s 5c 9d Kh", "straight"),
        ("4c 5d 6h 7s JK Kd 2h", "straight"),
        ("Kc Kd 9h 9s 4c 4d 2h", "three_pair"),
        ("As JK 9h 9s 4c 4d 2h", "three_pair"),
        ("Kc Kd 9h 9s 4c 4d JK", "three_pair"),
    ],
)
def test_each_ordinary_line(text: str, line: str) -> None:
    assert chan_chu(h(text), PT["PT3"]).line == line
    expected = {
        "royal_flush": (100, 100, 100, 150, 125),
        "straight_flush": (40, 40, 50, 50, 50),
        "four_of_a_kind": (20, 20, 20, 25, 25),
        "full_house": (5, 5, 5, 5, 5),
        "flush": (4, 4, 4, 4, 4),
        "three_of_a_kind": (3, 3, 3, 3, 3),
        "straight": (2, 2, 2, 2, 2),
        "three_pair": (-1, -1, 0, -1, -1),
    }[line]
    assert tuple(chan_chu(h(text), PT[n]).pays for n in PT) == expected


def test_the_joker_is_not_wild_for_groups() -> None:
    assert chan_chu(h("9c 9d 9h JK 2c 5d Kh"), PT["PT3"]) == ChanChuResult("three_of_a_kind", 3)
    assert chan_chu(h("Kc Kd Kh JK 4s 4c 8d"), PT["PT3"]) == ChanChuResult("full_house", 5)


def test_the_joker_pairs_only_with_an_ace_for_three_pair() -> None:
    cards = h("Kc Kd 9h 9s 4c JK 2h")  # two pair, the joker a lone Ace
    assert "three_pair" not in chan_chu_lines(cards)
    assert chan_chu(cards, PT["PT3"]) == ChanChuResult("other", -1)


def test_three_of_a_kind_with_a_straight_is_paid_as_three_of_a_kind() -> None:
    cards = h("7c 7d 7h 8s 9c Td Jh")
    assert {"three_of_a_kind", "straight"} <= chan_chu_lines(cards)
    assert chan_chu(cards, PT["PT3"]) == ChanChuResult("three_of_a_kind", 3)


def test_three_pair_pushes_in_pt3_and_loses_in_pt4() -> None:
    cards = h("Qc Qd 8h 8s 3c 3d Ah")
    assert chan_chu(cards, PT["PT3"]) == ChanChuResult("three_pair", 0)
    assert chan_chu(cards, PT["PT4"]) == ChanChuResult("three_pair", -1)


def test_nothing_qualifies() -> None:
    cards = h("2c 5d 9h Js Kc 3d 7h")
    assert chan_chu_lines(cards) == frozenset()
    for table in PT.values():
        assert chan_chu(cards, table) == ChanChuResult("other", -1)


def test_chan_chu_rejects_a_hand_that_is_not_seven_cards() -> None:
    with pytest.raises(ValueError, match="seven cards"):
        chan_chu_lines(h("2c 5d 9h Js Kc 3d"))
    with pytest.raises(ValueError, match="twice"):
        chan_chu_lines(h("2c 2c 9h Js Kc 3d 7h"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 52), min_size=7, max_size=7, unique=True), st.randoms())
def test_chan_chu_lines_do_not_depend_on_order(codes: list[int], rnd: random.Random) -> None:
    cards = [DECK[c] for c in codes]
    shuffled = cards[:]
    rnd.shuffle(shuffled)
    assert chan_chu_lines(cards) == chan_chu_lines(shuffled)
    assert chan_chu(cards, PT["PT3"]) == chan_chu(shuffled, PT["PT3"])


def test_rare_line_counts_are_seed_001s() -> None:
    """docs/rules.md §9: exact PT3 counts of the rare lines, by enumerating every hand holding
    one."""
    pt3 = PT["PT3"]
    hands: set[frozenset[int]] = set()
    for suit in range(4):
        royal = [card(r, suit) for r in range(10, 15)]
        for five in [royal] + [[c for c in royal if c != x] + [JOKER] for x in royal]:
            rest = [c for c in DECK if c not in five]
            hands.update(frozenset([*five, a, b]) for a, b in combinations(rest, 2))
        for low in range(1, 9):
            run = [card(14 if r == 1 else r, suit) for r in range(low, low + 7)]
            hands.add(frozenset(run))
            hands.update(frozenset([*run[:i], *run[i + 1 :], JOKER]) for i in range(7))
    counts = Counter(chan_chu(sorted(hand), pt3).line for hand in hands)
    assert counts["natural_7_straight_flush"] == 32
    assert counts["royal_flush_royal_match"] == 72
    assert counts["wild_7_straight_flush"] == 196
    assert counts["royal_flush"] == 26_020
    aces = [card(14, s) for s in range(4)] + [JOKER]
    rest = [c for c in DECK if c not in aces]
    five_aces = Counter(chan_chu([*aces, a, b], pt3).line for a, b in combinations(rest, 2))
    assert five_aces == {"five_aces": 1_128}


def test_line_frequencies_match_seed_001_on_a_random_sample() -> None:
    """20,000 seeded random hands against the outside analysis's PT3 probabilities (loose
    bounds)."""
    probabilities = {
        "full_house": 0.02717299,
        "flush": 0.04004129,
        "three_of_a_kind": 0.04977518,
        "straight": 0.07158417,
        "three_pair": 0.01856717,
        "other": 0.78948855,
        "four_of_a_kind": 0.00199472,
        "straight_flush": 0.00119787,
    }
    rng = random.Random(20240101)
    n = 20_000
    counts = Counter(chan_chu(rng.sample(range(53), 7), PT["PT3"]).line for _ in range(n))
    for line, p in probabilities.items():
        expected = n * p
        sd = (n * p * (1 - p)) ** 0.5
        assert abs(counts[line] - expected) < 5 * sd + 2, (line, counts[line], expected)


# --- Envy bonus (docs/rules.md §8) ------------------------------------------------------------

FOUR_KINGS = h("Kc Kd Kh Ks 2c 5d 9h")
ROYAL = h("Ah Qh Jh Th JK 3c 4d")
NOTHING = h("2s 5s 9d Jc 3h 7c 8h")
STRAIGHT_FLUSH = h("5d 6d 7d 8d 9d Qc 2h")


def test_envy_line() -> None:
    envy = envy_paytable("PT3")
    assert envy_line(FOUR_KINGS, envy) == "four_of_a_kind"
    assert envy_line(h("As Ad Ah JK 2c 5d 9h"), envy) == "four_of_a_kind"
    assert envy_line(ROYAL, envy) == "royal_flush"
    assert envy_line(h("As Ks Qs Js Ts Kh Qh"), envy) == "royal_flush_royal_match"
    assert envy_line(h("Kc Kd Kh 4s 4c 8d 2h"), envy) is None  # a full house is no envy line
    assert envy_line(NOTHING, envy) is None


def test_envy_pays_qualified_seats_for_each_other_seat_that_hits() -> None:
    seats = {
        "A": (FOUR_KINGS, 5),  # $5 qualifies to be paid
        "B": (NOTHING, 25),
        "C": (ROYAL, 1),  # $1 still triggers, but is not paid
        "D": (STRAIGHT_FLUSH, None),  # no Chan Chu wager: neither triggers nor is paid
        "E": (h("Ac 3d 6s 8c Tc Qd Kh"), Decimal("4.99")),
    }
    result = settle_envy(seats, envy_paytable("PT3"))
    assert result["B"].total == 5 + 25
    assert [(a.from_seat, a.line, a.amount) for a in result["B"].awards] == [
        ("A", "four_of_a_kind", 5),
        ("C", "royal_flush", 25),
    ]
    assert result["A"].total == 25  # not paid for its own four of a kind
    assert [a.from_seat for a in result["A"].awards] == ["C"]
    assert result["C"].total == 0 and not result["C"].qualifies
    assert result["D"].total == 0
    assert result["E"].total == 0 and not result["E"].qualifies
    json.dumps({seat: s.to_dict() for seat, s in result.items()})


def test_envy_amounts_come_from_the_paytable() -> None:
    seats = {"1": (NOTHING, 5), "2": (STRAIGHT_FLUSH, 5), "3": (ROYAL, 10)}
    assert settle_envy(seats, envy_paytable("PT4"))["1"].total == 20 + 50
    assert settle_envy(seats, envy_paytable("PT5"))["2"].total == 50
    assert settle_envy(seats, envy_paytable("PT3"))["3"].total == 10


def test_envy_without_triggers_and_bad_wagers() -> None:
    result = settle_envy({"1": (NOTHING, 100), "2": (NOTHING, 100)}, envy_paytable("PT3"))
    assert all(s.total == 0 and s.awards == () and s.qualifies for s in result.values())
    with pytest.raises(ValueError, match="negative"):
        settle_envy({"1": (NOTHING, -5)}, envy_paytable("PT3"))


# --- Push Ace High (docs/rules.md §8) ---------------------------------------------------------

DEALER_ACE_HIGH = h("As Jd 9h 7c 5s 3d 2h")
DEALER_JOKER_HIGH = h("JK Jd 9h 7c 5s 3d 2h")
PLAYER_PAIR = h("Kc Kd 8s 6h 4c Th Qs")
PLAYER_ACE_HIGH = h("Ah Qd Tc 8d 6c 4s 3c")


def test_hands_used_for_push_ace_high_are_what_they_claim() -> None:
    for cards in (DEALER_ACE_HIGH, DEALER_JOKER_HIGH, PLAYER_ACE_HIGH):
        assert is_ace_high_pai_gow(evaluate(cards))
    assert not is_ace_high_pai_gow(evaluate(PLAYER_PAIR))


def test_push_ace_high_pays() -> None:
    assert push_ace_high(DEALER_ACE_HIGH, PLAYER_PAIR, RULES) == SideResult("dealer_ace_high", 5)
    assert push_ace_high(DEALER_JOKER_HIGH, PLAYER_PAIR, RULES) == SideResult(
        "dealer_ace_high_joker", 15
    )
    both = SideResult("dealer_and_player_ace_high", 40)
    assert push_ace_high(DEALER_ACE_HIGH, PLAYER_ACE_HIGH, RULES) == both
    assert push_ace_high(DEALER_JOKER_HIGH, PLAYER_ACE_HIGH, RULES) == both
    player_joker_high = h("JK Qd Tc 8d 6c 4s 3c")
    assert push_ace_high(DEALER_ACE_HIGH, player_joker_high, RULES) == both
    player_king_high = h("Kh Qd Tc 8d 6c 4s 3c")
    assert push_ace_high(DEALER_ACE_HIGH, player_king_high, RULES).pays == 5
    # A-K-Q-J-9 is no straight: still exactly Ace high.
    assert push_ace_high(h("As Kd Qh Jc 9s 3d 2h"), PLAYER_PAIR, RULES).pays == 5


@pytest.mark.parametrize(
    "dealer",
    [
        "As Ad 9h 7c 5s 3d 2h",  # a pair of Aces
        "JK Ad 9h 7c 5s 3d 2h",  # the joker pairs the Ace
        "Kd Qd 9h 7c 5s 3d 2h",  # King high
        "Jc Jd 9h 7c 5s As 2h",  # two Jacks: a pair
        "As 2d 3h 4c 5s 9d Jh",  # a straight (the wheel)
        "As 2d 3h 4c JK 9d Jh",  # the joker makes the straight
        "As Js 9s 7s 3s 4d 2h",  # a flush
        "JK Js 9s 7s 3s 4d 2h",  # the joker makes the flush
    ],
)
def test_push_ace_high_loses_unless_exactly_ace_high(dealer: str) -> None:
    assert push_ace_high(h(dealer), PLAYER_PAIR, RULES) == SideResult("lose", -1)


# --- Jacks Beat (docs/rules.md §8) ------------------------------------------------------------

TWO_JACKS = h("Jc Jd 9h 7c 5s 3d 2h")
JACKS_BEAT_HANDS = {
    "five_aces": "As Ad Ah Ac JK Kc Kd",
    "royal_flush": "Ks Qs Js Ts JK 4h 6c",
    "straight_flush": "5d 6d 7d 8d 9d Qc Kh",
    "four_of_a_kind": "8c 8d 8h 8s 4c Qd Kh",
    "full_house": "Kc Kd Kh 4s 4c 8d Ah",
    "flush": "2h 5h 9h Qh Kh 3c 4d",
    "straight": "7c 7d 7h 8s 9c Td Jh",  # three of a kind and a straight: the best five counts
    "three_of_a_kind": "Qc Qd Qh 8s 6c 4d 2h",
    "two_pair": "Qc Qd 8h 8s 6c 6d 2s",  # three pair is two pair in five cards
    "pair": "Qc Qd 8h 6s 4c Td 2s",
    "high_card": "Ac Qd 8h 6s 4c Td 2s",
}
JACKS_BEAT_PAYS = {
    "five_aces": (1000, 1000, 1000, 1000),
    "royal_flush": (500, 500, 500, 500),
    "straight_flush": (250, 250, 200, 200),
    "four_of_a_kind": (100, 100, 100, 100),
    "full_house": (60, 50, 40, 50),
    "flush": (25, 25, 25, 30),
    "straight": (20, 20, 20, 25),
    "three_of_a_kind": (15, 15, 15, 15),
    "two_pair": (10, 10, 10, 10),
    "pair": (5, 5, 5, 5),
    "high_card": (5, 5, 5, 5),
}


@pytest.mark.parametrize("line", list(JACKS_BEAT_HANDS))
@pytest.mark.parametrize("column, name", list(enumerate("ABCD")))
def test_jacks_beat_rows(line: str, column: int, name: str) -> None:
    player = h(JACKS_BEAT_HANDS[line])
    result = jacks_beat(TWO_JACKS, player, jacks_beat_paytable(name), RULES)
    assert result == SideResult(line, JACKS_BEAT_PAYS[line][column])


def test_jacks_beat_needs_two_natural_jacks() -> None:
    player = h(JACKS_BEAT_HANDS["five_aces"])
    table = jacks_beat_paytable("A")
    assert jacks_beat(h("Jc JK 9h 7c 5s 3d 2h"), player, table, RULES) == SideResult("lose", -1)
    assert jacks_beat(h("Jc Qd 9h 7c 5s 3d 2h"), player, table, RULES) == SideResult("lose", -1)
    three_jacks = h("Jc Jd Jh 7c 5s 3d 2h")
    assert jacks_beat(three_jacks, player, table, RULES).pays == 1000


def test_dealer_has_two_jacks() -> None:
    assert dealer_has_two_jacks(TWO_JACKS)
    assert dealer_has_two_jacks(h("Jc Jd Jh Js 5s 3d 2h"))
    assert not dealer_has_two_jacks(h("Jc JK 9h 7c 5s 3d 2h"))  # the joker is never a Jack
    assert not dealer_has_two_jacks(h("Jc Qd Qh 7c 5s 3d 2h"))


# --- The Pai Gow wager (docs/rules.md §5) -----------------------------------------------------

DEALER = setting("Qs Jh | Tc Td 7s 6c 2d")  # pair of Tens behind Q-J
DEALER_CARDS = DEALER.cards


def settle(player: str, rules: Rules = RULES) -> tuple[str, str, str | None, str | None]:
    r = settle_pai_gow(setting(player), DEALER, DEALER_CARDS, rules)
    return (r.outcome, r.reason, r.back, r.front)


def test_pai_gow_wins_both() -> None:
    assert settle("8s 8h | Ac Ad Kc 5d 3c") == ("win", "won_both", "win", "win")


def test_pai_gow_wins_one_is_a_push() -> None:
    assert settle("5d 3c | Ac Ad 8s 8h Kc") == ("push", "won_one", "win", "lose")
    assert settle("Ac Kc | Ad 8s 8h 5d 3c") == ("push", "won_one", "lose", "win")


def test_pai_gow_loses_both() -> None:
    assert settle("5d 3c | 9s 9h Kc Qd 8c") == ("lose", "won_neither", "lose", "lose")


def test_copies_go_to_the_dealer() -> None:
    # Back: pair of Tens, 7-6-2 against pair of Tens, 7-6-2; front Q-J against Q-J.
    assert settle("Qd Jc | Th Ts 7d 6h 2c") == ("lose", "won_neither", "copy", "copy")
    assert settle("Ac Kd | Th Ts 7d 6h 2c") == ("push", "won_one", "copy", "win")
    assert settle("Qd Jc | Ac Ad 7d 6h 2c") == ("push", "won_one", "win", "copy")
    assert settle("Qd 9c | Th Ts 7d 6h 2c") == ("lose", "won_neither", "copy", "lose")


def test_foul_loses_first() -> None:
    assert settle("Ac Ad | 8s 9h Kc 5d 3c") == ("lose", "foul", "lose", "lose")
    player = setting("Ac Ad | 8s 9h Kc 5d 3c")
    two_jacks = h("Jc Jd 9d 7c 5s 3d 2h")
    result = settle_pai_gow(player, None, two_jacks, RULES)
    assert (result.outcome, result.reason) == (PaiGowOutcome.LOSE, "foul")
    result = settle_pai_gow(player, DEALER, DEALER_CARDS, ACE_HIGH_PUSHES)
    assert (result.outcome, result.reason) == (PaiGowOutcome.LOSE, "foul")


def test_dealer_two_jacks_loses_every_wager() -> None:
    two_jacks = h("Jc Jd 9d 7c 5s 3d 2h")
    result = settle_pai_gow(setting("8s 8h | Ac Ad Kc 5h 3c"), None, two_jacks, RULES)
    assert result.outcome == PaiGowOutcome.LOSE
    assert (result.reason, result.back, result.front) == ("dealer_two_jacks", None, None)


def test_dealer_ace_high_pushes_only_with_the_switch() -> None:
    dealer = setting("Jd 9h | As 7c 5s 3d 2h")
    player = setting("8s 8c | Kc Kd Qc 6h 4c")  # wins both
    on = settle_pai_gow(player, dealer, dealer.cards, ACE_HIGH_PUSHES)
    assert (on.outcome, on.reason) == (PaiGowOutcome.PUSH, "dealer_ace_high")
    assert (on.back, on.front) == (Comparison.WIN, Comparison.WIN)
    off = settle_pai_gow(player, dealer, dealer.cards, RULES)
    assert (off.outcome, off.reason) == (PaiGowOutcome.WIN, "won_both")
    # The switch looks at the dealer's best five of seven, not at the dealer's back.
    paired = setting("9h 7c | As Ad 5s 3d 2h")
    on = settle_pai_gow(player, paired, paired.cards, ACE_HIGH_PUSHES)
    assert on.reason != "dealer_ace_high"


def test_settle_pai_gow_refuses_impossible_dealers() -> None:
    player = setting("8s 8h | Ac Ad Kc 5d 3c")
    with pytest.raises(ValueError, match="dealer's setting is needed"):
        settle_pai_gow(player, None, DEALER_CARDS, RULES)
    foul_dealer = setting("Tc Td | Qs Jh 7s 6c 2d")
    with pytest.raises(ValueError, match="fouls"):
        settle_pai_gow(player, foul_dealer, foul_dealer.cards, RULES)
    with pytest.raises(ValueError, match="not of the dealer's seven cards"):
        settle_pai_gow(player, DEALER, h("Jc Qd 9d 7c 5s 3d 2h"), RULES)


def test_pai_gow_result_to_dict() -> None:
    r = settle_pai_gow(setting("5d 3c | Ac Ad 8s 8h Kc"), DEALER, DEALER_CARDS, RULES)
    assert json.loads(json.dumps(r.to_dict())) == {
        "outcome": "push",
        "reason": "won_one",
        "back": "win",
        "front": "lose",
    }


# --- The player's best reply to the dealer's set hand -------------------------------------


def test_best_setting_prefers_a_win_to_a_higher_back() -> None:
    # The highest back (A A 8 8 K) leaves 5-3 in front: a push. Only 8-8 in front wins both.
    dealer = setting("Ks Qh | Tc Td 7s 6c 2d")
    best, result = best_setting_against(h("Ac Ad 8s 8h Kc 5d 3c"), dealer, RULES)
    assert set(best.front) == set(h("8s 8h"))
    assert result.outcome == PaiGowOutcome.WIN


def test_best_setting_takes_the_highest_back_among_equal_outcomes() -> None:
    weak = setting("3c 2d | 4h 6s 8c Td Qh")
    best, result = best_setting_against(h("As Ah Kd Kc 9s 5h 2c"), weak, RULES)
    assert set(best.front) == set(h("5h 2c"))
    assert result.outcome == PaiGowOutcome.WIN


def test_best_setting_breaks_full_ties_by_the_smallest_front_codes() -> None:
    weak = setting("3c 2d | Ac Qs Js 4c 4h")
    cards = h("5c 6d 7h 8s 9c 9d Kh")
    for order in (cards, cards[::-1]):
        best, result = best_setting_against(order, weak, RULES)
        assert set(best.front) == {parse_card("9c"), parse_card("Kh")}
        assert result.outcome == PaiGowOutcome.WIN


def _outcome_rank(outcome: PaiGowOutcome) -> int:
    return {"lose": 0, "push": 1, "win": 2}[outcome]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 52), min_size=14, max_size=14, unique=True),
    st.integers(0, 20),
    st.booleans(),
)
def test_best_setting_is_legal_and_never_worse(
    codes: list[int], dealer_split: int, ace_high_pushes: bool
) -> None:
    rules = Rules(ace_high_pushes_pai_gow=ace_high_pushes)
    player7 = [DECK[c] for c in codes[:7]]
    dealer7 = [DECK[c] for c in codes[7:]]
    splits = list(combinations(dealer7, 2))
    dealer = next(
        s
        for s in (Setting.from_front(dealer7, f) for f in splits[dealer_split:] + splits)
        if not s.is_foul
    )
    best, result = best_setting_against(player7, dealer, rules)
    assert not best.is_foul
    assert sorted(best.cards) == sorted(player7)
    assert result == settle_pai_gow(best, dealer, dealer7, rules)
    best_back = evaluate(best.back)
    for front in combinations(player7, 2):
        other = Setting.from_front(player7, front)
        if other.is_foul:
            continue
        other_result = settle_pai_gow(other, dealer, dealer7, rules)
        assert _outcome_rank(other_result.outcome) <= _outcome_rank(result.outcome)
        if other_result.outcome == result.outcome:
            assert evaluate(other.back) <= best_back
            if evaluate(other.back) == best_back:
                assert front_key(*other.front) <= front_key(*best.front)
