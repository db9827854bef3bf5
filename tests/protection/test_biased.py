"""The biased devices are what they claim, on a few thousand draws."""

from __future__ import annotations

import random
from itertools import pairwise

import pytest

from controller.game.cards import JOKER_CODE
from simulators.biased import ACES, BIASED, next_observation, riffle, scenario

N = 4000


def test_names() -> None:
    assert set(BIASED) == {
        "fair",
        "rng_favours_3",
        "loaded_die",
        "stacked_joker",
        "stacked_aces",
        "repeat_order",
        "one_riffle",
    }
    with pytest.raises(ValueError, match="unknown scenario"):
        scenario("nope")


def test_rng_favours_3_at_one_and_a_half_times() -> None:
    sc, r = scenario("rng_favours_3"), random.Random(1)
    numbers = [next_observation(sc, r).number for _ in range(N)]
    assert numbers.count(3) / N == pytest.approx(1.5 / 7, abs=0.02)
    assert numbers.count(5) / N == pytest.approx((1 - 1.5 / 7) / 6, abs=0.02)


def test_loaded_die_shows_six_a_quarter_of_the_time() -> None:
    sc, r = scenario("loaded_die"), random.Random(2)
    dice = [next_observation(sc, r).dice for _ in range(N)]
    assert sum(1 for d in dice if d is not None and d[0] == 6) / N == pytest.approx(0.25, abs=0.02)
    assert sum(1 for d in dice if d is not None and d[1] == 6) / N == pytest.approx(1 / 6, abs=0.02)


@pytest.mark.parametrize(
    ("name", "cards"), [("stacked_joker", (JOKER_CODE,)), ("stacked_aces", ACES)]
)
def test_stacked_cards_land_in_packet_3_twice_as_often(name: str, cards: tuple[int, ...]) -> None:
    sc, r = scenario(name), random.Random(3)
    hits = 0
    for _ in range(N):
        packet = next_observation(sc, r).packets[2]
        hits += sum(1 for c in cards if c in packet)
    assert hits / (N * len(cards)) == pytest.approx(14 / 53, abs=0.025)


def test_repeat_order_repeats_every_20th_deal() -> None:
    sc, r = scenario("repeat_order"), random.Random(4)
    deals = [next_observation(sc, r).dealt for _ in range(200)]
    for n in range(19, 200, 20):
        best = max(
            sum(a == b for a, b in zip(deals[n], deals[m], strict=True)) for m in range(n - 10, n)
        )
        assert best >= 49 - 6
    assert max(sum(a == b for a, b in zip(deals[5], deals[m], strict=True)) for m in range(5)) < 10


def test_one_riffle_leaves_at_most_two_rising_sequences() -> None:
    r = random.Random(5)
    order = list(range(53))
    for _ in range(200):
        out = riffle(order, r)
        where = {c: i for i, c in enumerate(out)}
        assert sorted(out) == list(range(53))
        assert sum(1 for a, b in pairwise(order) if where[b] < where[a]) <= 1
        order = out
