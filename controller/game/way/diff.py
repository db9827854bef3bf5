"""Two ways side by side over every hand (``paigow-table house-way diff A B``): the exact share
of the 154,143,080 hands they set differently, by rule pair (the rule in A → the rule in B),
with an example hand of each pair. The hands are covered exactly by the classes of
controller/game/way/check.py; "set differently" means a different front or back *value* (a
setting that differs only in suits, which no class can tell apart, is the same setting)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from controller.game.cards import format_cards
from controller.game.hands import front_key
from controller.game.setting import DEFAULT_RULES, Rules
from controller.game.way.check import ALL_HANDS, Decision, Progress, decisions, hand_classes
from controller.game.way.engine import Way


@dataclass(frozen=True, slots=True)
class RulePair:
    """Hands set differently with ``rule_a`` in A and ``rule_b`` in B."""

    rule_a: str
    rule_b: str
    hands: int
    example: str
    setting_a: str
    setting_b: str

    @property
    def share(self) -> float:
        return self.hands / ALL_HANDS

    def to_dict(self) -> dict[str, object]:
        return {
            "rule_a": self.rule_a,
            "rule_b": self.rule_b,
            "hands": self.hands,
            "share": self.share,
            "example": self.example,
            "setting_a": self.setting_a,
            "setting_b": self.setting_b,
        }


@dataclass(frozen=True, slots=True)
class DiffReport:
    name_a: str
    digest_a: str
    name_b: str
    digest_b: str
    differ: int
    unset: int
    pairs: tuple[RulePair, ...]
    seconds: float

    @property
    def share(self) -> float:
        return self.differ / ALL_HANDS

    def to_dict(self) -> dict[str, object]:
        return {
            "a": {"way": self.name_a, "digest": self.digest_a},
            "b": {"way": self.name_b, "digest": self.digest_b},
            "hands": ALL_HANDS,
            "differ": self.differ,
            "share": self.share,
            "unset": self.unset,
            "by_rule_pair": [p.to_dict() for p in self.pairs],
            "seconds": round(self.seconds, 1),
        }


def _text(cards: Sequence[int], front: tuple[int, int]) -> str:
    back = [c for c in cards if c not in front]
    return f"{format_cards(front)} | {format_cards(back)}"


def _compare(
    main_a: Sequence[Decision], main_b: Sequence[Decision]
) -> tuple[Counter[tuple[str, str]], dict[tuple[str, str], tuple[str, str, str]], int]:
    pairs: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], tuple[str, str, str]] = {}
    unset = 0
    for (cards, weight), da, db in zip(hand_classes(), main_a, main_b, strict=True):
        if len(da) != 3 or len(db) != 3:
            unset += weight  # a way that fails its check; `check` says where
            continue
        rule_a, front_a, back_a = da
        rule_b, front_b, back_b = db
        if back_a == back_b and front_key(*front_a) == front_key(*front_b):
            continue
        key = (rule_a, rule_b)
        pairs[key] += weight
        if key not in examples:
            examples[key] = (format_cards(cards), _text(cards, front_a), _text(cards, front_b))
    return pairs, examples, unset


def diff_ways(
    a: Way,
    b: Way,
    rules: Rules = DEFAULT_RULES,
    *,
    workers: int | None = None,
    progress: Progress | None = None,
) -> DiffReport:
    """Where ``a`` and ``b`` set hands differently, exactly, over every hand."""
    started = time.perf_counter()
    decided_a = decisions(a, rules, workers=workers, progress=progress)
    decided_b = decisions(b, rules, workers=workers, progress=progress)
    pairs, examples, unset = _compare(decided_a.main, decided_b.main)
    out = tuple(
        RulePair(ra, rb, n, *examples[(ra, rb)])
        for (ra, rb), n in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
    )
    return DiffReport(
        a.name,
        a.digest,
        b.name,
        b.digest,
        sum(pairs.values()),
        unset,
        out,
        time.perf_counter() - started,
    )
