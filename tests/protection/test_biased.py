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
        "riffles_4",
        "riffles_5",
        "riffles_6",
        "riffles_7",
        "pickup_riffles_3",
        "two_decks_3",
        "shelf_10",
        "kept_together_03",
        "rng_7_at_1_2",
        "die_6_at_019",
        "joker_to_seat",
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


def test_rng_7_at_1_2_and_die_6_at_019() -> None:
    sc, r = scenario("rng_7_at_1_2"), random.Random(6)
    numbers = [next_observation(sc, r).number for _ in range(N * 2)]
    assert numbers.count(7) / (N * 2) == pytest.approx(1.2 / 7, abs=0.015)
    sc, r = scenario("die_6_at_019"), random.Random(7)
    dice = [next_observation(sc, r).dice for _ in range(N * 2)]
    assert sum(1 for d in dice if d is not None and d[0] == 6) / (N * 2) == pytest.approx(
        0.19, abs=0.015
    )


def test_joker_goes_to_position_4_a_bit_more_than_half_the_time() -> None:
    sc, r = scenario("joker_to_seat"), random.Random(8)
    hits = 0
    for _ in range(N):
        obs = next_observation(sc, r)
        hits += any(
            JOKER_CODE in p and pos == 4 for p, pos in zip(obs.packets, obs.positions, strict=True)
        )
    assert hits / N == pytest.approx(0.5 + 0.5 * 7 / 53, abs=0.025)


def test_two_decks_alternate_and_kept_together_keeps_neighbours() -> None:
    sc, r = scenario("two_decks_3"), random.Random(9)
    deals = [next_observation(sc, r).dealt for _ in range(6)]
    # three riffles of the deal two back: at most 8 rising sequences against it (common cards)
    for a, b in zip(deals[2:], deals[4:], strict=False):
        common = [c for c in b if c in a]
        where = {c: i for i, c in enumerate(common)}
        ref = [c for c in a if c in where]
        assert 1 + sum(1 for x, y in pairwise(ref) if where[y] < where[x]) <= 8
    sc, r = scenario("kept_together_03"), random.Random(10)
    prev = next_observation(sc, r).dealt
    total = 0
    for _ in range(200):
        now = next_observation(sc, r).dealt
        after = {a: b for a, b in pairwise(prev)}
        total += sum(1 for a, b in pairwise(now) if after.get(a) == b)
        prev = now
    assert total / 200 == pytest.approx(0.3 * 48 + 1, abs=2)
