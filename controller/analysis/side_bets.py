"""The dealer's two Jacks, Jacks Beat and Push Ace High (docs/rules.md §8, §9).

- The chance of two or more dealer Jacks is counted: hands by how many Jacks they hold, each
  kind judged by the engine's ``wagers.dealer_has_two_jacks``, set beside the closed form.
- Jacks Beat is exact. Its line is the player's best five of seven, and whether the dealer then
  holds two Jacks depends on the player's hand only through how many Jacks the player holds. So
  the joint probability of a line is, over the census of the player's hands, the hands paid that
  line times the dealer hands with two Jacks among the 46 cards left, over C(53,7)·C(46,7). The
  line is the engine's ``wagers.jacks_beat`` on a hand of each census profile.
- Push Ace High needs the dealer's and the player's hands together: Monte Carlo of
  ``wagers.push_ace_high`` (and Jacks Beat may be run the same way, to check the exact figures).
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from math import comb
from typing import Final

from controller.analysis.census import Census
from controller.analysis.montecarlo import RunResult, deal, house_edge
from controller.game.cards import JACK, JOKER_CODE
from controller.game.paytables import Paytable, jacks_beat_paytable
from controller.game.setting import Rules
from controller.game.wagers import jacks_beat, push_ace_high, two_jack_hands

LOSE: Final = "lose"
_JACKS: Final = tuple((JACK - 2) * 4 + s for s in range(4))
_NOT_JACKS: Final = tuple(c for c in range(53) if c not in _JACKS)


@dataclass(frozen=True, slots=True)
class DealerJacks:
    """The dealer's two or more Jacks: counted hands and probability, and the closed form."""

    hands: int
    total: int
    probability: Fraction
    closed_form: Fraction
    census_hands: int | None = None  # the same count from a census of all hands, when taken

    def to_dict(self) -> dict[str, object]:
        return {
            "hands": self.hands,
            "total": self.total,
            "probability": float(self.probability),
            "closed_form": float(self.closed_form),
            "closed_form_text": "1 - (C(49,7) + 4*C(49,6)) / C(53,7)",
            "exact_match": self.probability == self.closed_form,
            "census_hands": self.census_hands,
        }


def dealer_jacks(census: Census | None = None) -> DealerJacks:
    total = comb(53, 7)
    hands = two_jack_hands(4, 49)
    closed = 1 - Fraction(comb(49, 7) + 4 * comb(49, 6), total)
    from_census = None
    if census is not None:
        from_census = sum(w for p, w in census.weights.items() if p.jacks >= 2)
    return DealerJacks(hands, total, Fraction(hands, total), closed, from_census)


@dataclass(frozen=True, slots=True)
class SideLine:
    """A side wager's line: pays (to 1), probability, return, and hands or rounds behind it."""

    line: str
    pays: int
    probability: float
    ret: float
    count: int

    def to_dict(self, count_name: str) -> dict[str, object]:
        return {
            "line": self.line,
            "pays": self.pays,
            count_name: self.count,
            "probability": self.probability,
            "return": self.ret,
        }


@dataclass(frozen=True, slots=True)
class SideFigures:
    """A side wager's figures: exact (``ci95`` None, counts are (player, dealer) hand pairs) or
    by Monte Carlo (counts are rounds)."""

    wager: str
    paytable: str
    method: str
    lines: tuple[SideLine, ...]
    house_edge: float
    ci95: tuple[float, float] | None
    total: int
    run: RunResult | None = None

    def line(self, line: str) -> SideLine:
        return next(f for f in self.lines if f.line == line)

    def to_dict(self) -> dict[str, object]:
        count_name = "rounds" if self.method == "monte-carlo" else "pairs"
        record: dict[str, object] = {
            "wager": self.wager,
            "paytable": self.paytable,
            "method": self.method,
            "total": self.total,
            "lines": [f.to_dict(count_name) for f in self.lines],
            "house_edge": self.house_edge,
            "ci95": None if self.ci95 is None else list(self.ci95),
        }
        if self.run is not None:
            record["seed"] = self.run.seed
            record["workers"] = self.run.workers
            record["seconds"] = self.run.seconds
            record["rounds_per_second"] = self.run.rounds_per_second
        return record


def jacks_beat_exact(census: Census, name: str, rules: Rules) -> SideFigures:
    """Jacks Beat paytable ``name`` (A–D), exact, from a census of the player's hands."""
    table = jacks_beat_paytable(name)
    pairs_total = census.total * comb(46, 7)
    joint: dict[str, int] = {}
    for p, weight in census.weights.items():
        left = 4 - p.jacks
        dealers = two_jack_hands(left, 46 - left)
        if not dealers:
            continue
        player = census.examples[p]
        dealer = [c for c in _JACKS if c not in player][:2]
        dealer += [c for c in _NOT_JACKS if c not in player and c != JOKER_CODE][:5]
        line = jacks_beat(dealer, player, table, rules).line
        joint[line] = joint.get(line, 0) + weight * dealers
    joint[LOSE] = pairs_total - sum(joint.values())
    lines = [
        SideLine(
            line,
            pays,
            joint.get(line, 0) / pairs_total,
            float(Fraction(pays * joint.get(line, 0), pairs_total)),
            joint.get(line, 0),
        )
        for line, pays in (*table.pays.items(), (LOSE, -1))
    ]
    won = sum(pays * joint.get(line, 0) for line, pays in table.pays.items())
    edge = Fraction(joint[LOSE] - won, pairs_total)
    return SideFigures(
        "jacks_beat", table.name, "exact", tuple(lines), float(edge), None, pairs_total
    )


@dataclass(frozen=True, slots=True)
class JacksBeatGame:
    """Jacks Beat by Monte Carlo (a check on the exact figures). Tally keys: line ids."""

    paytable: str
    rules: Rules

    def play(self, rng: random.Random, rounds: int) -> Counter[str]:
        table = jacks_beat_paytable(self.paytable)
        tally: Counter[str] = Counter()
        for _ in range(rounds):
            dealer7, player7 = deal(rng)
            tally[jacks_beat(dealer7, player7, table, self.rules).line] += 1
        return tally


@dataclass(frozen=True, slots=True)
class PushAceHighGame:
    """Push Ace High by Monte Carlo. Tally keys: line ids ("lose" when the dealer is not Ace-high
    pai gow)."""

    rules: Rules

    def play(self, rng: random.Random, rounds: int) -> Counter[str]:
        tally: Counter[str] = Counter()
        for _ in range(rounds):
            dealer7, player7 = deal(rng)
            tally[push_ace_high(dealer7, player7, self.rules).line] += 1
        return tally


def figures_from_run(wager: str, table: Paytable, run: RunResult) -> SideFigures:
    """Per-line rates, returns and the house edge with its interval, from a Monte Carlo run."""
    pays = {**table.pays, LOSE: -1}
    n = run.rounds
    lines = tuple(
        SideLine(line, pay, run.tally[line] / n, pay * run.tally[line] / n, run.tally[line])
        for line, pay in pays.items()
    )
    unknown = set(run.tally) - set(pays)
    if unknown:
        raise AssertionError(f"{wager}: lines not in paytable {table.name}: {sorted(unknown)}")
    estimate = house_edge((pays[line], c) for line, c in run.tally.items())
    return SideFigures(
        wager, table.name, "monte-carlo", lines, estimate.mean, estimate.ci95, n, run
    )


def ace_high_exact_marginals(census: Census) -> dict[str, float]:
    """From a census of single hands: the dealer's chance of Ace-high pai gow, with and without
    the joker (the 40-to-1 line needs both hands together and comes from Monte Carlo)."""
    total = census.total
    with_joker = sum(w for p, w in census.weights.items() if p.ace_high and p.joker)
    without = sum(w for p, w in census.weights.items() if p.ace_high and not p.joker)
    return {
        "dealer_ace_high": (with_joker + without) / total,
        "dealer_ace_high_joker": with_joker / total,
        "dealer_ace_high_no_joker": without / total,
    }
