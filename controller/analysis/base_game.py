"""The Pai Gow wager by Monte Carlo (docs/rules.md §5, §9): the dealer sets by the House Way; the
player sets by the House Way too, or plays the best reply to the dealer's exposed setting.

Every round is settled by the engine's ``wagers.settle_pai_gow``. The best reply is chosen by
``best_reply``, a pruned search over the 21 splits that finds the same outcome as the engine's
``wagers.best_setting_against`` (a test compares them on random deals) at a fraction of its cost:

- a back can beat the dealer's only if the player's best five of seven does (``evaluate`` of all
  seven cards is at least every back's value);
- when it does, the split that keeps those five in back is legal (two cards never outrank the
  best five of the seven), so the player pushes at worst and wins if some split beats the
  dealer's front and back both, which only fronts above the dealer's can do;
- otherwise the player can push only with a legal front above the dealer's front.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Final, Literal

from controller.analysis.montecarlo import RunResult, deal, house_edge
from controller.game.cards import DECK
from controller.game.hands import evaluate, front_key, is_ace_high_pai_gow, is_foul_keys
from controller.game.house_way_cache import HouseWayCache
from controller.game.setting import Rules, Setting
from controller.game.wagers import PaiGowOutcome, dealer_has_two_jacks, settle_pai_gow

Strategy = Literal["optimal", "house-way"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("optimal", "house-way")
DealerClass = Literal["two_jacks", "ace_high", "other"]
DEALER_CLASSES: Final[tuple[DealerClass, ...]] = ("two_jacks", "ace_high", "other")
OUTCOMES: Final = ("win", "push", "lose")
RESULT: Final = {"win": 1, "push": 0, "lose": -1}

_SPLITS: Final = tuple(combinations(range(7), 2))
# Front keys of every pair of card codes, built from the engine's front_key.
_FRONT: Final = tuple(front_key(a, b) for a in range(53) for b in range(53))


def best_reply(player7: Sequence[int], dealer: Setting, rules: Rules) -> Setting:  # noqa: C901 — the best reply over the splits, one loop kept whole for speed
    """A setting of the player's seven cards with the best outcome against the dealer's set hand
    (win > push > lose; which setting, among those with that outcome, is unspecified)."""
    wheel = rules.wheel_high
    d_back = evaluate(dealer.back, wheel)
    d_front = front_key(dealer.front[0], dealer.front[1])
    cards = sorted(player7)
    fronts = sorted((_FRONT[cards[i] * 53 + cards[j]], i, j) for i, j in _SPLITS)

    def back_of(i: int, j: int) -> list[int]:
        return [c for k, c in enumerate(cards) if k != i and k != j]

    def setting(i: int, j: int) -> Setting:
        hand = [DECK[c] for c in cards]
        return Setting.from_front(hand, (hand[i], hand[j]), wheel_high=wheel)

    if evaluate(cards, wheel) > d_back:
        for fk, i, j in fronts:  # lowest fronts first: they leave the most in back
            if fk > d_front:
                bk = evaluate(back_of(i, j), wheel)
                if bk > d_back and not is_foul_keys(fk, bk):
                    return setting(i, j)  # wins both
        for fk, i, j in fronts:
            if fk > d_front:
                break
            if evaluate(back_of(i, j), wheel) > d_back:
                return setting(i, j)  # wins the back; fk <= d_front <= d_back < back: legal
        raise AssertionError("the best five in back always beat the dealer's back here")
    for fk, i, j in fronts:
        if fk > d_front and not is_foul_keys(fk, evaluate(back_of(i, j), wheel)):
            return setting(i, j)  # wins the front
    for fk, i, j in fronts:  # the wager loses however it is set: any legal setting
        if not is_foul_keys(fk, evaluate(back_of(i, j), wheel)):
            return setting(i, j)
    raise AssertionError("seven cards always have a split that does not foul")


_CACHES: dict[tuple[Rules, str | None], HouseWayCache] = {}


def house_way_cache(rules: Rules, way: str | None = None) -> HouseWayCache:
    """The House Way by rank pattern for ``rules``, loaded once per process (a worker's too):
    the filed way's rule code, or ``way``, a shipped way's name or a way file
    (controller/game/way)."""
    cache = _CACHES.get((rules, way))
    if cache is None:
        if way is None:
            cache = HouseWayCache.packaged(rules)
        else:
            from controller.game.way import load_way

            cache = load_way(way).cache(rules)
        _CACHES[(rules, way)] = cache
    return cache


def dealer_class(dealer7: Sequence[int], rules: Rules) -> DealerClass:
    """The dealer's class for the split of the figures: two Jacks, Ace-high pai gow, other."""
    if dealer_has_two_jacks(dealer7):
        return "two_jacks"
    if is_ace_high_pai_gow(evaluate(dealer7, rules.wheel_high)):
        return "ace_high"
    return "other"


@dataclass(frozen=True, slots=True)
class BaseGame:
    """The Pai Gow wager with one player using ``strategy``. Tally keys: "class/outcome".
    ``way``: the House Way the dealer (and a house-way player) sets by, a shipped way's name or
    a way file; None for the filed way's rule code (the same settings as "dealer-open")."""

    strategy: Strategy
    rules: Rules
    way: str | None = None

    def play_round(self, dealer7: Sequence[int], player7: Sequence[int]) -> tuple[str, str]:
        rules = self.rules
        set_by_house_way = house_way_cache(rules, self.way).setting
        cls = dealer_class(dealer7, rules)
        dealer: Setting | None = None
        if cls == "two_jacks":  # the dealer does not set; the player's setting cannot matter
            player = set_by_house_way(player7)
        else:
            dealer = set_by_house_way(dealer7)
            if self.strategy == "optimal":
                player = best_reply(player7, dealer, rules)
            else:
                player = set_by_house_way(player7)
        outcome: PaiGowOutcome = settle_pai_gow(player, dealer, dealer7, rules).outcome
        return cls, str(outcome)

    def play(self, rng: random.Random, rounds: int) -> Counter[str]:
        tally: Counter[str] = Counter()
        for _ in range(rounds):
            dealer7, player7 = deal(rng)
            cls, outcome = self.play_round(dealer7, player7)
            tally[f"{cls}/{outcome}"] += 1
        return tally


@dataclass(frozen=True, slots=True)
class Rates:
    """Outcome rates of a set of rounds and the house edge over them, with its 95% interval.
    ``share`` is the set's share of all rounds and ``contribution`` its part of the overall edge
    (both 1 and the edge itself for all rounds)."""

    rounds: int
    win: float
    push: float
    lose: float
    house_edge: float
    ci95: tuple[float, float]
    share: float
    contribution: float

    @classmethod
    def of(cls, counts: dict[str, int], all_rounds: int) -> Rates:
        n = sum(counts.values())
        estimate = house_edge((RESULT[o], c) for o, c in counts.items())
        win, push, lose = (counts[o] / n if n else 0.0 for o in OUTCOMES)
        return cls(
            n,
            win,
            push,
            lose,
            estimate.mean,
            estimate.ci95,
            n / all_rounds,
            (counts["lose"] - counts["win"]) / all_rounds,
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "rounds": self.rounds,
            "win": self.win,
            "push": self.push,
            "lose": self.lose,
            "house_edge": self.house_edge,
            "ci95": list(self.ci95),
            "share": self.share,
            "edge_contribution": self.contribution,
        }


@dataclass(frozen=True, slots=True)
class BaseGameFigures:
    """A base-game run: the strategy, overall rates and the split by the dealer's class."""

    strategy: Strategy
    rules: Rules
    overall: Rates
    by_class: dict[DealerClass, Rates]
    run: RunResult
    way: dict[str, str] | None = None

    def to_dict(self) -> dict[str, object]:
        """``{"strategy", "rounds", "win", "push", "lose", "house_edge", "ci95"}``, then the
        split by dealer class and how the run was made."""
        o = self.overall
        return {
            "strategy": self.strategy,
            "rounds": o.rounds,
            "win": o.win,
            "push": o.push,
            "lose": o.lose,
            "house_edge": o.house_edge,
            "ci95": list(o.ci95),
            "by_dealer_class": {cls: r.to_dict() for cls, r in self.by_class.items()},
            **({"house_way": self.way} if self.way else {}),
            "rules": {
                "wheel_rank": self.rules.wheel_rank,
                "ace_high_pushes_pai_gow": self.rules.ace_high_pushes_pai_gow,
            },
            "seed": self.run.seed,
            "workers": self.run.workers,
            "seconds": self.run.seconds,
            "rounds_per_second": self.run.rounds_per_second,
            "rounds_per_second_per_core": self.run.rounds_per_second_per_core,
        }


def base_game_figures(game: BaseGame, run: RunResult) -> BaseGameFigures:
    """The figures of a run of ``game``."""
    counts = {cls: {o: run.tally[f"{cls}/{o}"] for o in OUTCOMES} for cls in DEALER_CLASSES}
    overall = {o: sum(c[o] for c in counts.values()) for o in OUTCOMES}
    if sum(overall.values()) != run.rounds:
        raise AssertionError("a round was tallied outside the dealer classes")
    return BaseGameFigures(
        game.strategy,
        game.rules,
        Rates.of(overall, run.rounds),
        {cls: Rates.of(c, run.rounds) for cls, c in counts.items()},
        run,
        _way_of(game.way),
    )


def _way_of(way: str | None) -> dict[str, str] | None:
    """The way's name and digest, for the figures."""
    if way is None:
        return None
    from controller.game.way import load_way

    w = load_way(way)
    return {"name": w.name, "digest": w.digest}
