"""Issue 24: the exact laws of the shuffles that happen, checked against enumeration; each
likelihood ratio's mean under the exact null is 1; the order statistics against brute force."""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from fractions import Fraction
from itertools import combinations, pairwise, permutations, product
from math import comb, exp, factorial

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.protection import exact
from controller.protection.checks import relative_order
from controller.protection.orders import order_view
from controller.protection.shuffles import (
    COMMON,
    glue_llr,
    halves,
    pickup_llr,
    riffle_llr,
    shelf_llr,
)
from simulators.biased import riffle, shelf_shuffle


def rising(arrangement: tuple[int, ...]) -> int:
    """Rising sequences of an arrangement of 0..n-1 (values i, i+1 in increasing places)."""
    place = {v: j for j, v in enumerate(arrangement)}
    return 1 + sum(1 for v in range(len(arrangement) - 1) if place[v + 1] < place[v])


def gsr_law(n: int, riffles: int) -> dict[tuple[int, ...], Fraction]:
    """The exact law of ``riffles`` GSR riffles of 0..n-1, by enumerating every cut and every
    interleaving (each cut c with chance C(n,c)/2^n, then each interleaving equally likely)."""
    law = {tuple(range(n)): Fraction(1)}
    for _ in range(riffles):
        nxt: dict[tuple[int, ...], Fraction] = {}
        for order, p in law.items():
            for cut in range(n + 1):
                left, right = order[:cut], order[cut:]
                for spots in combinations(range(n), cut):
                    out: list[int] = []
                    i = j = 0
                    for k in range(n):
                        if k in spots:
                            out.append(left[i])
                            i += 1
                        else:
                            out.append(right[j])
                            j += 1
                    key = tuple(out)
                    nxt[key] = nxt.get(key, Fraction(0)) + p / 2**n
        law = nxt
    return law


@pytest.mark.parametrize(("n", "k"), [(3, 1), (4, 2), (5, 1), (5, 2), (5, 3)])
def test_riffle_law_is_bayer_diaconis_by_enumeration(n: int, k: int) -> None:
    law = gsr_law(n, k)
    for perm in permutations(range(n)):
        assert law.get(perm, Fraction(0)) == exact.riffle_chance(n, 2**k, rising(perm))
    dist = exact.riffle_rising(n, 2**k)
    by_r: defaultdict[int, Fraction] = defaultdict(Fraction)
    for perm, p in law.items():
        by_r[rising(perm)] += p
    assert [by_r[r] for r in range(1, n + 1)] == list(dist)


def test_a_riffle_restricted_to_some_cards_is_only_nearly_a_riffle_of_them() -> None:
    """The riffle test scores the 45–49 cards dealt both times as an a-shuffle of those cards.
    That is not exactly the law of a riffle of the whole deck seen on some cards (here 3 of 5:
    145/512 against 160/512 for the order kept) — it changes the test's power a little, never
    its false alarms (the ratio's mean under a fair shuffle is 1 whatever the alternative)."""
    law = gsr_law(5, 2)
    kept = (0, 2, 3)
    sub: defaultdict[tuple[int, ...], Fraction] = defaultdict(Fraction)
    for perm, p in law.items():
        sub[tuple(kept.index(c) for c in perm if c in kept)] += p
    assert sub[(0, 1, 2)] == Fraction(145, 512)
    assert exact.riffle_chance(3, 4, 1) == Fraction(160, 512)
    assert sum(sub.values()) == 1


def test_a_shelf_shuffle_restricted_to_some_cards_is_exactly_one_of_them() -> None:
    """Each card's shelf and side are independent of the others', so the cards dealt both times
    are shelf-shuffled exactly as if alone."""
    shelves, kept = 2, (0, 2, 3)
    sub: Counter[tuple[int, ...]] = Counter()
    for choice in product(range(2 * shelves), repeat=5):
        tops: list[list[int]] = [[] for _ in range(shelves)]
        bottoms: list[list[int]] = [[] for _ in range(shelves)]
        for card, c in enumerate(choice):
            (tops if c % 2 else bottoms)[c // 2].append(card)
        out = [x for s in range(shelves) for x in (*reversed(tops[s]), *bottoms[s])]
        sub[tuple(kept.index(c) for c in out if c in kept)] += 1
    for perm in permutations(range(3)):
        assert Fraction(sub[perm], (2 * shelves) ** 5) == exact.shelf_chance(
            3, shelves, peaks(perm)
        )


@pytest.mark.parametrize("m", [1, 2, 7, *COMMON])
def test_riffle_laws_sum_to_one_and_their_ratios_have_mean_one(m: int) -> None:
    eul = exact.eulerian(m)
    assert sum(eul) == factorial(m)
    for a in (2, 4, 8, 1024):
        assert sum(exact.riffle_rising(m, a)) == 1
    if m in COMMON:
        table = riffle_llr(m)
        for k in range(10):
            mean = sum(eul[r - 1] / factorial(m) * exp(table[r - 1][k]) for r in range(1, m + 1))
            assert mean == pytest.approx(1.0, rel=1e-9)


def peaks(word: tuple[int, ...] | list[int]) -> int:
    return sum(1 for a, b, c in zip(word, word[1:], word[2:], strict=False) if a < b > c)


@pytest.mark.parametrize("n", range(1, 9))
def test_peak_counts_against_every_permutation(n: int) -> None:
    counts = Counter(peaks(p) for p in permutations(range(n)))
    assert exact.peak_counts(n) == tuple(counts[k] for k in range((n - 1) // 2 + 1))


@pytest.mark.parametrize(("n", "shelves"), [(1, 2), (3, 2), (4, 2), (4, 3), (5, 2), (5, 3)])
def test_shelf_law_by_enumerating_every_shelf_and_side(n: int, shelves: int) -> None:
    ways: Counter[tuple[int, ...]] = Counter()
    for choice in product(range(2 * shelves), repeat=n):
        tops: list[list[int]] = [[] for _ in range(shelves)]
        bottoms: list[list[int]] = [[] for _ in range(shelves)]
        for card, c in enumerate(choice):
            (tops if c % 2 else bottoms)[c // 2].append(card)
        out = tuple(x for s in range(shelves) for x in (*reversed(tops[s]), *bottoms[s]))
        ways[out] += 1
    for perm in permutations(range(n)):
        assert ways[perm] == exact.shelf_ways(n, shelves, peaks(perm)), perm


def test_the_simulated_shelf_shuffler_is_the_one_the_law_describes() -> None:
    """Every pile decreasing then increasing: at most shelves - 1 + peaks... checked as the
    law's support: no order with a zero chance ever comes out."""
    rng = random.Random(3)
    for _ in range(300):
        out = shelf_shuffle(list(range(12)), 3, rng)
        assert sorted(out) == list(range(12))
        assert exact.shelf_ways(12, 3, peaks(out)) > 0


@pytest.mark.parametrize("m", COMMON)
def test_shelf_laws_sum_to_one_and_their_ratios_have_mean_one(m: int) -> None:
    counts = exact.peak_counts(m)
    for shelves in (2, 10, 50):
        total = sum(c * exact.shelf_chance(m, shelves, p) for p, c in enumerate(counts))
        assert total == 1
    table = shelf_llr(m)
    for s in range(len(table[0])):
        mean = sum(c / factorial(m) * exp(table[p][s]) for p, c in enumerate(counts))
        assert mean == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize(
    ("m", "glue"), [(3, Fraction(1, 3)), (4, Fraction(1, 2)), (5, Fraction(3, 10))]
)
def test_glued_successions_by_enumeration(m: int, glue: Fraction) -> None:
    law: defaultdict[int, Fraction] = defaultdict(Fraction)
    for pattern in product((False, True), repeat=m - 1):
        p = Fraction(1)
        blocks: list[list[int]] = [[0]]
        for card, glued in zip(range(1, m), pattern, strict=True):
            p *= glue if glued else 1 - glue
            if glued:
                blocks[-1].append(card)
            else:
                blocks.append([card])
        orders = list(permutations(blocks))
        for order in orders:
            word = [c for b in order for c in b]
            law[sum(1 for a, b in pairwise(word) if b == a + 1)] += p / len(orders)
    assert exact.glued_successions(m, glue) == tuple(law[k] for k in range(m))
    assert exact.glued_successions(m, Fraction(0)) == exact.successions(m)


@pytest.mark.parametrize("m", COMMON)
def test_glue_ratios_have_mean_one(m: int) -> None:
    null = exact.successions(m)
    table = glue_llr(m)
    for g in range(len(table[0])):
        mean = sum(float(p) * exp(table[k][g]) for k, p in enumerate(null) if p > 0)
        assert mean == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("sizes", [(1, 1), (2, 1), (2, 2, 1), (3, 2, 2), (1, 2, 3, 1)])
def test_halves_spread_by_enumerating_every_order(sizes: tuple[int, ...]) -> None:
    labels = [x for x, n in enumerate(sizes) for _ in range(n)]
    law: Counter[int] = Counter()
    orders = set(permutations(labels))
    for word in orders:
        first = word[: (len(word) + 1) // 2]
        law[sum((2 * first.count(x) - n) ** 2 for x, n in enumerate(sizes))] += 1
    dist = exact.halves_spread(sizes)
    assert sum(dist) == 1
    assert [dist[t] if t < len(dist) else 0 for t in range(max(law) + 1)] == [
        Fraction(law[t], len(orders)) for t in range(max(law) + 1)
    ]


@pytest.mark.parametrize("sizes", [(7,) * 7, (5, 6, 6, 7, 7, 7, 7), (3, 7, 7, 7, 7, 7, 7)])
def test_pickup_ratios_have_mean_one(sizes: tuple[int, ...]) -> None:
    null = exact.halves_spread(sizes)
    assert sum(null) == 1
    table = pickup_llr(sizes)
    for lam in range(len(table[0])):
        mean = sum(float(p) * exp(table[t][lam]) for t, p in enumerate(null))
        assert mean == pytest.approx(1.0, rel=1e-9)


deck = st.permutations(range(53))


@settings(max_examples=40, deadline=None)
@given(earlier=deck, now=deck)
def test_order_view_against_brute_force(earlier: list[int], now: list[int]) -> None:
    dealt, stub = now[:49], now[49:]
    view = order_view(1, earlier[:49], dealt, stub)
    common = [c for c in dealt if c in earlier[:49]]
    ref = [c for c in earlier[:49] if c in common]
    word = [ref.index(c) for c in common]
    assert view.m == len(common) >= 45
    assert view.rising == rising(tuple(word))
    assert view.peaks == peaks(word)
    assert view.valleys == peaks([-x for x in word])
    assert view.ahead == sum(1 for a, b in pairwise(word) if b == a + 1)
    assert view.behind == sum(1 for a, b in pairwise(word) if b == a - 1)
    assert view.by_packet == [earlier.index(c) // 7 for c in common]
    assert view.place == relative_order(earlier[:49], dealt)


@settings(max_examples=30, deadline=None)
@given(earlier=deck, now=deck, hands=st.permutations(range(7)), seed=st.integers(0, 2**32))
def test_the_pickup_statistic_ignores_how_hands_are_picked_up(
    earlier: list[int], now: list[int], hands: list[int], seed: int
) -> None:
    """Any order of the hands, any order of each hand's cards: the same statistic."""
    rng = random.Random(seed)
    packets = [earlier[7 * k : 7 * k + 7] for k in range(7)]
    shuffled = []
    for k in hands:
        hand = list(packets[k])
        rng.shuffle(hand)
        shuffled += hand
    a = order_view(1, earlier[:49], now[:49], now[49:])
    b = order_view(1, shuffled, now[:49], now[49:])
    assert halves(a.by_packet) == halves(b.by_packet)


def test_gsr_simulator_matches_the_exact_law_on_average() -> None:
    """The simulated riffle (used by the bench) against the law: mean rising sequences."""
    rng = random.Random(9)
    n, k = 20, 3
    total = 0
    for _ in range(3000):
        order = list(range(n))
        for _ in range(k):
            order = riffle(order, rng)
        total += rising(tuple(order))
    mean = sum(r * p for r, p in enumerate(exact.riffle_rising(n, 2**k), start=1))
    assert total / 3000 == pytest.approx(float(mean), abs=0.1)
    assert comb(2**k + n - 1, n) > 0
