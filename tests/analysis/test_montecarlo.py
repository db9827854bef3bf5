"""Monte Carlo: the best reply against the engine's, reproducibility from a seed whatever the
workers, the per-class split, and the side wagers' simulations against the exact figures."""

from __future__ import annotations

import math
import random

import pytest

from controller.analysis.base_game import (
    DEALER_CLASSES,
    BaseGame,
    base_game_figures,
    best_reply,
    dealer_class,
)
from controller.analysis.census import Census
from controller.analysis.montecarlo import CHUNK_ROUNDS, deal, house_edge, simulate
from controller.analysis.side_bets import (
    JacksBeatGame,
    PushAceHighGame,
    ace_high_exact_marginals,
    figures_from_run,
    jacks_beat_exact,
)
from controller.game.cards import parse_cards
from controller.game.house_way import house_way
from controller.game.paytables import jacks_beat_paytable, push_ace_high_paytable
from controller.game.setting import Rules
from controller.game.wagers import best_setting_against, dealer_has_two_jacks, settle_pai_gow

RULES = Rules()
WHEEL_LOW = Rules(wheel_rank="lowest")


@pytest.mark.parametrize("rules", [RULES, WHEEL_LOW], ids=["wheel-second", "wheel-lowest"])
def test_best_reply_has_the_outcome_of_the_engines_best_setting(rules: Rules) -> None:
    rng = random.Random(7)
    compared = 0
    while compared < 600:
        dealer7, player7 = deal(rng)
        if dealer_has_two_jacks(dealer7):
            continue
        dealer = house_way(dealer7, rules)
        mine = best_reply(player7, dealer, rules)
        assert not mine.is_foul and sorted(mine.cards) == sorted(player7)
        ours = settle_pai_gow(mine, dealer, dealer7, rules).outcome
        assert ours == best_setting_against(player7, dealer, rules)[1].outcome
        compared += 1


def test_best_reply_finds_the_only_winning_split() -> None:
    dealer7 = parse_cards("Kd Qc 9h 7s 5c 3d 2h")  # House Way: 9-7 in front, K-Q-5-3-2 behind
    player7 = parse_cards("Ah Kc 8d 6s 4c 3c 2d")
    dealer = house_way(dealer7, RULES)
    reply = best_reply(player7, dealer, RULES)
    assert settle_pai_gow(reply, dealer, dealer7, RULES).outcome == "win"
    assert house_way(player7, RULES) != reply


def test_dealer_classes() -> None:
    assert dealer_class(parse_cards("Js Jh 2c 3d 4h 9s Kc"), RULES) == "two_jacks"
    assert dealer_class(parse_cards("As Jh 2c 3d 4h 9s Kc"), RULES) == "ace_high"
    assert dealer_class(parse_cards("JK Jh 2c 3d 4h 9s Kc"), RULES) == "ace_high"
    assert dealer_class(parse_cards("JK Jh 2c 3d 4h 5s Kc"), RULES) == "other"  # a straight


def test_a_run_depends_on_seed_and_rounds_not_on_workers() -> None:
    game = BaseGame("optimal", RULES)
    rounds = CHUNK_ROUNDS + 2_345  # a short last chunk
    one = simulate(game, rounds, seed=11, workers=1)
    two = simulate(game, rounds, seed=11, workers=2)
    assert one.tally == two.tally and two.workers == 2
    assert sum(one.tally.values()) == rounds
    assert (
        simulate(game, 3_000, seed=12, workers=1).tally
        != simulate(game, 3_000, seed=11, workers=1).tally
    )


def test_base_game_figures_split_by_dealer_class() -> None:
    game = BaseGame("house-way", RULES)
    figures = base_game_figures(game, simulate(game, 6_000, seed=3, workers=1))
    o = figures.overall
    assert o.rounds == 6_000 and o.win + o.push + o.lose == pytest.approx(1)
    assert sum(figures.by_class[c].share for c in DEALER_CLASSES) == pytest.approx(1)
    assert sum(figures.by_class[c].contribution for c in DEALER_CLASSES) == pytest.approx(
        o.house_edge
    )
    jacks = figures.by_class["two_jacks"]
    assert jacks.lose == 1 and jacks.house_edge == 1  # docs/rules.md §5: every wager loses
    lo, hi = o.ci95
    assert lo < o.house_edge < hi
    record = figures.to_dict()
    assert list(record)[:7] == ["strategy", "rounds", "win", "push", "lose", "house_edge", "ci95"]


def test_house_edge_estimate() -> None:
    e = house_edge([(1, 30), (0, 40), (-1, 30)])
    assert e.mean == 0
    assert e.stderr == pytest.approx(math.sqrt(0.6 * 100 / 99 / 100))
    assert house_edge([(5, 1), (5, 1), (-1, 8)]).mean == pytest.approx(-0.2)  # repeated pays add


def test_jacks_beat_by_monte_carlo_agrees_with_the_exact_figures(census: Census) -> None:
    exact = jacks_beat_exact(census, "B", RULES)
    run = simulate(JacksBeatGame("B", RULES), 60_000, seed=5, workers=2)
    mc = figures_from_run("jacks_beat", jacks_beat_paytable("B"), run)
    assert mc.ci95 is not None
    lose = mc.line("lose").probability
    se = math.sqrt(lose * (1 - lose) / run.rounds)
    assert abs(lose - exact.line("lose").probability) < 4 * se
    lo, hi = mc.ci95
    width = (hi - lo) / 2
    assert lo - width < exact.house_edge < hi + width


def test_push_ace_high_deals_agree_with_the_exact_single_hand_chance(census: Census) -> None:
    run = simulate(PushAceHighGame(RULES), 40_000, seed=9, workers=2)
    figures = figures_from_run("push_ace_high", push_ace_high_paytable(), run)
    p = ace_high_exact_marginals(census)["dealer_ace_high"]
    won = 1 - figures.line("lose").probability
    assert abs(won - p) < 4 * math.sqrt(p * (1 - p) / run.rounds)
    assert sum(f.count for f in figures.lines) == 40_000
