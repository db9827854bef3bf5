"""The census: how many seven-card hands have each profile, by the engine's own classifiers.

A profile is everything a single seven-card hand decides for the side wagers: the Chan Chu lines
it contains (``wagers.chan_chu_lines``), its best five-card hand (``hands.evaluate``: category,
royal, Ace-high pai gow), whether it holds the joker, and how many natural Jacks it holds (which
decides what is left for a dealer's two Jacks). The census evaluates one representative hand per
class of ``hand_classes`` and adds up the class weights, in worker processes when asked to.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from controller.analysis.hand_classes import (
    ALL_RANKS,
    Multiset,
    classes_of,
    hand_count,
    multisets_with_joker,
)
from controller.analysis.progress import Progress
from controller.game.cards import JACK, JOKER_CODE
from controller.game.hands import Category, HandValue, evaluate, is_ace_high_pai_gow
from controller.game.wagers import chan_chu_lines

_JACK_CODES = frozenset(range((JACK - 2) * 4, (JACK - 2) * 4 + 4))


class Profile(NamedTuple):
    """What one seven-card hand is to the side wagers (see the module docstring)."""

    lines: frozenset[str]
    category: Category
    royal: bool
    ace_high: bool
    joker: bool
    jacks: int


def profile(cards: Sequence[int]) -> Profile:
    """The profile of seven cards, from the engine's classifiers."""
    value = HandValue(evaluate(cards))  # categories do not depend on the wheel's rank
    return Profile(
        chan_chu_lines(cards),
        value.category,
        value.is_royal,
        is_ace_high_pai_gow(value),
        JOKER_CODE in cards,
        sum(1 for c in cards if c in _JACK_CODES),
    )


@dataclass(frozen=True, slots=True)
class Census:
    """Hands per profile (``weights``), one hand of each profile (``examples``), and how the
    census was taken (deck ranks, classes evaluated, seconds)."""

    ranks: tuple[int, ...]
    weights: dict[Profile, int]
    examples: dict[Profile, tuple[int, ...]]
    classes: int
    seconds: float
    workers: int

    @property
    def total(self) -> int:
        return sum(self.weights.values())


_Chunk = list[tuple[Multiset, bool]]
_Partial = tuple[dict[Profile, int], dict[Profile, tuple[int, ...]], int]


def _census_chunk(chunk: _Chunk) -> _Partial:
    weights: dict[Profile, int] = {}
    examples: dict[Profile, tuple[int, ...]] = {}
    classes = 0
    for multiset, joker in chunk:
        for cards, weight in classes_of(multiset, joker):
            classes += 1
            p = profile(cards)
            if p in weights:
                weights[p] += weight
            else:
                weights[p] = weight
                examples[p] = cards
    return weights, examples, classes


def take_census(
    ranks: Sequence[int] = ALL_RANKS, *, workers: int = 1, progress: Progress | None = None
) -> Census:
    """Every hand of the deck of ``ranks`` (four suits) and the joker, by profile. The result
    does not depend on ``workers``: chunks are merged in order."""
    start = time.perf_counter()
    units = multisets_with_joker(ranks)
    size = max(1, len(units) // 64)
    chunks = [units[i : i + size] for i in range(0, len(units), size)]
    weights: dict[Profile, int] = {}
    examples: dict[Profile, tuple[int, ...]] = {}
    classes = 0

    def merge(part: _Partial) -> None:
        nonlocal classes
        for p, w in part[0].items():
            weights[p] = weights.get(p, 0) + w
        for p, cards in part[1].items():
            examples.setdefault(p, cards)
        classes += part[2]
        if progress is not None:
            progress.advance(1)

    if progress is not None:
        progress.start(len(chunks))
    for part in _parts(chunks, workers):
        merge(part)
    if progress is not None:
        progress.finish()
    census = Census(
        tuple(ranks), weights, examples, classes, time.perf_counter() - start, max(1, workers)
    )
    if census.total != hand_count(ranks):
        raise AssertionError(f"the census counts {census.total} hands, not {hand_count(ranks)}")
    return census


def _parts(chunks: list[_Chunk], workers: int) -> Iterator[_Partial]:
    """Each chunk's census, in order: here, or in ``workers`` processes."""
    if workers <= 1:
        yield from map(_census_chunk, chunks)
        return
    # forkserver, not fork: a fork of a process with threads (a test runner's, a server's) may
    # inherit a lock another thread held, and the pool never ends (seen under pytest-xdist).
    with multiprocessing.get_context("forkserver").Pool(workers) as pool:
        yield from pool.imap(_census_chunk, chunks)
        finish_pool(pool)


def finish_pool(pool: multiprocessing.pool.Pool) -> None:
    """Every task done: the workers are told to end and waited for. ``terminate()`` (what
    leaving the pool's ``with`` does) kills them with SIGTERM, and a process that inherited
    SIGTERM ignored then waits forever for workers that never die."""
    pool.close()
    pool.join()


_CACHE: dict[tuple[int, ...], Census] = {}


def full_census(*, workers: int = 1, progress: Progress | None = None) -> Census:
    """The census of the full 53-card deck, taken once per process."""
    census = _CACHE.get(ALL_RANKS)
    if census is None:
        census = _CACHE[ALL_RANKS] = take_census(ALL_RANKS, workers=workers, progress=progress)
    return census
