"""Exact seven-card counts the hand tests need, shipped as integers (computing them takes ~3 s).

``HAND_CATEGORY_COUNTS[c]`` is how many of the C(53,7) = 154,143,080 seven-card hands have
``Category(c)`` as their best five (``hands.evaluate``); ``ACE_HIGH_HANDS`` how many are Ace-high
pai gow (``hands.is_ace_high_pai_gow``). ``count_hands`` recomputes both from the analysis
engine's hand classes; ``python -m controller.protection.exact_hands`` prints them, and
tests/protection checks the shipped figures against it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from controller.analysis.hand_classes import ALL_RANKS, classes_of, multisets_with_joker
from controller.game.hands import evaluate, is_ace_high_pai_gow

HAND_CATEGORY_COUNTS: Final[tuple[int, ...]] = (
    24780420,
    64221960,
    35553816,
    7470676,
    11236028,
    6172088,
    4188528,
    307472,
    210964,
    1128,
)
ACE_HIGH_HANDS: Final = 14430780


def count_hands(
    ranks: Sequence[int] = ALL_RANKS, *, joker: bool | None = None
) -> tuple[list[int], int]:
    """Hands per category and Ace-high pai gow hands of the deck of ``ranks`` and the joker, by
    the engine's own evaluator over every hand class; ``joker`` limits the count to hands with
    (True) or without (False) the joker."""
    counts = [0] * len(HAND_CATEGORY_COUNTS)
    ace_high = 0
    for multiset, has_joker in multisets_with_joker(ranks):
        if joker is not None and has_joker != joker:
            continue
        for cards, weight in classes_of(multiset, has_joker):
            key = evaluate(cards)
            counts[key >> 20] += weight
            if is_ace_high_pai_gow(key):
                ace_high += weight
    return counts, ace_high


if __name__ == "__main__":
    found, aces = count_hands()
    print(f"HAND_CATEGORY_COUNTS = {tuple(found)}\nACE_HIGH_HANDS = {aces}")
