"""Every seven-card hand of the 53-card deck as weighted classes that the rules treat alike.

A hand is a rank multiset (the joker aside) and a suit for each card. Suits change a hand's
value only through a suit that holds enough cards for a flush: five, or four beside the joker
(docs/rules.md §2). Two suits cannot both do so with seven cards, so:

- **no flush suit**: every suit assignment of the multiset makes no flush, straight flush or
  seven-card flush, and the rules see ranks alone. One class; its weight is every assignment of
  the multiset less those with a flush suit.
- **flush suit** ``s`` holding exactly the ranks ``F``: the other cards, at most two, lie in the
  three other suits, either in one suit or in two. Up to relabelling the suits, (multiset, joker,
  ``F``, that pattern) is the hand's whole suit structure, so each such class is an exact
  isomorphism class of hands.

Each class carries one representative hand, which the analysis hands to the engine's own classifiers
(``hands.evaluate``, ``wagers.chan_chu_lines``), and the number of hands it stands for. The weights
add up to C(4·ranks + 1, 7): 154,143,080 for the full deck. Tests check the classes against every
suit assignment of sampled multisets and against every hand of a small deck."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import combinations
from math import comb, prod
from typing import Final, NamedTuple

from controller.game.cards import ACE, JOKER_CODE

ALL_RANKS: Final = tuple(range(2, ACE + 1))
HAND_SIZE: Final = 7

Multiset = tuple[tuple[int, int], ...]  # (rank, how many cards of it), ranks ascending


class HandClass(NamedTuple):
    """``cards``: one hand of the class (card codes); ``weight``: how many hands it stands for."""

    cards: tuple[int, ...]
    weight: int


def rank_multisets(ranks: Sequence[int], size: int) -> Iterator[Multiset]:
    """Every multiset of ``size`` cards' ranks from ``ranks`` (at most four of a rank)."""
    ordered = sorted(ranks)

    def extend(i: int, left: int, acc: list[tuple[int, int]]) -> Iterator[Multiset]:
        if left == 0:
            yield tuple(acc)
            return
        if i == len(ordered):
            return
        for n in range(min(4, left), -1, -1):
            if n:
                acc.append((ordered[i], n))
            yield from extend(i + 1, left - n, acc)
            if n:
                acc.pop()

    yield from extend(0, size, [])


def deck_size(ranks: Sequence[int]) -> int:
    """Cards in a deck of ``ranks`` in four suits plus the joker."""
    return 4 * len(ranks) + 1


def hand_count(ranks: Sequence[int] = ALL_RANKS) -> int:
    """How many seven-card hands that deck has: C(53, 7) = 154,143,080 for the full deck."""
    return comb(deck_size(ranks), HAND_SIZE)


def _code(rank: int, suit: int) -> int:
    return (rank - 2) * 4 + suit


def classes_of(multiset: Multiset, joker: bool) -> Iterator[HandClass]:
    """The classes of the hands with these natural ranks (and the joker if ``joker``)."""
    extra = (JOKER_CODE,) if joker else ()
    threshold = 4 if joker else 5  # a flush suit: five cards, or four beside the joker
    flush_hands = 0
    distinct = [rank for rank, _ in multiset]
    for size in range(threshold, len(distinct) + 1):
        for flush_ranks in combinations(distinct, size):
            in_flush = set(flush_ranks)
            left: list[int] = []  # the cards outside the flush suit, by rank
            for rank, n in multiset:
                left.extend([rank] * (n - 1 if rank in in_flush else n))
            base = tuple(_code(rank, 0) for rank in flush_ranks) + extra
            # Suit 0 is the flush suit (4 choices); the rest lie in suits 1–3.
            patterns: list[tuple[tuple[int, ...], int]]
            if not left:
                patterns = [((), 1)]
            elif len(left) == 1:
                patterns = [((_code(left[0], 1),), 3)]
            elif left[0] == left[1]:
                patterns = [((_code(left[0], 1), _code(left[1], 2)), 3)]
            else:
                patterns = [
                    ((_code(left[0], 1), _code(left[1], 1)), 3),  # one suit
                    ((_code(left[0], 1), _code(left[1], 2)), 6),  # two suits
                ]
            for rest, ways in patterns:
                flush_hands += 4 * ways
                yield HandClass(base + rest, 4 * ways)
    no_flush = prod(comb(4, n) for _, n in multiset) - flush_hands
    if no_flush:
        # Suits dealt round-robin along the ranks: copies of a rank get distinct suits and no
        # suit gets more than two cards, so the hand has no flush suit.
        ranks = [rank for rank, n in multiset for _ in range(n)]
        cards = tuple(_code(rank, i % 4) for i, rank in enumerate(ranks))
        yield HandClass(cards + extra, no_flush)


def multisets_with_joker(ranks: Sequence[int] = ALL_RANKS) -> list[tuple[Multiset, bool]]:
    """Every (natural ranks, joker?) of a seven-card hand: the units the enumeration splits."""
    items: list[tuple[Multiset, bool]] = []
    for joker in (False, True):
        items.extend((m, joker) for m in rank_multisets(ranks, HAND_SIZE - joker))
    return items


def hand_classes(ranks: Sequence[int] = ALL_RANKS) -> Iterator[HandClass]:
    """Every class of seven-card hands of the deck of ``ranks`` (four suits) and the joker."""
    for multiset, joker in multisets_with_joker(ranks):
        yield from classes_of(multiset, joker)
