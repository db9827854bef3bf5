"""The enumeration shortcut (hand classes) against brute force: every hand of a small deck, and
every suit assignment of chosen and of random rank multisets of the full deck."""

from __future__ import annotations

import random
from collections import Counter
from itertools import combinations, product
from math import comb

import pytest

from controller.analysis.census import Profile, profile, take_census
from controller.analysis.hand_classes import (
    ALL_RANKS,
    Multiset,
    classes_of,
    hand_classes,
    hand_count,
    multisets_with_joker,
    rank_multisets,
)
from controller.game.cards import JOKER_CODE, parse_cards


def brute_force(multiset: Multiset, joker: bool) -> Counter[Profile]:
    """Every hand with these ranks: each rank's cards in every choice of suits."""
    per_rank = [
        [tuple((rank - 2) * 4 + s for s in suits) for suits in combinations(range(4), n)]
        for rank, n in multiset
    ]
    extra = (JOKER_CODE,) if joker else ()
    tally: Counter[Profile] = Counter()
    for choice in product(*per_rank):
        tally[profile(tuple(c for part in choice for c in part) + extra)] += 1
    return tally


def by_classes(multiset: Multiset, joker: bool) -> Counter[Profile]:
    tally: Counter[Profile] = Counter()
    for cards, weight in classes_of(multiset, joker):
        tally[profile(cards)] += weight
    return tally


def multiset_of(text: str) -> tuple[Multiset, bool]:
    cards = parse_cards(text)
    ranks = Counter(c.rank for c in cards if not c.is_joker)
    return tuple(sorted(ranks.items())), any(c.is_joker for c in cards)


# Multisets where the suits decide the rarest lines (docs/rules.md §8 Chan Chu).
CHOSEN = [
    "As 2s 3s 4s 5s 6s 7s",  # natural 7-card straight flush, ace low
    "8s 9s Ts Js Qs Ks As",  # natural 7-card straight flush, ace high; royal
    "3s 4s 5s 6s 7s 8s JK",  # wild 7-card straight flush
    "As Ks Qs Js Ts Kh Qh",  # royal flush + royal match
    "As Ks Qs Js JK Kh Qh",  # the same with the joker in the royal
    "As Ah Ad Ac JK Kd Ks",  # five aces
    "Ks Kh Kd Kc Qs Qh Qd",  # super full house
    "2s 4s 6s 8s Ts Qs JK",  # joker flush
    "9s Ts Js Qs Kh 2c 3d",  # straight
]


@pytest.mark.parametrize("text", CHOSEN)
def test_classes_match_every_suit_assignment_of_chosen_multisets(text: str) -> None:
    multiset, joker = multiset_of(text)
    assert by_classes(multiset, joker) == brute_force(multiset, joker)


def test_classes_match_every_suit_assignment_of_random_multisets() -> None:
    rng = random.Random(20261122)
    units = multisets_with_joker()
    for multiset, joker in rng.sample(units, 40):
        assert by_classes(multiset, joker) == brute_force(multiset, joker), (multiset, joker)


@pytest.mark.parametrize(
    ("ranks", "rare"),
    [
        ((10, 11, 12, 13, 14), {"royal_flush_royal_match", "five_aces", "super_full_house"}),
        ((14, 2, 3, 4, 5), {"straight_flush", "five_aces", "three_pair"}),
    ],
)
def test_classes_match_every_hand_of_a_small_deck(ranks: tuple[int, ...], rare: set[str]) -> None:
    """Five ranks in four suits and the joker: 21 cards, 116,280 hands, each profiled."""
    deck = [(r - 2) * 4 + s for r in ranks for s in range(4)] + [JOKER_CODE]
    brute: Counter[Profile] = Counter(profile(h) for h in combinations(deck, 7))
    census = take_census(ranks)
    assert sum(brute.values()) == comb(21, 7) == census.total
    assert dict(brute) == census.weights
    assert rare <= {line for p in brute for line in p.lines}


def test_weights_add_up_to_every_hand_of_the_deck() -> None:
    assert hand_count() == 154_143_080  # the full deck's classes: the census test
    assert sum(w for _, w in hand_classes((2, 3, 4, 5, 6, 7))) == comb(25, 7)


def test_rank_multisets_hold_at_most_four_of_a_rank() -> None:
    assert list(rank_multisets((2, 3), 7)) == [((2, 4), (3, 3)), ((2, 3), (3, 4))]
    assert list(rank_multisets((2,), 5)) == []
    assert len(list(rank_multisets(ALL_RANKS, 1))) == 13
    assert all(sum(n for _, n in m) == 6 for m in rank_multisets(ALL_RANKS[:5], 6))
