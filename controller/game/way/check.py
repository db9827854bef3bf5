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
import multiprocessing
import os
import time
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
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


# --- every class decided once per way, in worker processes -------------------------------------

#: What a way does with one hand class: (rule id, front codes, back key), or, when it cannot set
#: it, (kind, message) of the WayError (a hole, an overlap, a missing front).
Decision = tuple[str, tuple[int, int], int] | tuple[str, str]


@dataclass(frozen=True)
class Decisions:
    """A way's decision for every hand class (:func:`hand_classes` order) under one wheel rule,
    and under the other for the classes that can make a wheel (no other hand depends on it)."""

    main: tuple[Decision, ...]
    other: dict[int, Decision]


_WORKER_WAY: list[Way] = []
#: Decisions by (way digest, wheel rule): a check and a diff of the same way in one process set
#: every class once (the test suite checks and diffs the shipped ways; issue 33). Bounded.
_DECIDED: OrderedDict[tuple[str, bool], Decisions] = OrderedDict()
_DECIDED_MAX: Final = 4


def forget_decisions() -> None:
    """Empty the cache of decisions (a benchmark timing the engine starts from nothing)."""
    _DECIDED.clear()


def _init(text: str, where: str) -> None:
    _WORKER_WAY[:] = [parse(text, where)]


def _decide(way: Way, cards: Sequence[int], wheel_high: bool) -> Decision:
    try:
        rule, front, back_value, _ = way.decide(cards, wheel_high)
    except WayError as exc:
        return exc.kind, str(exc)
    return rule, front, back_value


def _decide_chunk(
    chunk: Sequence[tuple[int, tuple[int, ...]]], wheel_high: bool
) -> list[tuple[int, Decision, Decision | None]]:
    way = _WORKER_WAY[0]
    return [
        (
            i,
            _decide(way, cards, wheel_high),
            _decide(way, cards, not wheel_high) if may_make_a_wheel(cards) else None,
        )
        for i, cards in chunk
    ]


def _chunks(items: Sequence[Any], n: int) -> list[Sequence[Any]]:
    size = max(1, -(-len(items) // n))
    return [items[i : i + size] for i in range(0, len(items), size)]


def _compute(
    way: Way, wheel_high: bool, workers: int | None, progress: Progress | None
) -> Decisions:
    classes = hand_classes()
    indexed = [(i, cards) for i, (cards, _) in enumerate(classes)]
    # Interleave so every chunk gets its share of the slow flush classes.
    chunks = _chunks(indexed[0::2] + indexed[1::2], 200)
    main: list[Decision | None] = [None] * len(classes)
    other: dict[int, Decision] = {}

    def take(done: list[tuple[int, Decision, Decision | None]]) -> None:
        for i, decision, under_other in done:
            main[i] = decision
            if under_other is not None:
                other[i] = under_other
        if progress is not None:
            progress.advance(sum(classes[i][1] for i, _, _ in done))

    texts = (way.text.raw, way.text.path or way.name)
    n = workers or min(2, os.cpu_count() or 1)
    if n <= 1:
        _init(*texts)
        for chunk in chunks:
            take(_decide_chunk(chunk, wheel_high))
    else:
        # forkserver, not fork: a fork of a process with threads (a test runner's) may inherit
        # a lock another thread held and never finish.
        context = multiprocessing.get_context("forkserver")
        with ProcessPoolExecutor(n, mp_context=context, initializer=_init, initargs=texts) as pool:
            for future in [pool.submit(_decide_chunk, chunk, wheel_high) for chunk in chunks]:
                take(future.result())
    return Decisions(tuple(d for d in main if d is not None), other)


def decisions(
    way: Way,
    rules: Rules = DEFAULT_RULES,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> Decisions:
    """Every hand class decided by ``way`` under ``rules``' wheel rule (and the other, where it
    matters), once per way digest in this process."""
    key = (way.digest, rules.wheel_high)
    if progress is not None:
        progress.start(ALL_HANDS)
    found = _DECIDED.get(key)
    if found is None:
        found = _compute(way, rules.wheel_high, workers, progress)
        if len(found.main) != len(hand_classes()):
            raise AssertionError("a hand class was not decided")
        _DECIDED[key] = found
        while len(_DECIDED) > _DECIDED_MAX:
            _DECIDED.popitem(last=False)
    elif progress is not None:
        progress.advance(ALL_HANDS)
    _DECIDED.move_to_end(key)
    if progress is not None:
        progress.finish()
    return found


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


def _failure_key(decision: Decision, note: str) -> tuple[str, str] | None:
    """The failure a decision is, or None: a WayError's kind and message, or a foul."""
    if len(decision) == 2:
        return str(decision[0]), str(decision[1]) + note
    rule, front, back_value = decision
    if not is_foul_keys(front_key(front[0], front[1]), back_value):
        return None
    return "foul", f"rule {rule}: the front it sets beats the back (a foul){note}"


def _tally(
    decided: Decisions, wheel_high: bool
) -> tuple[Counter[str], dict[tuple[str, str], list[Any]]]:
    other = " (under the other wheel rule, " + (
        "the wheel lowest)" if wheel_high else "the wheel second highest)"
    )
    by_rule: Counter[str] = Counter()
    failures: dict[tuple[str, str], list[Any]] = {}
    classes = hand_classes()

    def count(i: int, decision: Decision, note: str) -> None:
        key = _failure_key(decision, note)
        if key is not None:
            entry = failures.setdefault(key, [0, format_cards(classes[i][0])])
            entry[0] = int(entry[0]) + classes[i][1]

    for i, decision in enumerate(decided.main):
        if len(decision) == 3:
            by_rule[str(decision[0])] += classes[i][1]
        count(i, decision, "")
        if i in decided.other:
            count(i, decided.other[i], other)
    return by_rule, failures


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
    by_rule, merged = _tally(
        decisions(way, rules, workers=workers, progress=progress), rules.wheel_high
    )
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
        len(hand_classes()),
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
