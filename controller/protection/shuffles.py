"""Tests against the shuffles that actually happen (docs/protection.md "Shuffles, not only
faults"): a few GSR riffles, a one-pass shelf shuffler, cards kept together, riffles of the order
the cards come back in — each against several reference orders (the previous deal, the deal
before it, the pickup order of either) and a bank of alternatives, every increment the log of an
exact likelihood ratio (or of an exact tilt of an exact null), so its mean under a fair shuffle
is exactly 1 given the past.

The reference orders: for an earlier deal D and this deal, the *common* cards are those dealt
in both (45–49; the stub's order is never known). ``OrderView`` lists them in this deal's order
as their ranks in D's order; under a fair shuffle that is a uniform permutation of the m common
cards whatever D was, so any law of permutations of m cards gives a ratio of mean exactly 1.
A shuffle that gives each card an independent label (the shelf shuffler's shelf and side)
restricts exactly to the same shuffle of the common cards; a riffle of the whole deck restricts
only nearly to a riffle of them (tests/protection/test_shuffles.py), which costs a little power,
never a false alarm.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from datetime import datetime
from fractions import Fraction
from functools import cache
from math import comb, exp, factorial, inf, log

from controller.protection import exact
from controller.protection.checks import BinnedCounts, Cell, Check, Round
from controller.protection.exact import PACKETS
from controller.protection.orders import OrderView

LAGS = (1, 2)  # the previous deal, and the one before it (two decks in rotation)
LAG_NAMES = {1: "the previous deal", 2: "the deal before the previous (two decks in rotation)"}
ORIENTS = ("", " reversed")
COMMON = range(exact.DEALT - 2 * exact.STUB_SIZE, exact.DEALT + 1)


class OrderCheck(BinnedCounts, Check):
    """A check on ``Round.orders``: CUSUMs in groups, one group per (lag, variant), each group
    a bank over ``alts`` alternatives; every CUSUM sees an increment each round its reference
    exists (no lazy steps)."""

    variants: tuple[str, ...] = ("",)
    alts: tuple[str, ...] = ()
    bin_labels: tuple[str, ...] = ()

    def __init__(self) -> None:
        super().__init__([0.0] * (len(LAGS) * len(self.variants) * len(self.alts)))
        self.clear_counts()
        self.views: dict[int, OrderView] = {}  # the latest view of each lag, for the evidence

    def index(self, lag: int, variant: int, alt: int) -> int:
        return ((lag - 1) * len(self.variants) + variant) * len(self.alts) + alt

    def split(self, i: int) -> tuple[int, int, int]:
        group, alt = divmod(i, len(self.alts))
        lag, variant = divmod(group, len(self.variants))
        return lag + 1, variant, alt

    def applies(self, r: Round) -> bool:
        return bool(r.orders)

    def update(self, r: Round, now: datetime) -> tuple[int, float]:
        indices: list[int] = []
        xs: list[float] = []
        size = len(self.alts)
        for view in r.orders:
            self.views[view.lag] = view
            for variant, inc in self.increments(view):
                base = self.index(view.lag, variant, 0)
                indices += range(base, base + size)
                xs += inc
        return self.bank.add_all(indices, xs, self.rounds, now)

    def evidence(self, i: int) -> str:
        lag, variant, _ = self.split(i)
        view = self.views.get(lag)
        return "" if view is None else self.describe(view, variant)

    def describe(self, view: OrderView, variant: int) -> str:
        """The latest observation behind a variant's CUSUMs, for a person."""
        return ""

    @abstractmethod
    def increments(self, view: OrderView) -> list[tuple[int, Sequence[float]]]:
        """(variant, the LLR of each alternative) for this view; counts the panel's bins."""

    def reference(self, i: int) -> str:
        lag, variant, _ = self.split(i)
        return f"{LAG_NAMES[lag]}{self.variants[variant]}"

    def alternative(self, i: int) -> str:
        return self.alts[self.split(i)[2]]

    def label(self, i: int) -> str:
        return f"{self.alternative(i)} of {self.reference(i)}"

    def tally(self, value: int, chances: Sequence[float], edges: Sequence[int]) -> None:
        b = 0
        while b + 1 < len(edges) and value >= edges[b + 1]:
            b += 1
        self.observed[b] += 1
        for j, p in enumerate(chances):
            self.expected[j] += p

    def cells(self, worst: int) -> list[Cell]:
        return [
            Cell(label, o, e)
            for label, o, e in zip(self.bin_labels, self.observed, self.expected, strict=True)
        ]


def _by_statistic(table: list[tuple[float, ...]]) -> tuple[tuple[float, ...], ...]:
    """[alternative][statistic] → [statistic][alternative] (a round reads one statistic)."""
    return tuple(zip(*table, strict=True))


def _bins(dist: Sequence[Fraction], edges: Sequence[int], offset: int) -> list[float]:
    out = []
    for b, lo in enumerate(edges):
        hi = edges[b + 1] if b + 1 < len(edges) else offset + len(dist)
        out.append(float(sum(dist[max(0, lo - offset) : max(0, hi - offset)], Fraction(0))))
    return out


# --- riffles -----------------------------------------------------------------------------------

RIFFLES = tuple(range(1, 11))


@cache
def riffle_llr(m: int) -> tuple[tuple[float, ...], ...]:
    """[r - 1][k - 1]: log of m! · C(2^k + m - r, m) / 2^(km), the exact likelihood ratio of a
    permutation of m with r rising sequences after k GSR riffles against a uniform one."""
    mf = factorial(m)
    out = []
    for k in RIFFLES:
        a = 2**k
        row = []
        for r in range(1, m + 1):
            ways = comb(a + m - r, m)
            row.append(log(mf * ways) - m * log(a) if ways else -inf)
        out.append(tuple(row))
    return _by_statistic(out)


class Riffles(OrderCheck):
    name = "riffles"
    title = "Too few riffles"
    watches = (
        "rising sequences of this deal relative to the previous deal and the one before it "
        "(either way round), against the exact law of k GSR riffles, k = 1–10 "
        "(Bayer–Diaconis: C(2^k + m − r, m) / 2^km), over the Eulerian null"
    )
    advice = (
        "the shuffler is not randomising (too few riffles): take it out of play and have it "
        "serviced"
    )
    severity = "critical"
    variants = ORIENTS
    alts = tuple(f"{k} riffle{'s' if k > 1 else ''}" for k in RIFFLES)
    edges = (1, 17, 21, 23, 25, 27, 29, 33)
    bin_labels = ("1–16", "17–20", "21–22", "23–24", "25–26", "27–28", "29–32", "33+")

    def __init__(self) -> None:
        self.chances = {m: _bins(exact.rising_sequences(m), self.edges, 1) for m in COMMON if m > 2}
        super().__init__()

    def increments(self, view: OrderView) -> list[tuple[int, Sequence[float]]]:
        m, r = view.m, view.rising
        table = riffle_llr(m)
        if view.lag == 1:
            self.tally(r, self.chances.get(m, []), self.edges)
        return [(0, table[r - 1]), (1, table[m - r])]

    def describe(self, view: OrderView, variant: int) -> str:
        m = view.m
        if variant == 0:
            return f"{view.rising} rising sequences among {m} cards (fair: {(m + 1) / 2:.0f} ± 2)"
        return f"{m + 1 - view.rising} rising sequences among {m} cards against the order reversed"


# --- the shelf shuffler ------------------------------------------------------------------------

SHELVES = (2, 4, 6, 8, 10, 12, 15, 20, 30, 50)


@cache
def shelf_llr(m: int) -> tuple[tuple[float, ...], ...]:
    """[peaks][shelves]: log of m! · ways / (2·shelves)^m (``exact.shelf_ways``)."""
    mf = factorial(m)
    out = []
    for s in SHELVES:
        row = []
        for p in range((m - 1) // 2 + 1):
            ways = exact.shelf_ways(m, s, p)
            row.append(log(mf * ways) - m * log(2 * s) if ways else -inf)
        out.append(tuple(row))
    return _by_statistic(out)


class ShelfShuffler(OrderCheck):
    name = "shelf_shuffler"
    title = "One-pass shelf shuffler"
    watches = (
        "peaks of this deal's order relative to the previous deal and the one before it "
        "(valleys: the order reversed), against the exact law of a one-pass shelf shuffler "
        "with 2–50 shelves (Diaconis–Fulman–Holmes), over the exact null"
    )
    advice = (
        "the shelf shuffler makes one pass only: take it out of play and have it serviced "
        "(or set it to two passes)"
    )
    severity = "critical"
    variants = ("", " (valleys: reversed)")
    alts = tuple(f"one pass of {s} shelves" for s in SHELVES)
    edges = (0, 9, 12, 14, 16, 18, 21)
    bin_labels = ("0–8", "9–11", "12–13", "14–15", "16–17", "18–20", "21+")

    def __init__(self) -> None:
        self.chances: dict[int, list[float]] = {}
        for m in COMMON:
            counts = exact.peak_counts(m)
            total = factorial(m)
            dist = [Fraction(c, total) for c in counts]
            self.chances[m] = _bins(dist, self.edges, 0)
        super().__init__()

    def increments(self, view: OrderView) -> list[tuple[int, Sequence[float]]]:
        table = shelf_llr(view.m)
        if view.lag == 1:
            self.tally(view.peaks, self.chances.get(view.m, []), self.edges)
        return [(0, table[view.peaks]), (1, table[view.valleys])]

    def describe(self, view: OrderView, variant: int) -> str:
        what, n = ("peaks", view.peaks) if variant == 0 else ("valleys", view.valleys)
        return f"{n} {what} among {view.m} cards (fair: about {(view.m - 2) / 3:.0f})"


# --- cards kept together -----------------------------------------------------------------------

GLUES = (Fraction(1, 50), Fraction(1, 20), Fraction(1, 10), Fraction(3, 10), Fraction(6, 10))


@cache
def glue_llr(m: int) -> tuple[tuple[float, ...], ...]:
    """[k][glue]: log of the chance of k successions when neighbours stay together with chance
    ``glue`` over its exact null (``exact.glued_successions`` over ``exact.successions``)."""
    null = [float(p) for p in exact.successions(m)]
    out = []
    for g in GLUES:
        alt = exact.glued_successions(m, g)
        out.append(
            tuple(
                log(float(q) / p) if q > 0 and p > 0 else -inf
                for q, p in zip(alt, null, strict=True)
            )
        )
    return _by_statistic(out)


class KeptTogether(OrderCheck):
    name = "kept_together"
    title = "Cards kept together"
    watches = (
        "successions (a card followed by the card that followed it — or, reversed, preceded "
        "it — in the previous deal or the one before), against the exact law of cards kept "
        "together with chance 2–60 % (the rest shuffled), over the exact null"
    )
    advice = (
        "the shuffler keeps neighbouring cards together: take it out of play and have it serviced"
    )
    severity = "critical"
    variants = ("", " reversed")
    alts = tuple(f"neighbours kept together {float(g):.0%} of the time" for g in GLUES)
    edges = (0, 1, 2, 3, 4, 6, 10)
    bin_labels = ("0", "1", "2", "3", "4–5", "6–9", "10+")

    def __init__(self) -> None:
        self.chances = {m: _bins(exact.successions(m), self.edges, 0) for m in COMMON}
        super().__init__()

    def increments(self, view: OrderView) -> list[tuple[int, Sequence[float]]]:
        table = glue_llr(view.m)
        if view.lag == 1:
            self.tally(view.ahead, self.chances.get(view.m, []), self.edges)
        return [(0, table[view.ahead]), (1, table[view.behind])]

    def describe(self, view: OrderView, variant: int) -> str:
        if variant == 0:
            return f"{view.ahead} cards followed by the card that followed them then (fair: ~1)"
        return f"{view.behind} cards followed by the card that preceded them then (fair: ~1)"


# --- riffles of the pickup order ---------------------------------------------------------------

SPREADS = (0.01, 0.02, 0.04, 0.08, 0.15)


@cache
def pickup_llr(sizes: tuple[int, ...]) -> tuple[tuple[float, ...], ...]:
    """[t][tilt]: λt - log E0[e^(λT)], T the hands' spread over the halves of this deal under its
    exact null (``exact.halves_spread``): the log of an exact tilt of the exact law."""
    null = [float(p) for p in exact.halves_spread(sizes)]
    out = []
    for lam in SPREADS:
        z = sum(p * exp(lam * t) for t, p in enumerate(null))
        out.append(tuple(lam * t - log(z) for t in range(len(null))))
    return _by_statistic(out)


def halves(labels: list[int]) -> tuple[tuple[int, ...], int]:
    """The sizes of the earlier hands among the common cards, and T = Σ (2 k - n)² for k of a
    hand's n cards in the first ⌈m/2⌉ places of this deal."""
    early = labels[: (len(labels) + 1) // 2]
    sizes = [labels.count(x) for x in range(PACKETS)]
    t = sum((2 * early.count(x) - n) ** 2 for x, n in enumerate(sizes))
    return tuple(sorted(sizes)), t


@cache
def _spread_summary(sizes: tuple[int, ...], edges: tuple[int, ...]) -> tuple[list[float], float]:
    null = exact.halves_spread(sizes)
    return _bins(null, edges, 0), float(sum(i * p for i, p in enumerate(null)))


class PickupOrder(OrderCheck):
    """A few riffles of the order the cards come back in (the hands picked up one after another,
    each hand's cards in whatever order its player left them): the riffle keeps each packet's
    order, so the cards of a hand split between two packets sit at the start of one and the end
    of the other — early and late in the deal — and how a hand's cards fall over the two halves
    of the deal spreads more than by chance. The statistic depends only on which cards were
    together in a hand, not on the order the hands or their cards were picked up in."""

    name = "pickup_order"
    title = "Riffles of the pickup order"
    watches = (
        "how each earlier hand's cards spread over the two halves of this deal (T = Σ (2k − n)²,"
        " in any pickup order and any order within a hand), against its exact multivariate "
        "hypergeometric law; CUSUMs of exact tilts towards more spread"
    )
    advice = (
        "the shuffler barely mixes the cards as they are picked up: take it out of play and have"
        " it serviced"
    )
    severity = "critical"
    alts = tuple(f"riffles (hands split over both halves; tilt {lam:g})" for lam in SPREADS)
    edges = (0, 20, 30, 40, 50, 60, 80)
    bin_labels = ("0–19", "20–29", "30–39", "40–49", "50–59", "60–79", "80+")

    def reference(self, i: int) -> str:
        lag, _, _ = self.split(i)
        return f"the hands of {LAG_NAMES[lag]} as picked up (any order)"

    def increments(self, view: OrderView) -> list[tuple[int, Sequence[float]]]:
        sizes, t = halves(view.by_packet)
        if view.lag == 1:
            self.tally(t, _spread_summary(sizes, self.edges)[0], self.edges)
        return [(0, pickup_llr(sizes)[t])]

    def describe(self, view: OrderView, variant: int) -> str:
        sizes, t = halves(view.by_packet)
        mean = _spread_summary(sizes, self.edges)[1]
        return f"the hands' spread over the deal's halves T = {t} (fair: about {mean:.0f})"
