"""The exact null distributions of every protection test, computed (never simulated).

Each function returns probabilities as ``Fraction`` over the outcomes it names, so they sum to 1
exactly (tests/protection checks it); the tests turn them into floats once, at start.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from itertools import product
from math import comb, factorial

from controller.analysis.side_bets import dealer_jacks
from controller.protection.exact_hands import ACE_HIGH_HANDS, HAND_CATEGORY_COUNTS

DECK_CARDS = 53
PACKETS = 7
PACKET_SIZE = 7
DEALT = PACKETS * PACKET_SIZE
STUB_SIZE = DECK_CARDS - DEALT
CELL_SIZES = (PACKET_SIZE,) * PACKETS + (STUB_SIZE,)  # 7 packets, then the stub


def uniform(n: int) -> list[Fraction]:
    """n equally likely outcomes."""
    return [Fraction(1, n)] * n


def dice_sum(
    loaded_face: int | None = None, loaded_chance: Fraction = Fraction(1, 4)
) -> list[Fraction]:
    """P(sum of three dice = s) for s = 3..18 (index s - 3), by enumerating all 216 throws; with
    ``loaded_face``, the first die shows that face with ``loaded_chance`` and each other face
    with an equal share of the rest."""
    die = uniform(6)
    loaded = die
    if loaded_face is not None:
        other = (1 - loaded_chance) / 5
        loaded = [loaded_chance if f == loaded_face else other for f in range(1, 7)]
    out = [Fraction(0)] * 16
    for a, b, c in product(range(6), repeat=3):
        out[a + b + c] += loaded[a] * die[b] * die[c]
    return out


def cell_card_chance(cell: int) -> Fraction:
    """The chance a given card lands in ``cell`` (packet 0–6 or the stub, 7) of a uniform deal."""
    return Fraction(CELL_SIZES[cell], DECK_CARDS)


def hypergeometric(cards: int, cell_size: int) -> list[Fraction]:
    """P(m of ``cards`` given cards land in a cell of ``cell_size``) for m = 0..cards."""
    total = comb(DECK_CARDS, cell_size)
    rest = DECK_CARDS - cards
    return [Fraction(comb(cards, m) * comb(rest, cell_size - m), total) for m in range(cards + 1)]


@cache
def fixed_points(n: int = DECK_CARDS, m: int = DEALT) -> tuple[Fraction, ...]:
    """P(k of ``m`` given places hold the same card in two orders of ``n`` cards, one uniformly
    random) for k = 0..m, by inclusion–exclusion: C(m,k) Σ_j (-1)^j C(m-k,j) (n-k-j)! / n!."""
    nf = factorial(n)
    return tuple(
        Fraction(
            comb(m, k)
            * sum((-1) ** j * comb(m - k, j) * factorial(n - k - j) for j in range(m - k + 1)),
            nf,
        )
        for k in range(m + 1)
    )


@cache
def successions(r: int) -> tuple[Fraction, ...]:
    """P(k places i with p[i+1] = p[i] + 1) in a uniform permutation p of r, k = 0..r-1, by
    inclusion–exclusion: j given successions glue r items into r - j blocks."""
    rf = factorial(r)
    return tuple(
        Fraction(
            sum(
                (-1) ** (j - k) * comb(j, k) * comb(r - 1, j) * factorial(r - j)
                for j in range(k, r)
            ),
            rf,
        )
        for k in range(r)
    )


@cache
def rising_sequences(r: int) -> tuple[Fraction, ...]:
    """P(a uniform permutation of r has k rising sequences), k = 1..r (index k - 1): Eulerian
    numbers A(r, k - 1) / r!, by A(n, d) = (d + 1) A(n-1, d) + (n - d) A(n-1, d-1)."""
    row = [1]
    for n in range(2, r + 1):
        row = [
            (d + 1) * (row[d] if d < len(row) else 0) + (n - d) * (row[d - 1] if d else 0)
            for d in range(n)
        ]
    rf = factorial(r)
    return tuple(Fraction(a, rf) for a in row)


def stub_overlap() -> list[Fraction]:
    """P(two independent uniform stubs of four share k cards), k = 0..4."""
    return hypergeometric(STUB_SIZE, STUB_SIZE)


def hand_categories() -> list[Fraction]:
    """P(a seven-card hand's best five is category c), c = 0..9 (``hands.Category``)."""
    total = comb(DECK_CARDS, 7)
    return [Fraction(n, total) for n in HAND_CATEGORY_COUNTS]


def dealer_two_jacks() -> Fraction:
    """P(the dealer's seven cards hold two or more natural Jacks), from the analysis engine."""
    return dealer_jacks().probability


def ace_high() -> Fraction:
    """P(a seven-card hand is Ace-high pai gow)."""
    return Fraction(ACE_HIGH_HANDS, comb(DECK_CARDS, 7))


def tail_at_least(dist: tuple[Fraction, ...] | list[Fraction], k: int, offset: int = 0) -> Fraction:
    """P(X ≥ k) for ``dist[i]`` = P(X = i + offset)."""
    return sum(dist[max(0, k - offset) :], Fraction(0))


def tail_at_most(dist: tuple[Fraction, ...] | list[Fraction], k: int, offset: int = 0) -> Fraction:
    """P(X ≤ k) for ``dist[i]`` = P(X = i + offset)."""
    return sum(dist[: max(0, k - offset + 1)], Fraction(0))
