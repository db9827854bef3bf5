"""The House Way by rank pattern, for batches (the CLI's stream, the analysis): the same settings
as :func:`~controller.game.house_way.house_way`, several times faster.

Why it is exact: when seven cards cannot make a flush (the joker filling a suit), every value the
House Way compares — a front's, a back's, straights included — depends on the ranks alone (the
joker's too), and its tie-breaks are the joker kept in back and then the smallest card codes,
i.e. the first cards of each rank in code order. So the setting is a function of the *rank
pattern* of the hand sorted by code (the joker marked apart from the Aces): the same positions of
the sorted hand go to the front, whatever the suits. A hand that may make a flush (4 % of them)
goes to the rule code.

There are 67,600 patterns. Their settings, display orders and hand names are computed by the
rule code once, at build time, into ``house_way_patterns.bin.gz`` beside this module
(``python -m controller.game.house_way_cache --write``); ``tests/game/test_house_way_cache.py``
checks that the file is what the rule code gives today, and the cache against the rule code over
random hands. Without the file the cache fills itself from the rule code as patterns come.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from controller.game.cards import JOKER_CODE
from controller.game.house_way import house_way
from controller.game.setting import DEFAULT_RULES, Rules, Setting, display_order

TABLE_FILE: Final = Path(__file__).with_name("house_way_patterns.bin.gz")

#: The rank of a code in a pattern: 2–14, the joker 15 (it is set apart from the Aces), as a
#: ``bytes.translate`` table; and each code's suit (the joker 4).
PATTERN_RANKS: Final = bytes((c >> 2) + 2 if c < JOKER_CODE else 15 for c in range(256))
SUITS: Final = bytes(c & 3 if c < JOKER_CODE else 4 for c in range(256))


def pattern_key(ordered: Sequence[int]) -> bytes:
    """The rank pattern of seven card codes in ascending order: one byte a card."""
    return bytes(ordered).translate(PATTERN_RANKS)


def flush_possible(ordered: Sequence[int]) -> bool:
    """Five cards of a suit, the joker counting for any suit."""
    s = bytes(ordered).translate(SUITS)
    return max(s.count(0), s.count(1), s.count(2), s.count(3)) + s.count(4) >= 5


def pattern_hands() -> Iterator[list[int]]:
    """One hand (codes, ascending) of every rank pattern, none of which can make a flush: the
    suits go round, so no suit has more than two cards."""

    def counts(rank: int, left: int, acc: list[int]) -> Iterator[list[int]]:
        if rank == 15:
            if left <= 1:
                yield [*acc, left]  # the last entry: the joker
            return
        for n in range(min(4, left) + 1):
            yield from counts(rank + 1, left - n, [*acc, n])

    for c in counts(2, 7, []):
        cards: list[int] = []
        for rank, n in zip(range(2, 15), c, strict=False):
            base = len(cards)
            cards.extend([(rank - 2) * 4 + (base + k) % 4 for k in range(n)])
        if c[-1]:
            cards.append(JOKER_CODE)
        yield sorted(cards)


@dataclass(frozen=True, slots=True)
class Entry:
    """A pattern's House Way: positions (in the hand sorted by code) of the front, the rule, the
    order a person reads the cards in (front then back, as ``Setting.to_dict``), the hand names."""

    i: int
    j: int
    rule: str
    order: tuple[int, ...]
    front_hand: str
    back_hand: str


#: A function that sets seven cards: ``house_way`` or a data way's ``Way.set_by_rules``.
Setter = Callable[[Sequence[int], Rules], Setting]


def entry_of(ordered: Sequence[int], rules: Rules, setter: Setter = house_way) -> Entry:
    """A pattern's entry, from the rule code, for a hand of it (codes ascending, no flush)."""
    setting = setter(ordered, rules)
    i, j = sorted(ordered.index(int(c)) for c in setting.front)
    order = tuple(
        ordered.index(int(c)) for c in (*display_order(setting.front), *display_order(setting.back))
    )
    assert setting.rule is not None
    return Entry(i, j, setting.rule, order, setting.front_value.name, setting.back_value.name)


WHEELS: Final = ("second_highest", "lowest")


def build_tables(setter: Setter = house_way) -> dict[str, Any]:
    """Every pattern's entry under each wheel rule: names and display orders (shared), and per
    wheel the rows (pattern key, order, rule, front name, back name as indexes). ``setter``: the
    filed way's rule code, or a data way's rules."""
    names: dict[str, int] = {}
    orders: dict[tuple[int, ...], int] = {}

    def index(table: dict[Any, int], value: Any) -> int:
        return table.setdefault(value, len(table))

    hands = list(pattern_hands())
    keys = [pattern_key(ordered) for ordered in hands]
    wheels: dict[str, list[tuple[int, int, int, int]]] = {}
    for wheel in WHEELS:
        rules = Rules(wheel_rank=wheel)
        rows = []
        for ordered in hands:
            e = entry_of(ordered, rules, setter)
            rows.append(
                (
                    index(orders, e.order),
                    index(names, e.rule),
                    index(names, e.front_hand),
                    index(names, e.back_hand),
                )
            )
        wheels[wheel] = rows
    return {"names": list(names), "orders": list(orders), "keys": keys, "wheels": wheels}


def write_tables(
    path: Path = TABLE_FILE, setter: Setter = house_way, digest: str | None = None
) -> Path:
    """The table file: gzip of one JSON header line (names, orders, counts; for a data way its
    digest), then the pattern keys (7 bytes each: the pattern ranks) and each wheel's four
    columns (uint16, little-endian)."""
    t = build_tables(setter)
    header: dict[str, Any] = {
        "about": "House Way by rank pattern: controller/game/house_way_cache.py",
        "names": t["names"],
        "orders": [list(o) for o in t["orders"]],
        "patterns": len(t["keys"]),
        "wheels": list(WHEELS),
    }
    if digest is not None:
        header["digest"] = digest
    body = [json.dumps(header, separators=(",", ":")).encode() + b"\n", b"".join(t["keys"])]
    for wheel in WHEELS:
        for column in zip(*t["wheels"][wheel], strict=True):
            body.append(_le(array("H", column)))
    path.write_bytes(gzip.compress(b"".join(body), mtime=0))
    return path


def _le(a: array[int]) -> bytes:  # the file is little-endian wherever it is read
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


@dataclass(frozen=True, slots=True)
class PatternTable:
    """The table file for one wheel rule: pattern key → row index, and the columns (display
    order, rule, front name, back name) as indexes into ``orders`` and ``names``."""

    index: dict[bytes, int]
    columns: tuple[array[int], array[int], array[int], array[int]]
    orders: list[tuple[int, ...]]
    names: list[str]
    names_json: list[str]

    def row(self, key: bytes) -> tuple[tuple[int, ...], int, int, int] | None:
        i = self.index.get(key)
        if i is None:
            return None
        order, rule, front, back = self.columns
        return self.orders[order[i]], rule[i], front[i], back[i]

    def entry(self, key: bytes) -> Entry | None:
        row = self.row(key)
        if row is None:
            return None
        order, rule, front, back = row
        i, j = sorted(order[:2])
        return Entry(i, j, self.names[rule], order, self.names[front], self.names[back])


def table_of(entries: dict[bytes, Entry]) -> PatternTable:
    """A pattern table from entries (a data way's, built in the process)."""
    names: dict[str, int] = {}
    orders: dict[tuple[int, ...], int] = {}
    columns = (array("H"), array("H"), array("H"), array("H"))
    index: dict[bytes, int] = {}
    for row, (key, e) in enumerate(entries.items()):
        index[key] = row
        for column, value in zip(
            columns,
            (
                orders.setdefault(e.order, len(orders)),
                names.setdefault(e.rule, len(names)),
                names.setdefault(e.front_hand, len(names)),
                names.setdefault(e.back_hand, len(names)),
            ),
            strict=True,
        ):
            column.append(value)
    return PatternTable(
        index,
        columns,
        list(orders),
        list(names),
        [json.dumps(name, ensure_ascii=False) for name in names],
    )


def load_table(rules: Rules, path: Path = TABLE_FILE, digest: str | None = None) -> PatternTable:
    """The table file's rows for ``rules`` (none if the file is missing, or, with ``digest``,
    if it is another way's)."""
    try:
        raw = gzip.decompress(path.read_bytes())
    except FileNotFoundError:
        return table_of({})
    head, _, rest = raw.partition(b"\n")
    header = json.loads(head)
    if digest is not None and header.get("digest") != digest:
        return table_of({})
    n = header["patterns"]
    keys = [rest[7 * k : 7 * k + 7] for k in range(n)]
    offset = 7 * n + WHEELS.index(rules.wheel_rank) * 4 * 2 * n
    columns = tuple(
        _from_le("H", rest[offset + 2 * n * k : offset + 2 * n * (k + 1)]) for k in range(4)
    )
    names: list[str] = header["names"]
    return PatternTable(
        dict(zip(keys, range(n), strict=True)),
        columns,  # type: ignore[arg-type]
        [tuple(o) for o in header["orders"]],
        names,
        [json.dumps(name, ensure_ascii=False) for name in names],
    )


def _from_le(code: str, data: bytes) -> array[int]:
    a = array(code)
    a.frombytes(data)
    if sys.byteorder != "little":
        a.byteswap()
    return a


@dataclass
class HouseWayCache:
    """House Way entries by rank pattern for one set of rules (a wheel setting) and one way
    (``setter``: the filed way's rule code unless a data way's, controller/game/way)."""

    rules: Rules = DEFAULT_RULES
    entries: dict[bytes, Entry] = field(default_factory=dict)
    misses: int = 0
    setter: Setter = house_way
    #: At most this many entries are kept (then they are forgotten and refilled); None: all.
    limit: int | None = None

    @classmethod
    def packaged(cls, rules: Rules = DEFAULT_RULES) -> HouseWayCache:
        """With every pattern's entry from the table file."""
        table = load_table(rules)
        entries = {key: table.entry(key) for key in table.index}
        return cls(rules, {k: e for k, e in entries.items() if e is not None})

    @classmethod
    def lazy(cls, rules: Rules = DEFAULT_RULES, limit: int = 4096) -> HouseWayCache:
        """The same answers as :meth:`packaged`, each from the rule code when first asked (about
        a millisecond) and at most ``limit`` kept: a running table holds neither the 67,600
        entries (about 20 MB) nor the table file's index (about 12 MB; issue 32)."""
        return cls(rules, limit=limit)

    def entry(self, ordered: Sequence[int]) -> Entry | None:
        """The entry for seven distinct codes in ascending order; None when the hand may make a
        flush (only the rule code sets it)."""
        if flush_possible(ordered):
            return None
        key = pattern_key(ordered)
        found = self.entries.get(key)
        if found is None:
            self.misses += 1
            if self.limit is not None and len(self.entries) >= self.limit:
                self.entries.clear()  # bounded: a running table's memory stays flat
            found = self.entries[key] = entry_of(ordered, self.rules, self.setter)
        return found

    def fill(self) -> HouseWayCache:
        """Every pattern's entry (67,600; a few seconds for a data way)."""
        for ordered in pattern_hands():
            self.entry(ordered)
        return self

    def setting(self, cards: Sequence[int]) -> Setting:
        """The House Way setting of seven distinct cards (any order), as ``house_way`` gives."""
        ordered = sorted(cards)
        found = self.entry(ordered)
        if found is None:
            return self.setter(ordered, self.rules)
        return Setting.from_positions(ordered, found.i, found.j, found.rule, self.rules.wheel_high)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the House Way pattern table.")
    parser.add_argument("--write", action="store_true", help=f"write {TABLE_FILE.name}")
    args = parser.parse_args(argv)
    if args.write:
        path = write_tables()
        print(f"{path} ({path.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
