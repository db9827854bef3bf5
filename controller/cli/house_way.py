"""``paigow-table house-way``: the House Way setting of seven cards, one hand or a stream."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from controller.game.cards import CardError, card_texts, parse_cards
from controller.game.house_way import HouseWayError, house_way
from controller.game.setting import Rules


def _rules_from(args: argparse.Namespace) -> Rules:
    return Rules(wheel_rank=args.wheel)


def _setting_json(cards: Sequence[object], rules: Rules) -> dict[str, object]:
    parsed = parse_cards([str(c) for c in cards])
    setting = house_way(parsed, rules)
    return {"cards": card_texts(parsed), **setting.to_dict()}


def _slow_record(number: int, text: str, rules: Rules) -> tuple[str, bool]:
    """One line through the rule code: its JSON line and whether it failed."""
    try:
        cards = text.replace(",", " ").split()
        if len(cards) != 7:
            raise CardError(f"expected 7 cards, got {len(cards)}")
        record: dict[str, object] = _setting_json(cards, rules)
        failed = False
    except (CardError, HouseWayError) as exc:
        record = {"line": number, "error": str(exc)}
        failed = True
    return json.dumps(record, ensure_ascii=False) + "\n", failed


class _Stream:
    """JSON lines for hand lines: the rank-pattern table (controller/game/house_way_cache.py)
    and output strings from tables for the 96 % of hands that cannot make a flush, the rule code
    (the same output, byte for byte) for the rest and for any line it does not simply read."""

    def __init__(self, rules: Rules) -> None:
        from controller.game.cards import DECK
        from controller.game.house_way_cache import PATTERN_RANKS, SUITS, load_table

        self.rules = rules
        self.ranks = PATTERN_RANKS
        self.suits = SUITS
        self.codes = {str(c): int(c) for c in DECK}
        self.quoted = [json.dumps(str(c)) for c in DECK]
        table = load_table(rules)
        self.index = table.index
        self.columns = table.columns
        self.orders = table.orders
        self.names = table.names_json
        self._quoted_names: dict[str, str] = {}
        self._line = self._make_line()

    def _name(self, text: str | None) -> str:
        q = self._quoted_names.get(text or "")
        if q is None:
            q = self._quoted_names[text or ""] = json.dumps(text, ensure_ascii=False)
        return q

    def _complete(self, hand: list[int]) -> str:
        """A hand that may make a flush: the rule code's setting, written the same way."""
        from controller.game.setting import display_order

        setting = house_way(hand, self.rules)
        q = self.quoted
        return "".join(
            (
                '{"cards": [',
                ", ".join([q[x] for x in hand]),
                '], "front": [',
                ", ".join([q[x] for x in display_order(setting.front)]),
                '], "back": [',
                ", ".join([q[x] for x in display_order(setting.back)]),
                '], "rule": ',
                self._name(setting.rule),
                ', "front_hand": ',
                self._name(setting.front_value.name),
                ', "back_hand": ',
                self._name(setting.back_value.name),
                "}\n",
            )
        )

    def line(self, text: str) -> str | None:
        """The JSON line for a hand, or None: the rule code decides (errors included)."""
        return self._line(text)

    def _make_line(self) -> Callable[[str], str | None]:
        # One closure over locals: the per-hand path reads no attribute (it runs 10⁵ times a
        # second, where an attribute look-up is a few per cent).
        code = self.codes.__getitem__
        get_row = self.index.get
        order_of, rule_of, front_of, back_of = self.columns
        orders, names, q = self.orders, self.names, self.quoted
        suits, ranks = self.suits, self.ranks
        complete = self._complete
        join = "".join

        def line(text: str) -> str | None:
            tokens = (text.replace(",", " ") if "," in text else text).split()
            if len(tokens) != 7:
                return None
            try:
                hand = list(map(code, tokens))
            except KeyError:
                return None
            ordered = bytes(sorted(hand))
            if len(set(ordered)) != 7:
                return None
            s = ordered.translate(suits)
            if max(s.count(0), s.count(1), s.count(2), s.count(3)) + s.count(4) >= 5:
                return complete(hand)  # it may make a flush: the rule code sets it
            row = get_row(ordered.translate(ranks))
            if row is None:
                return None
            a, b, c, d, e, f, g = orders[order_of[row]]
            o = [q[x] for x in ordered]
            return join(
                (
                    '{"cards": [',
                    ", ".join([q[x] for x in hand]),
                    '], "front": [',
                    o[a],
                    ", ",
                    o[b],
                    '], "back": [',
                    o[c],
                    ", ",
                    o[d],
                    ", ",
                    o[e],
                    ", ",
                    o[f],
                    ", ",
                    o[g],
                    '], "rule": ',
                    names[rule_of[row]],
                    ', "front_hand": ',
                    names[front_of[row]],
                    ', "back_hand": ',
                    names[back_of[row]],
                    "}\n",
                )
            )

        return line


def house_way_lines(lines: Iterable[str], out: TextIO, rules: Rules, *, flush: bool = True) -> int:
    """Stream hands (one per line) to JSON lines; a bad line gives {"line", "error"} and goes on."""
    stream = _Stream(rules)
    failed = 0
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        record = stream.line(text)
        if record is None:
            record, bad = _slow_record(number, text, rules)
            failed += bad
        out.write(record)
        if flush:
            out.flush()
    return 1 if failed else 0


def house_way_stdin(rules: Rules) -> int:
    """``house-way`` on stdin: whatever input is there is answered in one write, so a stream of
    hands is written in blocks while a person (or a program) typing one hand at a time gets each
    answer at once."""
    stream = _Stream(rules)
    fd = sys.stdin.fileno()
    out = sys.stdout
    failed = 0
    number = 0
    rest = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if chunk:
            data = rest + chunk
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            lines = data[: cut - 1].decode("utf-8", errors="replace").split("\n") if cut else []
        else:
            lines = [rest.decode("utf-8", errors="replace")] if rest else []
        written: list[str] = []
        line = stream.line
        for raw in lines:
            number += 1
            record = line(raw)
            if record is None:
                text = raw.strip()
                if not text or text.startswith("#"):
                    continue
                record, bad = _slow_record(number, text, rules)
                failed += bad
            written.append(record)
        if written:
            out.write("".join(written))
            out.flush()
        if not chunk:
            return 1 if failed else 0


def cmd_house_way(args: argparse.Namespace) -> int:
    rules = _rules_from(args)
    if not args.cards:
        return house_way_stdin(rules)
    try:
        if len(args.cards) != 7:
            raise CardError(f"expected 7 cards, got {len(args.cards)}")
        record = _setting_json(args.cards, rules)
    except CardError as exc:
        print(f"paigow-table house-way: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(record, ensure_ascii=False))
        return 0
    front, back = " ".join(record["front"]), " ".join(record["back"])  # type: ignore[arg-type]
    print(f"Front  {front:<16} {record['front_hand']}")
    print(f"Back   {back:<16} {record['back_hand']}")
    print(f"Rule   {record['rule']}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "house-way",
        help="set seven cards by the House Way",
        description=(
            "Set seven cards by the House Way (docs/rules.md §7). With cards: print the setting. "
            "Without: read hands from stdin, one per line, and write one JSON line per hand."
        ),
    )
    p.add_argument("cards", nargs="*", help="seven cards, e.g. As Kd 7h 5s 3c 2d JK")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_house_way)
