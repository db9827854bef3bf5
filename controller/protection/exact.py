"""The exact null distributions of every protection test, computed (never simulated).

Each function returns probabilities as ``Fraction`` over the outcomes it names, so they sum to 1
exactly (tests/protection checks it); the tests turn them into floats once, at start.
"""

from __future__ import annotations

from fractions import Fraction
from functools import cache
from itertools import product
from math import comb, factorial

from controller.game.wagers import two_jack_hands
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
    """P(the dealer's seven cards hold two or more natural Jacks): the hands the rules engine
    judges so, counted by how many Jacks they hold (``wagers.two_jack_hands``, which the
    analysis' ``side_bets.dealer_jacks`` counts with too)."""
    return Fraction(two_jack_hands(4, DECK_CARDS - 4), comb(DECK_CARDS, 7))


def ace_high() -> Fraction:
    """P(a seven-card hand is Ace-high pai gow)."""
    return Fraction(ACE_HIGH_HANDS, comb(DECK_CARDS, 7))


def tail_at_least(dist: tuple[Fraction, ...] | list[Fraction], k: int, offset: int = 0) -> Fraction:
    """P(X ≥ k) for ``dist[i]`` = P(X = i + offset)."""
    return sum(dist[max(0, k - offset) :], Fraction(0))


def tail_at_most(dist: tuple[Fraction, ...] | list[Fraction], k: int, offset: int = 0) -> Fraction:
    """P(X ≤ k) for ``dist[i]`` = P(X = i + offset)."""
    return sum(dist[: max(0, k - offset + 1)], Fraction(0))


# --- the shuffles that actually happen (docs/protection.md "Shuffles, not only faults") --------


@cache
def eulerian(r: int) -> tuple[int, ...]:
    """A(r, d): permutations of r with d descents, d = 0..r-1 (r ≥ 1)."""
    row = [1]
    for n in range(2, r + 1):
        row = [
            (d + 1) * (row[d] if d < len(row) else 0) + (n - d) * (row[d - 1] if d else 0)
            for d in range(n)
        ]
    return tuple(row)


def riffle_chance(m: int, a: int, r: int) -> Fraction:
    """P(an a-shuffle of m cards (GSR riffles: a = 2^k after k) is one given permutation with r
    rising sequences) = C(a + m - r, m) / a^m (Bayer–Diaconis 1992)."""
    return Fraction(comb(a + m - r, m), a**m)


@cache
def riffle_rising(m: int, a: int) -> tuple[Fraction, ...]:
    """P(an a-shuffle of m cards has r rising sequences), r = 1..m (index r - 1):
    A(m, r - 1) · C(a + m - r, m) / a^m."""
    eul = eulerian(m)
    return tuple(eul[r - 1] * riffle_chance(m, a, r) for r in range(1, m + 1))


@cache
def peak_counts(n: int) -> tuple[int, ...]:
    """W(n, k): permutations of n with k interior peaks (w[i-1] < w[i] > w[i+1]),
    k = 0..(n-1)//2, by W(n, k) = (2k + 2) W(n-1, k) + (n - 2k) W(n-1, k-1)."""
    row = [1]
    for size in range(2, n + 1):
        top = (size - 1) // 2
        row = [
            (2 * k + 2) * (row[k] if k < len(row) else 0)
            + (size - 2 * k) * (row[k - 1] if 0 < k <= len(row) else 0)
            for k in range(top + 1)
        ]
    return tuple(row)


def _poly_mul(p: list[int], q: list[int]) -> list[int]:
    out = [0] * (len(p) + len(q) - 1)
    for i, a in enumerate(p):
        if a:
            for j, b in enumerate(q):
                out[i + j] += a * b
    return out


@cache
def shelf_ways(m: int, shelves: int, peaks: int) -> int:
    """How many of the (2·shelves)^m shelf-and-side choices of a one-pass shelf shuffler
    (Diaconis–Fulman–Holmes 2013: each card in turn goes to a uniform shelf, on top or at the
    bottom of its pile; the piles are then stacked) give one given order of m cards with
    ``peaks`` interior peaks (as input ranks in output order). The output is a concatenation of
    ``shelves`` piles each decreasing then increasing; cutting the word there, each peak needs a
    cut beside it, each non-empty pile has two ways to split at its minimum:
    Σ_s N(s) 2^(s+1) C(shelves, s+1), N(x) = x^P (2 + x)^P (1 + x)^(m - 1 - 2P)."""
    n_poly = [0] * peaks + [1]
    for _ in range(peaks):
        n_poly = _poly_mul(n_poly, [2, 1])
    for _ in range(m - 1 - 2 * peaks):
        n_poly = _poly_mul(n_poly, [1, 1])
    return sum(n * 2 ** (s + 1) * comb(shelves, s + 1) for s, n in enumerate(n_poly))


def shelf_chance(m: int, shelves: int, peaks: int) -> Fraction:
    """P(a one-pass shelf shuffle of m cards is one given order with ``peaks`` peaks)."""
    return Fraction(shelf_ways(m, shelves, peaks), (2 * shelves) ** m)


@cache
def glued_successions(m: int, glue: Fraction) -> tuple[Fraction, ...]:
    """P(k successions), k = 0..m-1, when each of the m - 1 neighbouring pairs of the reference
    stays together with chance ``glue`` and the m - j blocks left are then shuffled uniformly:
    Σ_j C(m-1, j) glue^j (1-glue)^(m-1-j) · successions(m - j)[k - j]."""
    out = [Fraction(0)] * m
    for j in range(m):
        weight = comb(m - 1, j) * glue**j * (1 - glue) ** (m - 1 - j)
        for k, p in enumerate(successions(m - j)):
            out[j + k] += weight * p
    return tuple(out)


@cache
def halves_spread(sizes: tuple[int, ...]) -> tuple[Fraction, ...]:
    """P(T = t), t = 0..Σ n², for T = Σ_ℓ (2 k_ℓ - n_ℓ)² where k_ℓ of hand ℓ's n_ℓ cards fall
    in the first ⌈m/2⌉ of m = Σ n_ℓ places of a uniformly random order: (k_ℓ) is multivariate
    hypergeometric, P(k) = Π C(n_ℓ, k_ℓ) / C(m, ⌈m/2⌉), summed by a walk over the hands."""
    m = sum(sizes)
    first = (m + 1) // 2
    ways: dict[tuple[int, int], int] = {(0, 0): 1}
    for n in sizes:
        nxt: dict[tuple[int, int], int] = {}
        for (k_sum, t), w in ways.items():
            for k in range(n + 1):
                if k_sum + k > first:
                    break
                key = (k_sum + k, t + (2 * k - n) ** 2)
                nxt[key] = nxt.get(key, 0) + w * comb(n, k)
        ways = nxt
    top = sum(n * n for n in sizes)
    out = [0] * (top + 1)
    for (k_sum, t), w in ways.items():
        if k_sum == first:
            out[t] += w
    total = comb(m, first)
    return tuple(Fraction(c, total) for c in out)
