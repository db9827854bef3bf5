"""Proving a way over every hand: exactly one rule sets each of the 154,143,080 seven-card hands
of the 53-card deck, and no setting fouls (``paigow-table house-way check``).

The proof is exhaustive by an exact reduction, not a sample. A way's conditions read the rank
groups (the joker grouped as an Ace, and marked), and its values (class, fronts, backs, every
split's back in the straight-or-flush search) depend on the ranks alone, except for flushes.

- A hand that cannot make a flush (no suit with five cards, the joker counting for any suit) is
  set, value for value, like every hand of its *rank pattern* (controller/game/house_way_cache.py
  explains why). There are 67,600 patterns; each stands for the hands of that pattern that
  cannot make a flush: all suit assignments (the product of C(4, n) over its ranks) less the
  flush-capable ones counted below.
- A hand that can make a flush has exactly one suit that can (five cards of a suit need five of
  the seven, or four and the joker). Its values depend on the ranks in that suit, the multiset
  of the other cards' ranks and the joker: the other suits can hold no flush, so which of the
  three each other card has changes nothing. Such a *suit class* stands for 4 (the flush suit)
  times the product of C(3, m) over the other ranks (m cards of a rank among three suits) hands.

The multiplicities add up to C(53, 7) (checked on every run). Each pattern and class is set once
by the engine, in worker processes; a failure is counted with its multiplicity and an example
hand.
"""

from __future__ import annotations

import functools
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from itertools import combinations, combinations_with_replacement
from math import comb, prod
from typing import Any, Final, Protocol

from controller.game.cards import ACE, DECK, JOKER_CODE, format_cards
from controller.game.hands import front_key, is_foul_keys
from controller.game.house_way_cache import pattern_hands
from controller.game.setting import DEFAULT_RULES, Rules
from controller.game.way.engine import Way, WayError, parse

ALL_HANDS: Final = comb(53, 7)
#: A hand class: seven card codes in ascending order, and how many hands it stands for.
HandClass = tuple[tuple[int, ...], int]
FAILURE_KINDS: Final = ("hole", "overlap", "no-front", "foul")


class Progress(Protocol):
    def start(self, total: int) -> None: ...
    def advance(self, n: int = 1) -> None: ...
    def finish(self) -> None: ...


def _flush_classes() -> Iterator[HandClass]:
    """Every suit class of the hands that can make a flush (the flush suit clubs, the others'
    suits going round diamonds, hearts, spades), with its multiplicity."""
    ranks = range(2, ACE + 1)
    for joker in (0, 1):
        for k in range(5 - joker, 8 - joker):
            rest = 7 - k - joker
            for flush in combinations(ranks, k):
                clubs = [(r - 2) * 4 for r in flush]
                for others in combinations_with_replacement(ranks, rest):
                    counts = Counter(others)
                    if any(n > 3 for n in counts.values()):
                        continue
                    hand = list(clubs)
                    for r, n in counts.items():
                        hand.extend((r - 2) * 4 + 1 + s for s in range(n))
                    if joker:
                        hand.append(JOKER_CODE)
                    weight = 4 * prod(comb(3, n) for n in counts.values())
                    yield tuple(sorted(hand)), weight


def _pattern_of(cards: Sequence[int]) -> tuple[int, ...]:
    counts = [0] * 14
    for c in cards:
        counts[13 if c == JOKER_CODE else c >> 2] += 1
    return tuple(counts)


def hand_classes() -> list[HandClass]:
    """Every hand of the 53-card deck, by exact classes whose multiplicities add up to
    C(53, 7): the rank patterns (their hands that cannot make a flush) and the suit classes of
    the hands that can. Classes that stand for no hand are left out."""
    return list(_hand_classes())


@functools.cache
def _hand_classes() -> tuple[HandClass, ...]:
    flush = list(_flush_classes())
    flush_by_pattern: Counter[tuple[int, ...]] = Counter()
    for cards, weight in flush:
        flush_by_pattern[_pattern_of(cards)] += weight
    out: list[HandClass] = []
    for hand in pattern_hands():
        pattern = _pattern_of(hand)
        weight = prod(comb(4, n) for n in pattern[:13]) - flush_by_pattern[pattern]
        if weight:
            out.append((tuple(hand), weight))
    out.extend(flush)
    total = sum(w for _, w in out)
    if total != ALL_HANDS:
        raise AssertionError(f"the hand classes stand for {total:,} hands, not {ALL_HANDS:,}")
    return tuple(out)


# --- running over the classes in worker processes ---------------------------------------------

_WORKER_WAYS: list[Way] = []


def _init(texts: Sequence[tuple[str, str]]) -> None:
    _WORKER_WAYS[:] = [parse(text, where) for text, where in texts]


def _chunks(items: Sequence[HandClass], n: int) -> list[Sequence[HandClass]]:
    size = max(1, -(-len(items) // n))
    return [items[i : i + size] for i in range(0, len(items), size)]


def _run_classes(
    work: Callable[[Sequence[HandClass], bool], dict[str, Any]],
    ways: Sequence[Way],
    rules: Rules,
    workers: int | None,
    progress: Progress | None,
) -> list[dict[str, Any]]:
    classes = hand_classes()
    # Interleave so every chunk gets its share of the slow flush classes.
    classes = classes[0::2] + classes[1::2]
    chunks = _chunks(classes, 200)
    if progress is not None:
        progress.start(ALL_HANDS)
    texts = [(w.text.raw, w.text.path or w.name) for w in ways]
    n = workers or min(2, os.cpu_count() or 1)
    results: list[dict[str, Any]] = []
    if n <= 1:
        _init(texts)
        for chunk in chunks:
            results.append(work(chunk, rules.wheel_high))
            if progress is not None:
                progress.advance(sum(w for _, w in chunk))
    else:
        with ProcessPoolExecutor(n, initializer=_init, initargs=(texts,)) as pool:
            futures = [(pool.submit(work, chunk, rules.wheel_high), chunk) for chunk in chunks]
            for future, chunk in futures:
                results.append(future.result())
                if progress is not None:
                    progress.advance(sum(w for _, w in chunk))
    if progress is not None:
        progress.finish()
    return results


# --- the check ----------------------------------------------------------------------------------


@dataclass
class Failure:
    """Hands a way cannot set, of one kind and rule(s): how many, and an example."""

    kind: str
    detail: str
    hands: int
    example: str

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "detail": self.detail,
            "hands": self.hands,
            "example": self.example,
        }


@dataclass
class CheckReport:
    """The result of checking a way over every hand."""

    name: str
    digest: str
    hands: int
    classes: int
    seconds: float
    by_rule: dict[str, int]
    failures: list[Failure] = field(default_factory=list)
    never_used: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures and self.hands == ALL_HANDS

    def to_dict(self) -> dict[str, object]:
        return {
            "way": self.name,
            "digest": self.digest,
            "passed": self.passed,
            "hands": self.hands,
            "classes": self.classes,
            "seconds": round(self.seconds, 1),
            "failures": [f.to_dict() for f in self.failures],
            "hands_by_rule": self.by_rule,
            "rules_never_used": self.never_used,
        }


_WHEEL_RANKS: Final = frozenset({ACE, 2, 3, 4, 5})


def may_make_a_wheel(cards: Sequence[int]) -> bool:
    """Whether some five of the cards can be A-2-3-4-5 (the joker filling a rank): only such a
    hand can be set otherwise under the other wheel rule (docs/rules.md §3)."""
    ranks = {(c >> 2) + 2 for c in cards if c != JOKER_CODE}
    return len(ranks & _WHEEL_RANKS) + (JOKER_CODE in cards) >= 5


def _check_chunk(chunk: Sequence[HandClass], wheel_high: bool) -> dict[str, Any]:
    way = _WORKER_WAYS[0]
    by_rule: Counter[str] = Counter()
    failures: dict[tuple[str, str], list[Any]] = {}
    classes = 0
    other = " (under the other wheel rule, " + (
        "the wheel lowest)" if wheel_high else "the wheel second highest)"
    )
    for cards, weight in chunk:
        classes += 1
        wheels = (wheel_high, not wheel_high) if may_make_a_wheel(cards) else (wheel_high,)
        for wheel in wheels:
            note = "" if wheel == wheel_high else other
            try:
                rule, front, back_value, _ = way.decide(cards, wheel)
            except WayError as exc:
                key = (exc.kind, str(exc) + note)
            else:
                if wheel == wheel_high:
                    by_rule[rule] += weight
                if not is_foul_keys(front_key(front[0], front[1]), back_value):
                    continue
                key = ("foul", f"rule {rule}: the front it sets beats the back (a foul){note}")
            entry = failures.setdefault(key, [0, format_cards(cards)])
            entry[0] = int(entry[0]) + weight
    return {"by_rule": by_rule, "failures": failures, "classes": classes}


def check_way(
    way: Way,
    rules: Rules = DEFAULT_RULES,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> CheckReport:
    """Set every hand of the 53-card deck by ``way`` (exactly, by hand classes) and report the
    hands no rule sets, the overlaps its priorities leave open, the rules whose front the hand
    lacks and the fouls, each with how many hands and an example. Under ``rules``' wheel rule
    for every hand, and under the other for every hand that can make a wheel (no other hand
    depends on it), so a way that passes passes under both."""
    started = time.perf_counter()
    results = _run_classes(_check_chunk, [way], rules, workers, progress)
    by_rule: Counter[str] = Counter()
    merged: dict[tuple[str, str], list[Any]] = {}
    classes = 0
    for r in results:
        by_rule.update(r["by_rule"])
        classes += int(r["classes"])
        for key, (n, example) in r["failures"].items():
            entry = merged.setdefault(key, [0, example])
            entry[0] = int(entry[0]) + n
    failures = [
        Failure(kind, detail, int(n), str(example))
        for (kind, detail), (n, example) in sorted(
            merged.items(), key=lambda kv: (FAILURE_KINDS.index(kv[0][0]), kv[0][1])
        )
    ]
    used = {part for rule in by_rule for part in rule.split("/")}
    hands = sum(by_rule.values()) + sum(
        f.hands for f in failures if f.kind != "foul" and "other wheel rule" not in f.detail
    )
    return CheckReport(
        way.name,
        way.digest,
        hands,
        classes,
        time.perf_counter() - started,
        dict(sorted(by_rule.items(), key=lambda kv: -kv[1])),
        failures,
        [rid for rid in way.rule_ids if rid not in used],
    )


def example_cards(text: str) -> list[int]:
    """Card codes of an example hand as the reports write it."""
    by_text = {str(c): int(c) for c in DECK}
    return [by_text[t] for t in text.split()]


def representative(cards: Sequence[int]) -> tuple[int, ...]:
    """The class representative :func:`hand_classes` holds for a hand (tests use it to show a
    hand is set, value for value, like its class)."""
    naturals = [c for c in cards if c != JOKER_CODE]
    joker = len(naturals) < len(cards)
    suit_counts = Counter(c & 3 for c in naturals)
    suit, most = max(suit_counts.items(), key=lambda kv: kv[1])
    out: list[int] = []
    if most + joker >= 5:
        out = [c & ~3 for c in naturals if c & 3 == suit]
        others = Counter(c >> 2 for c in naturals if c & 3 != suit)
        for r, n in others.items():
            out.extend(r * 4 + 1 + s for s in range(n))
    else:
        ranks = Counter(c >> 2 for c in naturals)
        for r in sorted(ranks):
            base = len(out)
            out.extend(r * 4 + (base + k) % 4 for k in range(ranks[r]))
    if joker:
        out.append(JOKER_CODE)
    return tuple(sorted(out))
