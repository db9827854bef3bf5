"""The House Way language: a way is a TOML file of rules (docs/house-way.md teaches it).

A file has a ``name``, optional ``title``, ``source`` and ``note``, and a list of ``[[rule]]``
tables. Each rule has an ``id``, the ``class`` of hands it sets (the best five-card hand of the
seven cards), optional conditions ``when = { … }`` and one action: ``front`` (what goes in
front, named by ranks), ``play_as`` (a straight or flush hand set by another class's rules) or
``keep_in_back`` (the straight or flush search). Inside a class the rules are tried by
``priority`` (by default a rule's position among its class's rules, the first 1): the first that
applies sets the hand; two rules of equal priority that both apply are an unresolved overlap.

``parse_way`` turns the text into a :class:`WayText` or raises :class:`WaySyntaxError` naming
the line and what was expected. The digest is the SHA-256 of the canonical JSON of the parsed
document, so comments and layout do not change it and every rule change does.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from controller.game.cards import ACE, JACK, KING, RANK_CHARS

#: Classes of hands, by the best five-card hand of the seven cards (the joker as in
#: docs/rules.md §2). "straight or flush" is every straight, flush, straight flush and royal.
CLASSES: Final = (
    "five aces",
    "four of a kind",
    "full house",
    "straight or flush",
    "three of a kind",
    "two pair",
    "one pair",
    "high card",
)
COMPLETE: Final = "straight or flush"

#: What a rule can put in front, named by ranks (docs/house-way.md "Fronts").
FRONTS: Final = (
    "the other pair",
    "two of the four",
    "two Aces",
    "two of the highest three",
    "the highest pair or three",
    "the high pair",
    "the pair",
    "the low pair",
    "the two highest singletons",
    "the second and third highest singletons",
    "an Ace and the highest singleton",
)

#: The backs of the straight-or-flush search, and the front thresholds.
BACKS: Final = ("straight or flush", "straight flush", "royal flush")
FRONT_THRESHOLDS: Final = {"J-high": JACK, "K-high": KING}

RANK_CONDITIONS: Final = (
    "four",
    "three",
    "high_pair",
    "low_pair",
    "other_pair",
    "highest_singleton",
)
BOOL_CONDITIONS: Final = ("singleton_ace", "ace", "joker", "three_outranks_four")
COUNT_CONDITIONS: Final = ("pairs", "flush_cards", "straight_cards")
CONDITIONS: Final = (
    *RANK_CONDITIONS,
    *BOOL_CONDITIONS,
    *COUNT_CONDITIONS,
    "grouping",
    "a_back_can_be",
    "any_of",
)
RULE_KEYS: Final = (
    "id",
    "class",
    "priority",
    "when",
    "front",
    "play_as",
    "keep_in_back",
    "front_at_least",
    "note",
)
TOP_KEYS: Final = ("name", "title", "source", "note", "rule")
#: Arrays and tables nested deeper than this are no way (a way needs three or four levels).
MAX_NESTING: Final = 32

_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
_GROUPING = re.compile(r"^[1-5](\+[1-5]){0,6}$")


class WaySyntaxError(ValueError):
    """A way file that cannot be read: the message names the file, the line and what was
    expected."""

    def __init__(self, where: str, line: int, message: str) -> None:
        super().__init__(f"{where}:{line}: {message}")
        self.where = where
        self.line = line
        self.message = message


@dataclass(frozen=True, slots=True)
class RankSpec:
    """A set of ranks a group may have; ``absent`` when the condition also holds (or only holds,
    for "none") when the hand has no such group."""

    ranks: frozenset[int]
    absent: bool
    text: str

    def holds(self, rank: int) -> bool:
        """``rank`` 0 means the hand has no such group."""
        return self.absent if rank == 0 else rank in self.ranks


@dataclass(frozen=True, slots=True)
class CountSpec:
    allowed: frozenset[int]
    text: str


@dataclass(frozen=True, slots=True)
class Condition:
    """Every field that is set must hold; ``any_of``: at least one of them must hold."""

    ranks: tuple[tuple[str, RankSpec], ...] = ()
    flags: tuple[tuple[str, bool], ...] = ()
    counts: tuple[tuple[str, CountSpec], ...] = ()
    grouping: frozenset[str] | None = None
    a_back_can_be: str | None = None
    any_of: tuple[Condition, ...] = ()

    @property
    def needs_candidates(self) -> bool:
        return self.a_back_can_be is not None or any(c.needs_candidates for c in self.any_of)


@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a way. Exactly one of ``front``, ``play_as`` and ``keep_in_back`` is set."""

    id: str
    cls: str
    priority: int
    line: int
    when: Condition
    front: tuple[str, ...] = ()
    play_as: str | None = None
    keep_in_back: str | None = None
    front_at_least: str | None = None

    @property
    def where(self) -> str:
        return f"{self.id} (line {self.line})"


@dataclass(frozen=True, slots=True)
class WayText:
    """A parsed way: its name, its rules by class in priority order, and its digest."""

    name: str
    title: str
    source: str
    rules: dict[str, tuple[Rule, ...]]
    digest: str
    canonical: str
    path: str = ""
    rule_ids: tuple[str, ...] = field(default=())
    raw: str = ""  # the text as read (workers re-read it, so errors name the same lines)


# --- reading --------------------------------------------------------------------------------


def _rank_char(text: str) -> int:
    t = "T" if text == "10" else text.upper()
    if len(t) != 1 or t not in RANK_CHARS:
        raise ValueError(text)
    return RANK_CHARS.index(t) + 2


def parse_rank_spec(text: str) -> RankSpec:
    """``"A"``, ``"7+"`` (Sevens or better), ``"2-6"``, ``"any"``, ``"none"``."""
    t = text.strip()
    if t == "any":
        return RankSpec(frozenset(range(2, ACE + 1)), False, t)
    if t == "none":
        return RankSpec(frozenset(), True, t)
    if t.endswith("+"):
        low = _rank_char(t[:-1])
        return RankSpec(frozenset(range(low, ACE + 1)), False, t)
    if "-" in t:
        a, b = (_rank_char(x) for x in t.split("-", 1))
        if a > b:
            raise ValueError(text)
        return RankSpec(frozenset(range(a, b + 1)), False, t)
    return RankSpec(frozenset({_rank_char(t)}), False, t)


def parse_count_spec(value: object) -> CountSpec:
    """``2``, ``"6+"``, ``[2, 3]``."""
    if isinstance(value, bool):
        raise ValueError(value)
    if isinstance(value, int):
        return CountSpec(frozenset({value}), str(value))
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return CountSpec(frozenset(value), ",".join(map(str, value)))
    if isinstance(value, str) and value.endswith("+") and value[:-1].isdigit():
        return CountSpec(frozenset(range(int(value[:-1]), 8)), value)
    raise ValueError(value)


class _Lines:
    """Where things are in the text: tomllib gives no positions for values, so rules are found by
    their ``[[rule]]`` headers and keys by their ``key =`` lines inside the rule's block."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.headers = [
            i + 1 for i, line in enumerate(self.lines) if re.match(r"^\s*\[\[\s*rule\s*\]\]", line)
        ]

    def rule(self, index: int) -> int:
        return self.headers[index] if index < len(self.headers) else 1

    def key(self, index: int | None, key: str) -> int:
        if index is None:
            start, end = 1, (self.headers[0] if self.headers else len(self.lines) + 1)
        else:
            start = self.rule(index)
            end = self.headers[index + 1] if index + 1 < len(self.headers) else len(self.lines) + 1
        pattern = re.compile(rf"(^|[\s{{,.]){re.escape(key)}\s*=")
        for n in range(start, end):
            if pattern.search(self.lines[n - 1]):
                return n
        return start


def _condition(  # noqa: C901 — one branch a condition of the way language
    table: object, where: str, lines: _Lines, index: int, cls: str, depth: int = 0
) -> Condition:
    def fail(key: str, message: str) -> WaySyntaxError:
        return WaySyntaxError(where, lines.key(index, key), message)

    if not isinstance(table, dict):
        raise fail("when", 'expected a table of conditions, e.g. when = { high_pair = "7+" }')
    ranks: list[tuple[str, RankSpec]] = []
    flags: list[tuple[str, bool]] = []
    counts: list[tuple[str, CountSpec]] = []
    grouping: frozenset[str] | None = None
    back: str | None = None
    any_of: list[Condition] = []
    for key, value in table.items():
        if key in RANK_CONDITIONS:
            try:
                if not isinstance(value, str):
                    raise ValueError(value)
                ranks.append((key, parse_rank_spec(value)))
            except ValueError:
                raise fail(
                    key,
                    f"{key}: expected a rank, a rank and '+', a range or 'any'/'none' "
                    f'(e.g. "7+", "J-K", "A"), got {value!r}',
                ) from None
        elif key in BOOL_CONDITIONS:
            if not isinstance(value, bool):
                raise fail(key, f"{key}: expected true or false, got {value!r}")
            flags.append((key, value))
        elif key in COUNT_CONDITIONS:
            try:
                counts.append((key, parse_count_spec(value)))
            except ValueError:
                raise fail(
                    key, f'{key}: expected a number, a list of numbers or "N+", got {value!r}'
                ) from None
        elif key == "grouping":
            items = [value] if isinstance(value, str) else value
            if not isinstance(items, list) or not all(
                isinstance(g, str) and _GROUPING.match(g) for g in items
            ):
                raise fail(
                    key, f'grouping: expected rank-group sizes like "3+2+1+1", got {value!r}'
                )
            bad = [g for g in items if sum(map(int, g.split("+"))) != 7]
            if bad:
                raise fail(key, f"grouping: {bad[0]!r} does not add up to seven cards")
            grouping = frozenset(items)
        elif key == "a_back_can_be":
            if value not in BACKS[1:] or cls != COMPLETE:
                raise fail(
                    key,
                    'a_back_can_be: expected "straight flush" or "royal flush", in a rule of '
                    f'class "{COMPLETE}"',
                )
            back = str(value)
        elif key == "any_of":
            if depth or not isinstance(value, list) or not value:
                raise fail(key, "any_of: expected a list of condition tables (not nested)")
            any_of = [_condition(v, where, lines, index, cls, depth + 1) for v in value]
        else:
            raise fail(key, f"unknown condition {key!r}; expected one of {', '.join(CONDITIONS)}")
    return Condition(tuple(ranks), tuple(flags), tuple(counts), grouping, back, tuple(any_of))


def _rule(  # noqa: C901 — one check a key of a rule, each error naming its line
    raw: object, index: int, position: int, where: str, lines: _Lines
) -> tuple[Rule, dict[str, object]]:
    line = lines.rule(index)
    if not isinstance(raw, dict):
        raise WaySyntaxError(where, line, "expected a [[rule]] table")

    def fail(key: str, message: str) -> WaySyntaxError:
        return WaySyntaxError(where, lines.key(index, key), message)

    for key in raw:
        if key not in RULE_KEYS:
            raise fail(key, f"unknown rule key {key!r}; expected one of {', '.join(RULE_KEYS)}")
    rid = raw.get("id")
    if not isinstance(rid, str) or not rid or any(ch.isspace() for ch in rid):
        raise WaySyntaxError(where, line, 'rule: expected id = "…" (a rule id without spaces)')
    cls = raw.get("class")
    if cls not in CLASSES:
        raise fail("class", f"rule {rid}: expected class = one of {', '.join(CLASSES)}")
    priority = raw.get("priority", position)
    if isinstance(priority, bool) or not isinstance(priority, int) or priority < 1:
        raise fail("priority", f"rule {rid}: expected priority = a whole number from 1")
    when = _condition(raw.get("when", {}), where, lines, index, str(cls))
    actions = [k for k in ("front", "play_as", "keep_in_back") if k in raw]
    if len(actions) != 1:
        raise WaySyntaxError(
            where, line, f"rule {rid}: expected exactly one of front, play_as, keep_in_back"
        )
    front: tuple[str, ...] = ()
    play_as = keep = at_least = None
    if "front" in raw:
        value = raw["front"]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(f in FRONTS for f in items):
            raise fail(
                "front",
                f"rule {rid}: expected front = one of (or a list of, the first that the hand "
                f"has): {', '.join(repr(f) for f in FRONTS)}; got {value!r}",
            )
        front = tuple(items)
    elif "play_as" in raw:
        if cls != COMPLETE or raw["play_as"] not in CLASSES or raw["play_as"] == COMPLETE:
            raise fail(
                "play_as",
                f'rule {rid}: play_as is for class "{COMPLETE}" and names another class '
                f"({', '.join(c for c in CLASSES if c != COMPLETE)})",
            )
        play_as = str(raw["play_as"])
    else:
        if cls != COMPLETE or raw["keep_in_back"] not in BACKS:
            raise fail(
                "keep_in_back",
                f'rule {rid}: keep_in_back is for class "{COMPLETE}" and is one of '
                f"{', '.join(repr(b) for b in BACKS)}",
            )
        keep = str(raw["keep_in_back"])
    if "front_at_least" in raw:
        if keep is None or raw["front_at_least"] not in FRONT_THRESHOLDS:
            raise fail(
                "front_at_least",
                f'rule {rid}: front_at_least goes with keep_in_back and is "J-high" or "K-high"',
            )
        at_least = str(raw["front_at_least"])
    if "note" in raw and not isinstance(raw["note"], str):
        raise fail("note", f'rule {rid}: expected note = "text"')
    rule = Rule(rid, str(cls), priority, line, when, front, play_as, keep, at_least)
    return rule, raw


def parse_way(text: str, where: str = "<way>") -> WayText:  # noqa: C901 — a way file's parts in order, each error naming its line
    """Parse a way's text; ``where`` names it in errors ("FILE:LINE: what was expected")."""
    deep = _too_deep(text)
    if deep:
        raise WaySyntaxError(
            where, deep, f"arrays or tables nested more than {MAX_NESTING} deep: not a way"
        )
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"at line (\d+)", str(exc))
        raise WaySyntaxError(where, int(m.group(1)) if m else 1, f"not valid TOML: {exc}") from None
    lines = _Lines(text)
    for key in doc:
        if key not in TOP_KEYS:
            raise WaySyntaxError(
                where, lines.key(None, key), f"unknown key {key!r}; expected {', '.join(TOP_KEYS)}"
            )
    name = doc.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise WaySyntaxError(
            where,
            lines.key(None, "name"),
            'expected name = "…" (lower-case letters, digits, ".", "_" or "-")',
        )
    for key in ("title", "source", "note"):
        if key in doc and not isinstance(doc[key], str):
            raise WaySyntaxError(where, lines.key(None, key), f'expected {key} = "text"')
    raw_rules = doc.get("rule")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise WaySyntaxError(where, len(lines.lines) or 1, "expected at least one [[rule]]")
    by_class: dict[str, list[Rule]] = {c: [] for c in CLASSES}
    positions: dict[str, int] = {c: 0 for c in CLASSES}
    for index, raw in enumerate(raw_rules):
        cls = raw.get("class") if isinstance(raw, dict) else None
        position = positions[cls] + 1 if cls in positions else 1
        rule, _ = _rule(raw, index, position, where, lines)
        positions[rule.cls] = position
        by_class[rule.cls].append(rule)
    for rules in by_class.values():
        rules.sort(key=lambda r: r.priority)  # stable: equal priorities keep the file order
    for rule in (r for rules in by_class.values() for r in rules):
        if rule.play_as is not None and not by_class[rule.play_as]:
            raise WaySyntaxError(
                where, rule.line, f"rule {rule.id}: plays as {rule.play_as!r}, which has no rules"
            )
    canonical = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    ids = tuple(dict.fromkeys(r.id for r in _in_file_order(by_class)))
    return WayText(
        name,
        str(doc.get("title", "")),
        str(doc.get("source", "")),
        {c: tuple(rs) for c, rs in by_class.items()},
        digest,
        canonical,
        where,
        ids,
        text,
    )


def _too_deep(text: str) -> int:
    """The line where brackets and braces first nest deeper than :data:`MAX_NESTING` (0: never):
    the TOML reader recurses once a level, so a deep file would end in a RecursionError. Strings
    are skipped roughly (quotes without escapes): a way needs a few levels, so a false alarm needs
    hundreds of brackets inside strings."""
    depth = 0
    quote = ""
    for number, line in enumerate(text.splitlines(), start=1):
        for char in line:
            if quote:
                quote = "" if char == quote else quote
            elif char in "\"'":
                quote = char
            elif char == "#":
                break
            elif char in "[{":
                depth += 1
                if depth > MAX_NESTING:
                    return number
            elif char in "]}":
                depth = max(0, depth - 1)
        quote = ""  # no multi-line strings in a way that matter here
    return 0


def _in_file_order(by_class: Mapping[str, Sequence[Rule]]) -> list[Rule]:
    return sorted((r for rs in by_class.values() for r in rs), key=lambda r: r.line)


def read_way(path: Path) -> WayText:
    """Parse a way file (bytes that are not UTF-8 are a syntax error naming their line)."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise WaySyntaxError(
            str(path), line, f"expected UTF-8 text: byte {exc.start} is not UTF-8"
        ) from None
    return parse_way(text, str(path))
