"""This deal's order against an earlier deal's (docs/protection.md "Shuffles, not only faults"):
the cards dealt both times, listed in this deal's order as their ranks in the earlier order, and
the statistics the order tests read from that."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from operator import gt, lt, sub

from controller.protection.exact import DECK_CARDS, PACKET_SIZE


@dataclass(frozen=True, slots=True)
class OrderView:
    """This deal against an earlier one (``lag`` deals back)."""

    lag: int
    m: int  # common cards
    rising: int  # rising sequences of this deal relative to the earlier order (1 + descents)
    peaks: int  # interior peaks of the common cards' earlier ranks in this deal's order
    valleys: int  # interior valleys of the same
    ahead: int  # successions: a card followed by the card that followed it then
    behind: int  # a card followed by the card that preceded it then
    by_packet: list[int]  # each common card's earlier packet 0–6, in this deal's order
    place: list[int]  # for the common cards in the earlier order, each one's place now


def where_dealt(earlier: Sequence[int]) -> list[int]:
    """Each card's place 0–48 in an earlier deal (-1: its stub)."""
    where = [-1] * DECK_CARDS
    for i, c in enumerate(earlier):
        where[c] = i
    return where


def order_view(
    lag: int,
    earlier: Sequence[int],
    dealt: Sequence[int],
    stub: Sequence[int],
    where: list[int] | None = None,
) -> OrderView:
    """``earlier``: the 49 cards an earlier deal dealt, in order (``where``: its
    ``where_dealt``, if known); ``dealt`` and ``stub``: this deal's."""
    if where is None:
        where = where_dealt(earlier)
    idx = [where[c] for c in dealt]
    gone = [where[c] for c in stub if where[c] >= 0]
    if gone:
        gone.sort()
        idx = [i for i in idx if i >= 0]
        word = [i - bisect_left(gone, i) for i in idx]
    else:
        word = idx
    m = len(word)
    place = [0] * m
    for j, v in enumerate(word):
        place[v] = j
    descents = sum(map(gt, place, place[1:]))
    diffs = list(map(sub, word[1:], word))
    up = [d > 0 for d in diffs]
    peaks = sum(map(gt, up, up[1:]))  # up then down
    valleys = sum(map(lt, up, up[1:]))  # down then up
    by_packet = [i // PACKET_SIZE for i in idx]
    return OrderView(
        lag, m, 1 + descents, peaks, valleys, diffs.count(1), diffs.count(-1), by_packet, place
    )
