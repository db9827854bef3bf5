"""The exact null distributions against brute force on small cases and the engine's counts."""

from __future__ import annotations

from fractions import Fraction
from itertools import pairwise, permutations, product
from math import comb

import pytest

from controller.game.hands import Category
from controller.protection import exact
from controller.protection.exact_hands import ACE_HIGH_HANDS, HAND_CATEGORY_COUNTS, count_hands


def test_every_distribution_sums_to_one() -> None:
    dists = [
        exact.uniform(7),
        exact.dice_sum(),
        *(exact.dice_sum(f) for f in range(1, 7)),
        exact.fixed_points(),
        *(exact.successions(r) for r in range(1, 50)),
        *(exact.rising_sequences(r) for r in range(1, 50)),
        exact.stub_overlap(),
        exact.hand_categories(),
        *(exact.hypergeometric(4, s) for s in exact.CELL_SIZES),
    ]
    for dist in dists:
        assert sum(dist) == 1
        assert all(p >= 0 for p in dist)


def test_dice_sum_is_the_216_throws() -> None:
    counts = [0] * 16
    for throw in product(range(1, 7), repeat=3):
        counts[sum(throw) - 3] += 1
    assert exact.dice_sum() == [Fraction(c, 216) for c in counts]
    loaded = exact.dice_sum(6)
    assert loaded[15] == Fraction(1, 4) * Fraction(1, 36)  # 6-6-6 with the first die loaded


@pytest.mark.parametrize(("n", "m"), [(5, 5), (6, 4), (7, 3)])
def test_fixed_points_against_every_permutation(n: int, m: int) -> None:
    counts = [0] * (m + 1)
    for p in permutations(range(n)):
        counts[sum(1 for i in range(m) if p[i] == i)] += 1
    total = sum(counts)
    assert exact.fixed_points(n, m) == tuple(Fraction(c, total) for c in counts)


@pytest.mark.parametrize("r", range(1, 8))
def test_successions_and_rising_sequences_against_every_permutation(r: int) -> None:
    succ = [0] * r
    rising = [0] * r
    for p in permutations(range(r)):
        succ[sum(1 for a, b in pairwise(p) if b == a + 1)] += 1
        rising[sum(1 for a, b in pairwise(p) if b < a)] += 1
    total = sum(succ)
    assert exact.successions(r) == tuple(Fraction(c, total) for c in succ)
    assert exact.rising_sequences(r) == tuple(Fraction(c, total) for c in rising)


def test_dealer_two_jacks_and_ace_high_are_the_engine_counts() -> None:
    assert exact.dealer_two_jacks() == Fraction(12_307_232, comb(53, 7))
    assert exact.ace_high() == Fraction(ACE_HIGH_HANDS, comb(53, 7))
    assert sum(HAND_CATEGORY_COUNTS) == comb(53, 7)


def test_hand_counts_with_the_joker_recomputed() -> None:
    """The cheap part: the hands holding the joker (about 1 s), against closed forms."""
    counts, ace_high = count_hands(joker=True)
    assert sum(counts) == comb(52, 6)
    assert counts[Category.FIVE_ACES] == HAND_CATEGORY_COUNTS[Category.FIVE_ACES] == comb(48, 2)
    assert ace_high == counts[Category.HIGH_CARD]  # the joker is an Ace in a high-card hand
    for c, n in enumerate(counts):
        assert n <= HAND_CATEGORY_COUNTS[c]


@pytest.mark.exhaustive
def test_shipped_hand_counts_are_the_engine_census() -> None:
    """Every hand class through ``hands.evaluate`` (about 3 s)."""
    counts, ace_high = count_hands()
    assert tuple(counts) == HAND_CATEGORY_COUNTS
    assert ace_high == ACE_HIGH_HANDS
