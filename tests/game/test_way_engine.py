"""The ways as data (controller/game/way): the shipped dealer-open.toml sets every hand as the
rule code ``house_way`` does, classic.toml sets every worked example of the classic way as
written, and the fast path (the rank-pattern table) gives what the rules give."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.game.cards import parse_cards
from controller.game.hands import Category, front_key
from controller.game.house_way import house_way
from controller.game.house_way_cache import (
    HouseWayCache,
    entry_of,
    flush_possible,
    load_table,
    pattern_hands,
    pattern_key,
)
from controller.game.setting import Rules
from controller.game.way import load_way
from controller.game.way.check import (
    ALL_HANDS,
    hand_classes,
    may_make_a_wheel,
    representative,
)

DEALER_OPEN = load_way("dealer-open")
CLASSIC = load_way("classic")
WHEELS = (Rules(), Rules(wheel_rank="lowest"))
HANDS = st.lists(st.integers(0, 52), min_size=7, max_size=7, unique=True)


def test_the_classes_stand_for_every_hand_exactly_once() -> None:
    classes = hand_classes()
    assert sum(w for _, w in classes) == ALL_HANDS == 154_143_080
    assert len({c for c, _ in classes}) == len(classes)
    flush = [c for c, _ in classes if flush_possible(c)]
    assert 200_000 < len(flush) < len(classes)


def _compare_chunk(chunk: list[tuple[tuple[int, ...], int]]) -> list[tuple[int, ...]]:
    """The classes of a chunk that dealer-open.toml sets otherwise than the rule code."""
    low = Rules(wheel_rank="lowest")
    bad = []
    for cards, _ in chunk:
        for rules in (WHEELS[0], low) if may_make_a_wheel(cards) else (WHEELS[0],):
            expected = house_way(cards, rules)
            got = DEALER_OPEN.set_by_rules(cards, rules)
            if got != expected or got.rule != expected.rule:
                bad.append(cards)
    return bad


@pytest.mark.exhaustive
def test_dealer_open_sets_every_hand_class_as_the_rule_code() -> None:
    """Every rank pattern and every flush suit class (together, every hand: see check.py),
    setting and rule id compared; under the other wheel rule, every class that can make a
    wheel (no other hand depends on it). Two processes."""
    classes = hand_classes()
    chunks = [classes[i::16] for i in range(16)]
    with ProcessPoolExecutor(2) as pool:
        bad = [cards for found in pool.map(_compare_chunk, chunks) for cards in found]
    assert bad == []


@settings(max_examples=1500, deadline=None)
@given(hand=HANDS, wheel=st.sampled_from(WHEELS))
def test_dealer_open_is_the_rule_code_on_random_hands(hand: list[int], wheel: Rules) -> None:
    expected = house_way(hand, wheel)
    for got in (DEALER_OPEN.set_by_rules(hand, wheel), DEALER_OPEN.set(hand, wheel)):
        assert got == expected and got.rule == expected.rule


@settings(max_examples=1000, deadline=None)
@given(hand=HANDS)
def test_a_hand_is_set_like_its_class(hand: list[int]) -> None:
    """The reduction check and diff rest on: the rule and the front and back values of a hand
    are those of its class's representative."""
    rep = list(representative(hand))
    for way in (DEALER_OPEN, CLASSIC):
        rule, front, back, _ = way.decide(sorted(hand), True)
        rule2, front2, back2, _ = way.decide(rep, True)
        assert (rule, front_key(*front), back) == (rule2, front_key(*front2), back2)


@settings(max_examples=1000, deadline=None)
@given(hand=HANDS, wheel=st.sampled_from(WHEELS))
def test_the_fast_path_is_the_rules(hand: list[int], wheel: Rules) -> None:
    for way in (CLASSIC, DEALER_OPEN):
        fast, slow = way.set(hand, wheel), way.set_by_rules(hand, wheel)
        assert fast == slow and fast.rule == slow.rule
        assert not fast.is_foul and sorted(fast.cards) == sorted(hand)


@pytest.mark.exhaustive  # every rank pattern of the shipped table
def test_the_shipped_classic_table_is_what_its_rules_give() -> None:
    low = Rules(wheel_rank="lowest")
    tables = {r: load_table(r, CLASSIC.table_files[0], CLASSIC.digest) for r in WHEELS}
    assert all(len(t.index) == 67_600 for t in tables.values()), (
        "classic.toml changed: python -m controller.game.way --write-tables"
    )
    for ordered in pattern_hands():
        key = pattern_key(ordered)
        for rules in (WHEELS[0], low) if may_make_a_wheel(tuple(ordered)) else (WHEELS[0],):
            assert tables[rules].entry(key) == entry_of(ordered, rules, CLASSIC.set_by_rules), (
                "classic.toml changed: python -m controller.game.way --write-tables"
            )
    # A table written for another digest is not used.
    assert not load_table(Rules(), CLASSIC.table_files[0], DEALER_OPEN.digest).index


def test_the_cache_api_takes_a_way() -> None:
    cache = HouseWayCache(Rules(), setter=CLASSIC.set_by_rules)
    hand = parse_cards("Kc Kd 5c 5d Qh 3h 2s")
    assert cache.setting(hand).rule == "CL-2P-7"
    assert HouseWayCache.packaged().setting(hand).rule == "2P"


def _set(way_cards: str) -> tuple[str, str, str | None, int]:
    s = CLASSIC.set(parse_cards(way_cards))

    def ranks(cards: Sequence[object]) -> str:
        return " ".join(str(c)[0] for c in cards)

    return ranks(s.front), ranks(s.back), s.rule, s.back_value >> 20


# The classic way: its worked examples (§1.9) and the examples of its decisions (§2).
CLASSIC_EXAMPLES = [
    ("K♣ K♦ 5♣ 5♦ Q♥ 3♥ 2♠", "5 5", "K K Q 3 2", "CL-2P-7"),
    ("7♣ 7♦ 7♥ 7♠ 3♣ 3♦ 3♥", "7 7", "7 7 3 3 3", "CL-4K3K-SPLIT"),
    ("K♣ K♦ K♥ 9♣ 9♦ 4♥ 4♠", "9 9", "K K K 4 4", "CL-FH-322"),  # also D11
    ("J♠ J♥ 6♠ 6♥ 2♠ 8♠ 9♠", "6 6", "J J 9 8 2", "CL-CH→2P/CL-2P-7"),
    ("A♥ K♥ Q♥ J♥ T♥ K♦ 9♥", "K 9", "A K Q J T", "CL-CH-RF"),
    ("K♠ Q♠ J♠ T♠ 9♠ A♦ 8♣", "A 8", "K Q J T 9", "CL-CH-SF"),
    ("J♥ T♥ 9♥ 8♥ 7♥ 6♦ 2♣", "J 2", "T 9 8 7 6", "CL-CH-SF-J"),
    ("K♠ Q♠ J♠ T♠ 9♠ K♦ 9♦", "9 9", "K K Q J T", "CL-CH→2P/CL-2P-7"),  # D5
    ("5♣ 5♦ 6♥ 6♠ 7♣ 8♦ JK", "J 8", "6 6 5 5 7", "CL-CH→2P/CL-2P"),  # D6: JK-8
    ("A♠ A♥ A♦ JK 2♠ 3♠ 4♠", "A A", "A J 2 3 4", "CL-CH-SF"),  # D14: straight flush back
    ("A♥ A♦ A♣ JK 2♠ 3♠ 4♠", "A A", "A J 2 3 4", "CL-4K-A-SPLIT"),  # D14: four Aces, split
    ("7♣ 7♦ 2♥ 2♠ K♣ 9♦ 4♥", "2 2", "7 7 K 9 4", "CL-2P-7"),  # §3: 7 7 2 2
    ("A♣ A♦ A♥ JK K♣ K♦ K♥", "A A", "A J K K K", "CL-4K3K-SPLIT"),  # D12
    ("A♣ A♦ JK K♣ K♦ K♥ K♠", "A A", "K K K K J", "CL-4K3K-KEEP"),  # D12
    ("A♣ A♦ A♥ K♣ K♦ 5♥ 2♠", "K K", "A A A 5 2", "CL-FH"),  # D13
    ("2♣ 2♦ 7♣ 7♦ 7♥ K♠ 3♥", "K 3", "7 7 7 2 2", "CL-FH-22-AK"),  # D10
    ("2♣ 2♦ 7♣ 7♦ 7♥ JK 3♥", "J 3", "7 7 7 2 2", "CL-FH-22-AK"),  # the joker is the Ace
    ("T♣ T♦ T♥ T♠ A♦ 5♥ 3♠", "A 5", "T T T T 3", "CL-4K-7T-KEEP"),  # D1: an Ace or better
    ("T♣ T♦ T♥ T♠ K♦ 5♥ 3♠", "T T", "T T K 5 3", "CL-4K-7T-SPLIT"),
    ("K♣ K♦ K♥ K♠ T♦ T♥ 3♠", "T T", "K K K K 3", "CL-4K-JK-KEEP"),
    ("K♣ K♦ K♥ K♠ 9♦ 9♥ 3♠", "K K", "K K 9 9 3", "CL-4K-JK-SPLIT"),
    ("5♣ 5♦ 5♥ 5♠ K♦ 9♥ 3♠", "K 9", "5 5 5 5 3", "CL-4K-26"),
    ("A♣ A♦ A♥ J♠ 9♦ 5♥ 3♠", "A J", "A A 9 5 3", "CL-3K-AAA"),
    ("A♣ A♦ 5♥ 5♠ K♦ 9♥ 3♠", "5 5", "A A K 9 3", "CL-2P-AA"),
    ("J♣ J♦ 6♥ 6♠ A♦ 9♥ 3♠", "6 6", "J J A 9 3", "CL-2P-J6A"),
    ("6♣ 6♦ 5♥ 5♠ A♦ 9♥ 3♠", "A 9", "6 6 5 5 3", "CL-2P"),  # 6s and 5s stay together
    ("K♣ K♦ 5♥ 5♠ 3♦ 3♥ 9♠", "K K", "5 5 3 3 9", "CL-3P"),
    ("A♣ A♦ A♥ A♠ JK K♣ K♦", "K K", "A A A A J", "CL-5A-KK"),
]


@pytest.mark.parametrize(("cards", "front", "back", "rule"), CLASSIC_EXAMPLES)
def test_classic_sets_the_examples_of_house_way_b(
    cards: str, front: str, back: str, rule: str
) -> None:
    got_front, got_back, got_rule, _ = _set(cards)
    assert got_rule == rule
    assert sorted(got_front.split()) == sorted(front.split())
    assert sorted(got_back.split()) == sorted(back.split())


def test_classic_physical_choices() -> None:
    # D14: A♥-A♦ in front leaves the straight flush A♠ 2♠ 3♠ 4♠ JK.
    s = CLASSIC.set(parse_cards("A♠ A♥ A♦ JK 2♠ 3♠ 4♠"))
    assert sorted(map(str, s.front)) == ["Ad", "Ah"] and s.back_value >> 20 == (
        Category.STRAIGHT_FLUSH
    )
    # The royal example keeps A♥ K♥ Q♥ J♥ T♥ and puts K♦ 9♥ in front.
    s = CLASSIC.set(parse_cards("A♥ K♥ Q♥ J♥ T♥ K♦ 9♥"))
    assert sorted(map(str, s.front)) == ["9h", "Kd"]
    # D5's example names the setting: 9-9 | K K Q J T.
    s = CLASSIC.set(parse_cards("K♠ Q♠ J♠ T♠ 9♠ K♦ 9♦"))
    assert sorted(map(str, s.front)) == ["9d", "9s"]


def test_the_ways_differ_where_house_way_b_says() -> None:
    # §3: two pairs, high pair 7 or better over 2-6, no Ace: dealer-open keeps them together.
    hand = parse_cards("K♣ K♦ 5♣ 5♦ Q♥ 3♥ 2♠")
    assert DEALER_OPEN.set(hand).rule == "2P" and CLASSIC.set(hand).rule == "CL-2P-7"
    # 3+2+2 with the three on top: dealer-open takes a pair from the three.
    hand = parse_cards("K♣ K♦ K♥ 9♣ 9♦ 4♥ 4♠")
    assert sorted(str(c)[0] for c in DEALER_OPEN.set(hand).front) == ["K", "K"]
