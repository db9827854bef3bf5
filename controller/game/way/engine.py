"""Setting seven cards by a way read from its file (controller/game/way/language.py).

The engine does what controller/game/house_way.py does for the filed way, with the rules taken
from data: classify the hand by its best five cards, apply the first rule of that class that
applies (by priority), name the front by ranks, and choose the physical cards by the convention
of docs/rules.md §7 (highest back, then the joker kept in back, then the lowest card codes). A
straight or flush hand is either played as another class (``play_as``) or set by a search over
the 21 splits whose back is a straight or flush (``keep_in_back``): the highest front, then the
highest back. The rank groups, the choice of cards and the search are house_way.py's own code,
so a way that states the filed rules sets every hand as ``house_way`` does (tested over every
hand).

A hand no rule applies to (a hole), two rules of equal priority applying (an unresolved
overlap), a rule that applies but whose front the hand does not have, and a foul raise
:class:`WayError` with its ``kind``; ``paigow-table house-way check`` proves a way has none.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import combinations
from pathlib import Path
from typing import Final

from controller.game.cards import ACE, DECK, JOKER_CODE, CardError, check_distinct
from controller.game.hands import (
    Category,
    evaluate,
    front_key,
    is_foul_keys,
    straight_table,
)
from controller.game.house_way import (
    _CAT_SHIFT,
    _COMPLETE,
    _ROYAL_KEY,
    FrontSpec,
    _back_of,
    _best_complete,
    _choose,
    _may_be_complete,
    _Ranks,
)
from controller.game.house_way_cache import (
    HouseWayCache,
    PatternTable,
    load_table,
    table_of,
    write_tables,
)
from controller.game.setting import DEFAULT_RULES, Rules, Setting
from controller.game.way.language import (
    COMPLETE,
    FRONT_THRESHOLDS,
    Condition,
    CountSpec,
    RankSpec,
    Rule,
    WayText,
    parse_way,
    read_way,
)

WAYS_DIR: Final = Path(__file__).resolve().parent.parent / "ways"
DEFAULT_WAY: Final = "dealer-open"


def user_table_file(digest: str) -> Path:
    """A way's rank-pattern table in the user's cache, by digest."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "paigow-table" / "ways" / f"{digest}.patterns.bin.gz"


_CLASS_OF: Final = {
    Category.FIVE_ACES: "five aces",
    Category.FOUR_OF_A_KIND: "four of a kind",
    Category.FULL_HOUSE: "full house",
    Category.STRAIGHT_FLUSH: COMPLETE,
    Category.FLUSH: COMPLETE,
    Category.STRAIGHT: COMPLETE,
    Category.THREE_OF_A_KIND: "three of a kind",
    Category.TWO_PAIR: "two pair",
    Category.ONE_PAIR: "one pair",
    Category.HIGH_CARD: "high card",
}
_SF: Final = int(Category.STRAIGHT_FLUSH)


class WayError(AssertionError):
    """A way that cannot set a hand: ``kind`` is "hole", "overlap", "no-front" or "foul"."""

    def __init__(self, kind: str, message: str, rules: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.rules = rules


# --- the hand's features (docs/house-way.md "Conditions") --------------------------------------


class _Hand:
    """Seven cards (codes ascending) with their rank groups and, when asked, the splits whose
    back is a straight or flush."""

    __slots__ = ("__dict__", "cards", "h", "wheel_high")

    def __init__(self, cards: Sequence[int], wheel_high: bool) -> None:
        self.cards = cards
        self.wheel_high = wheel_high
        self.h = _Ranks(cards, wheel_high)

    @cached_property
    def four(self) -> int:
        return self.h.quads[0] if self.h.quads else 0

    @cached_property
    def three(self) -> int:
        return self.h.trips[0] if self.h.trips else 0

    @cached_property
    def high_pair(self) -> int:
        return self.h.pairs[0] if self.h.pairs else 0

    @cached_property
    def low_pair(self) -> int:
        return self.h.pairs[1] if len(self.h.pairs) >= 2 else 0

    @cached_property
    def other_pair(self) -> int:
        four = self.four
        return next((r for r in (*self.h.trips, *self.h.pairs) if r != four), 0)

    @cached_property
    def highest_singleton(self) -> int:
        return self.h.singles[0] if self.h.singles else 0

    @property
    def singleton_ace(self) -> bool:
        return self.h.counts[ACE] == 1

    @property
    def ace(self) -> bool:
        return self.h.counts[ACE] >= 1

    @property
    def joker(self) -> bool:
        return JOKER_CODE in self.cards

    @property
    def three_outranks_four(self) -> bool:
        return bool(self.four and self.three and self.three > self.four)

    @property
    def pairs(self) -> int:
        return len(self.h.pairs)

    @cached_property
    def flush_cards(self) -> int:
        suits = [0, 0, 0, 0]
        for c in self.cards:
            if c != JOKER_CODE:
                suits[c & 3] += 1
        return max(suits) + self.joker

    @cached_property
    def straight_cards(self) -> int:
        """The most cards of consecutive ranks (an Ace also below the 2), the joker filling one
        gap or extending the run."""
        present = {(c >> 2) + 2 for c in self.cards if c != JOKER_CODE}
        if ACE in present:
            present.add(1)
        joker = int(self.joker)
        best = 0
        for start in range(1, ACE + 1):
            run, gaps, r = 0, 0, start
            while r <= ACE:
                if r in present:
                    run += 1
                elif gaps < joker:
                    gaps += 1
                    run += 1
                else:
                    break
                r += 1
            best = max(best, run)
        return min(best, 7)

    @cached_property
    def grouping(self) -> str:
        sizes = sorted((n for n in self.h.counts if n), reverse=True)
        return "+".join(map(str, sizes))

    @cached_property
    def candidates(self) -> list[tuple[int, int, tuple[int, int]]]:
        """(front key, back key, front) of every split whose back is a straight or flush."""
        cards = self.cards
        table = straight_table(self.wheel_high)
        found = []
        for i, j in combinations(range(7), 2):
            front = (cards[i], cards[j])
            back = _back_of(cards, front)
            if not _may_be_complete(back, table):
                continue
            back_value = evaluate(back, self.wheel_high)
            if back_value >> _CAT_SHIFT in _COMPLETE:
                found.append((front_key(front[0], front[1]), back_value, front))
        return found


def _back_filter(kind: str) -> Callable[[int], bool]:
    if kind == "royal flush":
        return lambda bk: bk == _ROYAL_KEY
    if kind == "straight flush":
        return lambda bk: bk >> _CAT_SHIFT == _SF
    return lambda bk: True


def _rank_test(name: str, spec: RankSpec) -> Callable[[_Hand], bool]:
    def test(h: _Hand) -> bool:
        return spec.holds(getattr(h, name))

    return test


def _flag_test(name: str, flag: bool) -> Callable[[_Hand], bool]:
    def test(h: _Hand) -> bool:
        return bool(getattr(h, name)) is flag

    return test


def _count_test(name: str, count: CountSpec) -> Callable[[_Hand], bool]:
    def test(h: _Hand) -> bool:
        return getattr(h, name) in count.allowed

    return test


def _compile(cond: Condition) -> Callable[[_Hand], bool]:
    """A condition as one function of the hand."""
    tests: list[Callable[[_Hand], bool]] = []
    tests.extend(_rank_test(name, spec) for name, spec in cond.ranks)
    tests.extend(_flag_test(name, flag) for name, flag in cond.flags)
    tests.extend(_count_test(name, count) for name, count in cond.counts)
    grouping = cond.grouping
    if grouping is not None:

        def grouped(h: _Hand) -> bool:
            return h.grouping in grouping

        tests.append(grouped)
    if cond.a_back_can_be is not None:
        accepts = _back_filter(cond.a_back_can_be)

        def back_can_be(h: _Hand) -> bool:
            return any(accepts(c[1]) for c in h.candidates)

        tests.append(back_can_be)
    if cond.any_of:
        alternatives = [_compile(c) for c in cond.any_of]

        def any_of(h: _Hand) -> bool:
            return any(t(h) for t in alternatives)

        tests.append(any_of)
    if not tests:
        return lambda h: True
    if len(tests) == 1:
        return tests[0]
    every = tuple(tests)

    def all_of(h: _Hand) -> bool:
        return all(t(h) for t in every)

    return all_of


# --- fronts named by ranks ----------------------------------------------------------------------


def _front_spec(name: str, hand: _Hand) -> FrontSpec | None:  # noqa: C901 — one branch a front the way language names
    """A front named by ranks, as house_way's front spec; None when the hand has no such front."""
    h = hand.h
    if name == "the other pair":
        return [(hand.other_pair, 2)] if hand.other_pair else None
    if name == "two of the four":
        return [(hand.four, 2)] if hand.four else None
    if name == "two Aces":
        return [(ACE, 2)] if h.counts[ACE] >= 2 else None
    if name == "two of the highest three":
        return [(hand.three, 2)] if hand.three else None
    if name == "the highest pair or three":
        best = max(hand.three, hand.high_pair)
        return [(best, 2)] if best else None
    if name in ("the high pair", "the pair"):
        return [(hand.high_pair, 2)] if hand.high_pair else None
    if name == "the low pair":
        return [(hand.low_pair, 2)] if hand.low_pair else None
    if name == "the two highest singletons":
        return h.two_highest_singletons() if len(h.singles) >= 2 else None
    if name == "the second and third highest singletons":
        return [(h.singles[1], 1), (h.singles[2], 1)] if len(h.singles) >= 3 else None
    if name == "an Ace and the highest singleton":
        if h.counts[ACE] >= 1 and h.singles and h.singles[0] != ACE:
            return [(ACE, 1), (h.singles[0], 1)]
        return None
    raise AssertionError(f"unknown front {name!r}")  # the language admits only FRONTS


@dataclass(frozen=True, slots=True)
class _Compiled:
    rule: Rule
    applies: Callable[[_Hand], bool]
    back_ok: Callable[[int], bool] | None
    front_min: int


# --- a way --------------------------------------------------------------------------------------

_CACHES: dict[tuple[str, Rules], HouseWayCache] = {}


@dataclass(frozen=True, eq=False)
class Way:
    """A parsed way, ready to set hands. ``name`` and ``digest`` identify it (the table
    journals both); :meth:`set` sets seven cards."""

    text: WayText
    _classes: dict[str, tuple[_Compiled, ...]] = field(init=False, repr=False)
    _by_rules: dict[Rules, HouseWayCache] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        classes = {
            cls: tuple(
                _Compiled(
                    r,
                    _compile(r.when),
                    _back_filter(r.keep_in_back) if r.keep_in_back else None,
                    (FRONT_THRESHOLDS[r.front_at_least] << 16) if r.front_at_least else 0,
                )
                for r in rules
            )
            for cls, rules in self.text.rules.items()
        }
        object.__setattr__(self, "_classes", classes)
        object.__setattr__(self, "_by_rules", {})

    def __repr__(self) -> str:
        return f"Way({self.name!r}, digest={self.digest[:12]}…)"

    @property
    def name(self) -> str:
        return self.text.name

    @property
    def digest(self) -> str:
        """SHA-256 (hex) of the way's canonical content."""
        return self.text.digest

    @property
    def title(self) -> str:
        return self.text.title

    @property
    def rule_ids(self) -> tuple[str, ...]:
        return self.text.rule_ids

    @property
    def shipped(self) -> bool:
        """Whether this is one of the shipped ways, unchanged (each is proven by the tests)."""
        path = WAYS_DIR / f"{self.name}.toml"
        return path.exists() and read_way(path).digest == self.digest

    # -- deciding ---------------------------------------------------------------------------

    def _select(self, cls: str, hand: _Hand) -> _Compiled:
        rules = self._classes[cls]
        n = len(rules)
        for k in range(n):
            c = rules[k]
            if not c.applies(hand) or (c.back_ok is not None and not self._searchable(c, hand)):
                continue
            same = [c.rule.where]
            m = k + 1
            while m < n and rules[m].rule.priority == c.rule.priority:
                o = rules[m]
                if o.applies(hand) and (o.back_ok is None or self._searchable(o, hand)):
                    same.append(o.rule.where)
                m += 1
            if len(same) > 1:
                raise WayError(
                    "overlap",
                    f"rules of equal priority {c.rule.priority} both apply: {', '.join(same)}",
                    tuple(same),
                )
            return c
        raise WayError("hole", f"no rule of class {cls!r} applies", (cls,))

    @staticmethod
    def _searchable(c: _Compiled, hand: _Hand) -> bool:
        back_ok, front_min = c.back_ok, c.front_min
        assert back_ok is not None
        return any(fk >= front_min and back_ok(bk) for fk, bk, _ in hand.candidates)

    def _spec(self, c: _Compiled, hand: _Hand) -> FrontSpec:
        for name in c.rule.front:
            spec = _front_spec(name, hand)
            if spec is not None:
                return spec
        raise WayError(
            "no-front",
            f"rule {c.rule.where} applies but the hand has no {' / '.join(c.rule.front)}",
            (c.rule.where,),
        )

    def decide(
        self, ordered: Sequence[int], wheel_high: bool
    ) -> tuple[str, tuple[int, int], int, str]:
        """(rule id, front codes, back key, the class) of seven distinct codes in ascending
        order; raises WayError for a hole, an overlap or a missing front (not for a foul)."""
        hand = _Hand(ordered, wheel_high)
        h = hand.h
        category = (
            Category(evaluate(ordered, wheel_high) >> _CAT_SHIFT)
            if h.maybe_complete
            else h.category()
        )
        cls = _CLASS_OF[category]
        c = self._select(cls, hand)
        rule = c.rule
        if rule.play_as is not None:
            sub = self._select(rule.play_as, hand)
            if sub.rule.play_as is not None or sub.back_ok is not None:
                raise WayError("hole", f"rule {sub.rule.where} cannot follow a play_as")
            front, back_value = _choose(ordered, h, self._spec(sub, hand), wheel_high)
            return f"{rule.id}/{sub.rule.id}", front, back_value, cls
        if c.back_ok is not None:
            back_ok, front_min = c.back_ok, c.front_min
            eligible = [x for x in hand.candidates if x[0] >= front_min and back_ok(x[1])]
            _, back_value, front = _best_complete(eligible)
            return rule.id, front, back_value, cls
        front, back_value = _choose(ordered, h, self._spec(c, hand), wheel_high)
        return rule.id, front, back_value, cls

    def set_by_rules(self, cards: Sequence[int], rules: Rules = DEFAULT_RULES) -> Setting:
        """Set seven cards by the way's rules (no table). Deterministic; a hole, an overlap, a
        missing front or a foul raise WayError."""
        if len(cards) != 7:
            raise CardError(f"a House Way sets seven cards, got {len(cards)}")
        check_distinct(cards)
        ordered = sorted(cards)
        rule, front, back_value, _ = self.decide(ordered, rules.wheel_high)
        if is_foul_keys(front_key(front[0], front[1]), back_value):
            raise WayError("foul", f"rule {rule} fouled: front {DECK[front[0]]} {DECK[front[1]]}")
        b = _back_of(ordered, front)
        f0, f1 = (front[0], front[1]) if front[0] < front[1] else (front[1], front[0])
        return Setting(
            (DECK[f0], DECK[f1]),
            (DECK[b[0]], DECK[b[1]], DECK[b[2]], DECK[b[3]], DECK[b[4]]),
            rule,
            rules.wheel_high,
        )

    @property
    def table_files(self) -> tuple[Path, ...]:
        """Where its rank-pattern table may be: beside the shipped way, then in the user's
        cache (by digest; ``paigow-table house-way check`` writes it when the way passes)."""
        return (WAYS_DIR / f"{self.name}.patterns.bin.gz", user_table_file(self.digest))

    def pattern_table(self, rules: Rules = DEFAULT_RULES) -> PatternTable:
        """The way's rank-pattern table for ``rules``: the packaged one for the shipped filed
        way (its rules are house_way.py's, tested hand for hand), else a table file written for
        this digest, else an empty one (then the cache fills itself from the rules)."""
        if self.name == DEFAULT_WAY and self.shipped:
            return load_table(rules)
        for path in self.table_files:
            table = load_table(rules, path, self.digest)
            if table.index:
                return table
        return table_of({})

    def write_table(self, path: Path | None = None) -> Path:
        """Write the way's rank-pattern table (both wheel rules; 135,200 settings, some
        seconds) to ``path`` or the user's cache."""
        target = path or user_table_file(self.digest)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".tmp")
        write_tables(tmp, self.set_by_rules, self.digest)
        tmp.replace(target)
        return target

    def cache(self, rules: Rules = DEFAULT_RULES) -> HouseWayCache:
        """The way by rank pattern (controller/game/house_way_cache.py), one per digest and
        rules in the process, from :meth:`pattern_table` and filled from the rules as new
        patterns come; for the shipped filed way, ``HouseWayCache.packaged`` (the rule code of
        controller/game/house_way.py, which dealer-open.toml equals, tested hand for hand)."""
        key = (self.digest, rules)
        found = _CACHES.get(key)
        if found is None:
            if self.name == DEFAULT_WAY and self.shipped:
                # The filed way, unchanged: its rule code, which its file equals hand for hand.
                found = _CACHES[key] = HouseWayCache.lazy(rules)
                return found
            table = self.pattern_table(rules)
            entries = {k: e for k in table.index if (e := table.entry(k)) is not None}
            found = _CACHES[key] = HouseWayCache(rules, entries, setter=self.set_by_rules)
        return found

    def set(self, cards: Sequence[int], rules: Rules = DEFAULT_RULES) -> Setting:
        """Set seven distinct cards (any order): the same setting as :meth:`set_by_rules`, by
        the rank-pattern table when the hand cannot make a flush."""
        cache = self._by_rules.get(rules)
        if cache is None:
            cache = self._by_rules[rules] = self.cache(rules)
        if len(cards) != 7 or len(set(cards)) != 7:
            if len(cards) != 7:
                raise CardError(f"a House Way sets seven cards, got {len(cards)}")
            check_distinct(cards)
        return cache.setting(cards)


def parse(text: str, where: str = "<way>") -> Way:
    """A way from its text (WaySyntaxError names the line)."""
    return Way(parse_way(text, where))


def shipped_ways() -> dict[str, Path]:
    """The ways shipped with the controller, by name."""
    return {p.stem: p for p in sorted(WAYS_DIR.glob("*.toml"))}


_LOADED: dict[str, Way] = {}


def load_way(name_or_file: str | Path = DEFAULT_WAY) -> Way:
    """A shipped way by name (``dealer-open``, ``classic``) or a way file by path."""
    text = str(name_or_file)
    shipped = shipped_ways()
    path = shipped[text] if text in shipped else Path(text)
    if not path.exists():
        raise FileNotFoundError(
            f"no way {text!r}: not a file, nor a shipped way ({', '.join(shipped)})"
        )
    key = str(path.resolve())
    way = _LOADED.get(key)
    if way is None or way.digest != read_way(path).digest:
        way = _LOADED[key] = Way(read_way(path))
    return way


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m controller.game.way.engine --write-tables``: the shipped ways' pattern
    tables beside them (the filed way's is controller/game/house_way_patterns.bin.gz)."""
    import argparse

    parser = argparse.ArgumentParser(description="Write the shipped ways' pattern tables.")
    parser.add_argument("--write-tables", action="store_true")
    args = parser.parse_args(argv)
    if args.write_tables:
        for name in shipped_ways():
            if name != DEFAULT_WAY:
                way = load_way(name)
                path = way.write_table(way.table_files[0])
                print(f"{path} ({path.stat().st_size:,} bytes)")
    return 0
