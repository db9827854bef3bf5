"""The protection tests. Each is a bank of CUSUMs (``cusum.Bank``) whose increments are log
likelihood ratios of one round's observation: an alternative (the fault the test looks for)
over the observation's exact null distribution (``exact``). Under a fair device every
increment's exponential has mean exactly 1 given the past, which is what bounds the false alarms
(docs/protection.md "Why the false-alarm bound holds")."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from itertools import pairwise
from math import exp, log
from operator import eq
from typing import Any

from controller.game.cards import DECK
from controller.game.hands import CATEGORY_LABELS, Category, is_ace_high_pai_gow
from controller.game.wagers import dealer_has_two_jacks
from controller.protection import exact
from controller.protection.cusum import Bank
from controller.protection.exact import DEALT, DECK_CARDS, PACKET_SIZE, PACKETS
from controller.protection.observation import DealObservation
from controller.protection.orders import OrderView

CELLS = PACKETS + 1  # seven packets, then the stub
CELL_LABELS = (*(f"packet {k + 1}" for k in range(PACKETS)), "stub")
PLACE_LABELS = (*(f"card {j + 1} of its packet" for j in range(PACKET_SIZE)), "stub")
CATEGORIES = len(Category)


@dataclass(frozen=True, slots=True)
class Cell:
    """One cell of a test's table for the panel: observed count (or sum) beside its exact
    expectation under a fair device, over the rounds since the test was last reset."""

    label: str
    observed: float
    expected: float

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "observed": self.observed, "expected": self.expected}


@dataclass(slots=True)
class Round:
    """What several tests need of one observation, computed once per round."""

    obs: DealObservation
    dealt: list[int]
    packet_of: list[int]  # card → cell 0–7 (7: stub)
    place_of: list[int]  # card → place 0–6 in its packet, 7: stub
    categories: list[int]  # position - 1 → category of its seven cards
    dealer_key: int
    recent: Sequence[tuple[tuple[int, ...], frozenset[int]]]  # earlier deals, oldest first
    inverse: list[int] | None  # see ``relative_order``
    seat_of: list[int] = field(default_factory=list)  # card → position 0–6 after the draw, 7: stub
    orders: list[OrderView] = field(default_factory=list)  # against earlier deals, newest first


def relative_order(previous: Sequence[int], dealt: Sequence[int]) -> list[int]:
    """For the cards dealt both last time and now: taken in last deal's order, each one's place
    among them in this deal's order. Under a fair shuffle this is a uniform permutation of the
    r common cards, whatever the previous order was."""
    now, before = set(dealt), set(previous)
    common_now = [c for c in dealt if c in before]
    place = {c: i for i, c in enumerate(common_now)}
    return [place[c] for c in previous if c in now]


def alternative(p: float, ratio: float) -> float:
    """The alternative chance of a cell of null chance p: ``ratio`` × p, at most halfway to 1."""
    return min(ratio * p, (1.0 + p) / 2.0)


class Check(ABC):
    """One named test: a bank of CUSUMs, its counts for the panel, and what an alarm means."""

    name = ""
    title = ""
    watches = ""
    advice = ""
    severity = "warning"
    #: whether it reads the cards (False: the first-position draw's tests, which read ``obs``
    #: alone; a watch of those alone skips the work on the deal)
    reads_deal = True

    def __init__(self, base: Sequence[float]) -> None:
        self.bank = Bank(base)
        self.rounds = 0
        self.threshold = 0.0

    @property
    def size(self) -> int:
        return len(self.bank)

    def applies(self, r: Round) -> bool:
        return True

    @abstractmethod
    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        """Count round r (``self.rounds`` already counts it); the CUSUM that rose highest this
        round and its value."""

    @abstractmethod
    def label(self, i: int) -> str:
        """What CUSUM i looks for, for a person."""

    def reference(self, i: int) -> str:
        """What CUSUM i compares with (the null, or the earlier order it is relative to)."""
        return "the exact law of a fair device"

    def alternative(self, i: int) -> str:
        """The fault CUSUM i's likelihood ratio is against."""
        return self.label(i)

    def evidence(self, i: int) -> str:
        """The latest or accumulated observation behind CUSUM i, for a person ("" if none)."""
        return ""

    @abstractmethod
    def cells(self, worst: int) -> list[Cell]:
        """The panel's table; ``worst`` is the CUSUM now highest."""

    def clear(self) -> None:
        self.bank.clear()
        self.rounds = 0
        self.clear_counts()

    @abstractmethod
    def clear_counts(self) -> None:
        """Forget the counts (a reset)."""

    @abstractmethod
    def counts_state(self) -> dict[str, Any]:
        """The counts as JSON-able data (the watch's state)."""

    @abstractmethod
    def load_counts(self, data: dict[str, Any]) -> None:
        """Take back counts ``counts_state`` gave."""


def _ints(data: dict[str, Any], key: str, size: int) -> list[int]:
    value = data.get(key)
    if (
        not isinstance(value, list)
        or len(value) != size
        or not all(isinstance(v, int) for v in value)
    ):
        raise ValueError(f"protection state: {key} must be {size} integers")
    return list(value)


def _floats(data: dict[str, Any], key: str, size: int) -> list[float]:
    value = data.get(key)
    if not isinstance(value, list) or len(value) != size:
        raise ValueError(f"protection state: {key} must be {size} numbers")
    if not all(isinstance(v, (int, float)) for v in value):
        raise ValueError(f"protection state: {key} must be {size} numbers")
    return [float(v) for v in value]


class CountingCheck(Check):
    """A check whose panel table is a list of counts (``counts``) kept per round."""

    count_size = 0

    def __init__(self, base: Sequence[float]) -> None:
        super().__init__(base)
        self.counts = [0] * self.count_size

    def clear_counts(self) -> None:
        self.counts = [0] * self.count_size

    def counts_state(self) -> dict[str, Any]:
        return {"counts": list(self.counts)}

    def load_counts(self, data: dict[str, Any]) -> None:
        self.counts = _ints(data, "counts", self.count_size)


# --- a. the first-position draw --------------------------------------------------------------


class RngNumber(CountingCheck):
    name = "rng_number"
    reads_deal = False
    title = "RNG numbers 1–7"
    watches = "each RNG draw's number against 1/7 each (CUSUM per number: drawn 1.5× its share)"
    advice = "swap the RNG box and send it for testing"
    severity = "warning"
    count_size = PACKETS

    def __init__(self) -> None:
        p = float(exact.uniform(PACKETS)[0])
        q = alternative(p, 1.5)
        self.hit = log(q / p)
        super().__init__([log((1 - q) / (1 - p))] * PACKETS)

    def applies(self, r: Round) -> bool:
        return r.obs.draw_method in ("rng", "software_rng") and r.obs.number is not None

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        i = (r.obs.number or 1) - 1
        self.counts[i] += 1
        return i, self.bank.add(i, self.hit, self.rounds, now)

    def label(self, i: int) -> str:
        return f"number {i + 1} drawn too often"

    def cells(self, worst: int) -> list[Cell]:
        return [Cell(str(i + 1), c, self.rounds / PACKETS) for i, c in enumerate(self.counts)]


class DiceSum(CountingCheck):
    name = "dice_sum"
    reads_deal = False
    title = "Sum of the three dice"
    watches = (
        "each dice draw's sum 3–18 against the exact distribution of 216 throws (CUSUM per "
        "face: one die showing it 1/4 of the time)"
    )
    advice = "replace the dice (and the shaker); check the dice reader's calibration"
    count_size = 16

    def __init__(self) -> None:
        null = exact.dice_sum()
        self.p = [float(x) for x in null]
        self.llr = [
            [log(q / p) for q, p in zip(exact.dice_sum(face), null, strict=True)]
            for face in range(1, 7)
        ]
        super().__init__([0.0] * 6)

    def applies(self, r: Round) -> bool:
        return r.obs.draw_method in ("dice", "dice_manual") and r.obs.dice is not None

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        s = sum(r.obs.dice or (1, 1, 1)) - 3
        self.counts[s] += 1
        best, best_v = 0, -1.0
        for f in range(6):
            v = self.bank.add(f, self.llr[f][s], self.rounds, now)
            if v > best_v:
                best, best_v = f, v
        return best, best_v

    def label(self, i: int) -> str:
        return f"sums as if a die showed {i + 1} a quarter of the time"

    def cells(self, worst: int) -> list[Cell]:
        return [Cell(str(s + 3), c, self.rounds * self.p[s]) for s, c in enumerate(self.counts)]


class DiceFace(CountingCheck):
    name = "dice_face"
    reads_deal = False
    title = "Dice faces"
    watches = (
        "how many of the three dice show each face, against 1/6 each (CUSUM per face: one die"
        " loaded to it at 1/4)"
    )
    advice = "replace the dice: one is likely loaded; keep it for surveillance"
    count_size = 6

    def __init__(self) -> None:
        # One of three dice shows face f with chance 1/4 (others 3/20): LR = 0.9 + 0.2·n_f.
        self.llr = [log(0.9 + 0.2 * n) for n in range(4)]
        super().__init__([self.llr[0]] * 6)

    def applies(self, r: Round) -> bool:
        return r.obs.draw_method in ("dice", "dice_manual") and r.obs.dice is not None

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        dice = r.obs.dice or (1, 1, 1)
        best, best_v = 0, -1.0
        for f in set(dice):
            n = dice.count(f)
            self.counts[f - 1] += n
            v = self.bank.add(f - 1, self.llr[n], self.rounds, now)
            if v > best_v:
                best, best_v = f - 1, v
        return best, best_v

    def label(self, i: int) -> str:
        return f"face {i + 1} comes up too often"

    def cells(self, worst: int) -> list[Cell]:
        return [Cell(str(f + 1), c, self.rounds * 3 / 6) for f, c in enumerate(self.counts)]


# --- b. where the cards go -------------------------------------------------------------------


class CardCell(CountingCheck):
    """Each card's cell (packet or stub; with ``by_place``, its place within its packet) against
    its exact chance 7/53 (4/53 for the stub): a CUSUM per card and cell for "twice as often"."""

    name = "card_packet"
    title = "Each card's packet"
    watches = (
        "which packet (or the stub) each card lands in, against 7/53 each (4/53 the stub); "
        "CUSUM per card and packet: twice as often"
    )
    advice = "take the shuffler out of play and call surveillance: a card is being steered"
    severity = "critical"
    count_size = DECK_CARDS * CELLS
    by_place = False

    def __init__(self) -> None:
        ps = [float(exact.cell_card_chance(k)) for k in range(CELLS)]
        qs = [alternative(p, 2.0) for p in ps]
        self.p = ps
        self.hit = [log(q / p) for q, p in zip(qs, ps, strict=True)]
        miss = [log((1 - q) / (1 - p)) for q, p in zip(qs, ps, strict=True)]
        super().__init__(miss * DECK_CARDS)

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        cell_of = r.place_of if self.by_place else r.packet_of
        indices = [c * CELLS + k for c, k in enumerate(cell_of)]
        counts = self.counts
        for j in indices:
            counts[j] += 1
        hit = self.hit
        return self.bank.add_all(indices, [hit[k] for k in cell_of], self.rounds, now)

    def label(self, i: int) -> str:
        labels = PLACE_LABELS if self.by_place else CELL_LABELS
        return f"{DECK[i // CELLS]} to {labels[i % CELLS]} too often"

    def cells(self, worst: int) -> list[Cell]:
        card = worst // CELLS
        labels = PLACE_LABELS if self.by_place else CELL_LABELS
        return [
            Cell(
                f"{DECK[card]} {labels[k]}", self.counts[card * CELLS + k], self.rounds * self.p[k]
            )
            for k in range(CELLS)
        ]


class CardPlace(CardCell):
    name = "card_place"
    title = "Each card's place in its packet"
    watches = (
        "which place 1–7 within its packet (or the stub) each card takes, against 7/53 each "
        "(4/53 the stub); CUSUM per card and place: twice as often"
    )
    by_place = True


class RankCell(CountingCheck):
    """How many of a rank's four cards land in each cell, against the hypergeometric law; the
    alternative tilts it by θ^m with θ chosen so each card goes there twice as often."""

    name = "rank_packet"
    title = "Each rank's packet"
    watches = (
        "how many of each rank's four cards land in each packet (or the stub), against the "
        "exact hypergeometric law; CUSUM per rank and packet: twice as many"
    )
    advice = (
        "take the shuffler out of play and call surveillance: a rank (e.g. the Aces) is being"
        " steered"
    )
    severity = "critical"
    ranks = 13
    count_size = 13 * CELLS
    by_seat = False
    cell_labels = CELL_LABELS

    def __init__(self) -> None:
        self.llr: list[list[float]] = []
        for k in range(CELLS):
            null = [float(x) for x in exact.hypergeometric(4, exact.CELL_SIZES[k])]
            theta = _tilt_for_mean(null, 2.0 * sum(m * p for m, p in enumerate(null)))
            z = sum(p * theta**m for m, p in enumerate(null))
            self.llr.append([m * log(theta) - log(z) for m in range(5)])
        self.mean = [4 * float(exact.cell_card_chance(k)) for k in range(CELLS)]
        super().__init__([self.llr[k % CELLS][0] for k in range(self.ranks * CELLS)])

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        hits = [0] * (self.ranks * CELLS)
        packet_of = r.seat_of if self.by_seat else r.packet_of
        for c in range(DECK_CARDS - 1):
            hits[(c >> 2) * CELLS + packet_of[c]] += 1
        indices = [j for j, m in enumerate(hits) if m]
        counts, llr = self.counts, self.llr
        for j in indices:
            counts[j] += hits[j]
        xs = [llr[j % CELLS][hits[j]] for j in indices]
        return self.bank.add_all(indices, xs, self.rounds, now)

    def label(self, i: int) -> str:
        rank = str(DECK[(i // CELLS) * 4])[0]
        return f"{rank}s to {self.cell_labels[i % CELLS]} too often"

    def cells(self, worst: int) -> list[Cell]:
        rank = worst // CELLS
        name = str(DECK[rank * 4])[0]
        return [
            Cell(
                f"{name}s {self.cell_labels[k]}",
                self.counts[rank * CELLS + k],
                self.rounds * self.mean[k],
            )
            for k in range(CELLS)
        ]


def _tilt_for_mean(null: Sequence[float], target: float) -> float:
    """θ ≥ 1 with Σ m p(m) θ^m / Σ p(m) θ^m = target (bisection: the tilted mean rises with θ)."""
    lo, hi = 1.0, 1.0
    while _tilted_mean(null, hi) < target:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if _tilted_mean(null, mid) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _tilted_mean(null: Sequence[float], theta: float) -> float:
    weights = [p * theta**m for m, p in enumerate(null)]
    return sum(m * w for m, w in enumerate(weights)) / sum(weights)


# --- c, d. repeated and weak shuffles --------------------------------------------------------


class BinnedCounts:
    """Counts in ``bin_labels`` bins of a statistic, observed beside its exact expectation (the
    panel's table), kept with the check's state."""

    bin_labels: tuple[str, ...] = ()
    observed: list[int]
    expected: list[float]

    def clear_counts(self) -> None:
        self.observed = [0] * len(self.bin_labels)
        self.expected = [0.0] * len(self.bin_labels)

    def counts_state(self) -> dict[str, Any]:
        return {"observed": list(self.observed), "expected": list(self.expected)}

    def load_counts(self, data: dict[str, Any]) -> None:
        self.observed = _ints(data, "observed", len(self.bin_labels))
        self.expected = _floats(data, "expected", len(self.bin_labels))


class TailCheck(BinnedCounts, Check):
    """One CUSUM whose round is "in the tail" or not: LR = (1 - ε) + ε · (share of comparisons in
    the tail) / P(tail), a mixture over the comparisons of the likelihood ratio of the null
    conditioned on its tail, so its mean under the null is exactly 1. ``bins`` tabulate the
    per-comparison statistic beside its exact expectation."""

    epsilon = 0.5

    def __init__(self) -> None:
        super().__init__([0.0])
        self.clear_counts()

    def step(
        self, in_tail: float, comparisons: int, tail: float, now: datetime
    ) -> tuple[int, float]:
        lr = (1.0 - self.epsilon) + self.epsilon * in_tail / comparisons / tail
        return 0, self.bank.add(0, log(lr), self.rounds, now)

    def cells(self, worst: int) -> list[Cell]:
        return [
            Cell(label, o, e)
            for label, o, e in zip(self.bin_labels, self.observed, self.expected, strict=True)
        ]


def _bin_chances(dist: Sequence[Fraction], edges: Sequence[int], offset: int = 0) -> list[float]:
    """P(X in each bin), bins [edges[i], edges[i+1]) over X = index + offset, the last open."""
    out = []
    for b, lo in enumerate(edges):
        hi = edges[b + 1] if b + 1 < len(edges) else offset + len(dist)
        out.append(float(sum(dist[max(0, lo - offset) : max(0, hi - offset)], Fraction(0))))
    return out


def _bin(x: int, edges: Sequence[int]) -> int:
    b = 0
    while b + 1 < len(edges) and x >= edges[b + 1]:
        b += 1
    return b


class RepeatOrder(TailCheck):
    name = "repeat_order"
    title = "Repeated shuffle order"
    watches = (
        "cards dealt at the same place as in each of the recent deals, against the exact law "
        "of matches between two orders; in the tail: 16 or more of 49"
    )
    advice = "take the shuffler out of play and call surveillance: it is repeating an order"
    severity = "critical"
    edges = (0, 1, 2, 3, 4, 5, 6, 16)
    bin_labels = ("0", "1", "2", "3", "4", "5", "6–15", "16+")
    least = 16

    def __init__(self) -> None:
        dist = exact.fixed_points()
        self.tail = float(exact.tail_at_least(dist, self.least))
        self.chances = _bin_chances(dist, self.edges)
        super().__init__()

    def applies(self, r: Round) -> bool:
        return bool(r.recent)

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        dealt = r.dealt
        in_tail = 0
        for earlier, _ in r.recent:
            x = sum(map(eq, dealt, earlier))
            in_tail += x >= self.least
            self.observed[_bin(x, self.edges)] += 1
        for b, p in enumerate(self.chances):
            self.expected[b] += p * len(r.recent)
        return self.step(in_tail, len(r.recent), self.tail, now)

    def label(self, i: int) -> str:
        return "a recent order dealt again"


class RepeatStub(TailCheck):
    name = "repeat_stub"
    title = "Repeated stub"
    watches = (
        "cards the stub shares with each recent stub, against the exact hypergeometric law; "
        "in the tail: the same four"
    )
    advice = "take the shuffler out of play and call surveillance: the stub repeats"
    severity = "critical"
    epsilon = 0.05
    bin_labels = ("0", "1", "2", "3", "4")

    def __init__(self) -> None:
        dist = exact.stub_overlap()
        self.tail = float(dist[4])
        self.chances = [float(p) for p in dist]
        super().__init__()

    def applies(self, r: Round) -> bool:
        return bool(r.recent)

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        stub = r.obs.stub
        in_tail = 0
        for _, earlier in r.recent:
            x = sum(1 for c in stub if c in earlier)
            in_tail += x == 4
            self.observed[x] += 1
        for b, p in enumerate(self.chances):
            self.expected[b] += p * len(r.recent)
        return self.step(in_tail, len(r.recent), self.tail, now)

    def label(self, i: int) -> str:
        return "a recent stub dealt again"


_COMMON = range(DEALT - 2 * exact.STUB_SIZE, DEALT + 1)  # cards dealt in both of two deals


class PairSurvival(TailCheck):
    name = "pair_survival"
    title = "Pairs surviving the shuffle"
    watches = (
        "cards that follow the same card as in the previous deal (among cards dealt both "
        "times), against the exact law of successions of a uniform permutation; in the tail: "
        "16 or more"
    )
    advice = "the shuffler is not randomising: take it out of play and have it serviced"
    severity = "critical"
    edges = (0, 1, 2, 3, 4, 5, 6, 16)
    bin_labels = ("0", "1", "2", "3", "4", "5", "6–15", "16+")
    least = 16

    def __init__(self) -> None:
        self.tails = {
            r: float(exact.tail_at_least(exact.successions(r), self.least)) for r in _COMMON
        }
        self.chances = {r: _bin_chances(exact.successions(r), self.edges) for r in _COMMON}
        super().__init__()

    def applies(self, r: Round) -> bool:
        return r.inverse is not None

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        ps = r.inverse or []
        x = sum(1 for a, b in pairwise(ps) if b == a + 1)
        self.observed[_bin(x, self.edges)] += 1
        for b, p in enumerate(self.chances[len(ps)]):
            self.expected[b] += p
        return self.step(x >= self.least, 1, self.tails[len(ps)], now)

    def label(self, i: int) -> str:
        return "the previous order survives in pairs"


class RisingSequences(TailCheck):
    name = "rising_sequences"
    title = "Rising sequences"
    watches = (
        "rising sequences of this deal relative to the previous deal's order, against the "
        "Eulerian numbers; in the tail: 8 or fewer (one riffle leaves 2)"
    )
    advice = (
        "the shuffler is not randomising (a riffle too few): take it out of play and have it "
        "serviced"
    )
    severity = "critical"
    edges = (1, 9, 21, 22, 23, 24, 25, 26, 27, 28)
    bin_labels = ("1–8", "9–20", "21", "22", "23", "24", "25", "26", "27", "28+")
    most = 8

    def __init__(self) -> None:
        self.tails = {
            r: float(exact.tail_at_most(exact.rising_sequences(r), self.most, 1)) for r in _COMMON
        }
        self.chances = {r: _bin_chances(exact.rising_sequences(r), self.edges, 1) for r in _COMMON}
        super().__init__()

    def applies(self, r: Round) -> bool:
        return r.inverse is not None

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        ps = r.inverse or []
        k = 1 + sum(1 for a, b in pairwise(ps) if b < a)
        self.observed[_bin(k, self.edges)] += 1
        for b, p in enumerate(self.chances[len(ps)]):
            self.expected[b] += p
        return self.step(k <= self.most, 1, self.tails[len(ps)], now)

    def label(self, i: int) -> str:
        return "too few rising sequences"


# --- e. the hands ----------------------------------------------------------------------------


class DealerRate(CountingCheck, ABC):
    """A Bernoulli event of the dealer's hand: CUSUMs for twice and for half its exact chance."""

    count_size = 2
    chance = 0.0

    def __init__(self) -> None:
        p = self.chance
        alts = (alternative(p, 2.0), p / 2.0)
        self.yes = [log(q / p) for q in alts]
        self.no = [log((1 - q) / (1 - p)) for q in alts]
        super().__init__([0.0, 0.0])

    @abstractmethod
    def event(self, r: Round) -> bool:
        """See the subclasses."""

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        hit = self.event(r)
        self.counts[0 if hit else 1] += 1
        inc = self.yes if hit else self.no
        a = self.bank.add(0, inc[0], self.rounds, now)
        b = self.bank.add(1, inc[1], self.rounds, now)
        return (0, a) if a >= b else (1, b)

    def label(self, i: int) -> str:
        return f"{self.title.lower()}: {'twice' if i == 0 else 'half'} the exact rate"

    def cells(self, worst: int) -> list[Cell]:
        n = self.rounds
        return [
            Cell("yes", self.counts[0], n * self.chance),
            Cell("no", self.counts[1], n * (1 - self.chance)),
        ]


class DealerTwoJacks(DealerRate):
    name = "dealer_two_jacks"
    title = "Dealer's two Jacks"
    watches = (
        "how often the dealer's seven cards hold two or more Jacks, against the exact "
        "12,307,232 / C(53,7)"
    )
    advice = "call surveillance: check the dealer and the shuffler for a steered deal"
    chance = float(exact.dealer_two_jacks())

    def event(self, r: Round) -> bool:
        return dealer_has_two_jacks(r.obs.packets[r.obs.positions.index(1)])


class DealerAceHigh(DealerRate):
    name = "dealer_ace_high"
    title = "Dealer's Ace-high pai gow"
    watches = (
        "how often the dealer's hand is Ace-high pai gow, against the exact 14,430,780 / C(53,7)"
    )
    advice = "call surveillance: check the dealer and the shuffler for a steered deal"
    chance = float(exact.ace_high())

    def event(self, r: Round) -> bool:
        return is_ace_high_pai_gow(r.dealer_key)


class PositionCategory(CountingCheck):
    name = "position_category"
    title = "Hand categories by position"
    watches = (
        "each position's seven-card category (high card … five aces) against the exact census"
        " of C(53,7) hands; CUSUM per position and category: twice as often"
    )
    advice = "call surveillance: one position is getting a kind of hand too often"
    count_size = PACKETS * CATEGORIES

    def __init__(self) -> None:
        self.p = [float(x) for x in exact.hand_categories()]
        qs = [alternative(p, 2.0) for p in self.p]
        self.hit = [log(q / p) for q, p in zip(qs, self.p, strict=True)]
        miss = [log((1 - q) / (1 - p)) for q, p in zip(qs, self.p, strict=True)]
        super().__init__(miss * PACKETS)

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        indices = [pos * CATEGORIES + c for pos, c in enumerate(r.categories)]
        for j in indices:
            self.counts[j] += 1
        hit = self.hit
        return self.bank.add_all(indices, [hit[c] for c in r.categories], self.rounds, now)

    def label(self, i: int) -> str:
        return (
            f"position {i // CATEGORIES + 1}: {CATEGORY_LABELS[Category(i % CATEGORIES)]} too often"
        )

    def cells(self, worst: int) -> list[Cell]:
        pos = worst // CATEGORIES
        return [
            Cell(
                f"position {pos + 1} {CATEGORY_LABELS[Category(c)]}",
                self.counts[pos * CATEGORIES + c],
                self.rounds * self.p[c],
            )
            for c in range(CATEGORIES)
        ]


class PositionStrength(Check):
    """A position's hand strength: the category's mid-distribution score u = F(c-) + p(c)/2
    (exact mean 1/2); the alternative tilts the category law by e^{λu} towards stronger hands."""

    name = "position_strength"
    title = "Hand strength by position"
    watches = (
        "each position's hand strength (the category's exact mid-rank score, mean 1/2) "
        "against the exact census; CUSUM per position: persistently stronger hands"
    )
    advice = "call surveillance: one position is getting better hands than chance"
    tilt = 1.0

    def __init__(self) -> None:
        p = [float(x) for x in exact.hand_categories()]
        below = 0.0
        self.score = []
        for pc in p:
            self.score.append(below + pc / 2.0)
            below += pc
        z = sum(pc * exp(self.tilt * u) for pc, u in zip(p, self.score, strict=True))
        self.llr = [self.tilt * u - log(z) for u in self.score]
        super().__init__([0.0] * PACKETS)
        self.clear_counts()

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        best, best_v = 0, -1.0
        for pos, c in enumerate(r.categories):
            self.sums[pos] += self.score[c]
            v = self.bank.add(pos, self.llr[c], self.rounds, now)
            if v > best_v:
                best, best_v = pos, v
        return best, best_v

    def label(self, i: int) -> str:
        return f"position {i + 1} gets stronger hands"

    def cells(self, worst: int) -> list[Cell]:
        return [
            Cell(f"position {pos + 1} score", s, self.rounds / 2.0)
            for pos, s in enumerate(self.sums)
        ]

    def clear_counts(self) -> None:
        self.sums = [0.0] * PACKETS

    def counts_state(self) -> dict[str, Any]:
        return {"sums": list(self.sums)}

    def load_counts(self, data: dict[str, Any]) -> None:
        self.sums = _floats(data, "sums", PACKETS)


CHECKS: tuple[Callable[[], Check], ...] = (
    RngNumber,
    DiceSum,
    DiceFace,
    CardCell,
    RankCell,
    CardPlace,
    RepeatOrder,
    RepeatStub,
    PairSurvival,
    RisingSequences,
    DealerTwoJacks,
    DealerAceHigh,
    PositionCategory,
    PositionStrength,
)
