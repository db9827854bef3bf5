"""``paigow-table house-way``: the House Way setting of seven cards, one hand or a stream."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
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


def house_way_lines(lines: Iterable[str], out: TextIO, rules: Rules) -> int:
    """Stream hands (one per line) to JSON lines; a bad line gives {"line", "error"} and goes on."""
    failed = 0
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            cards = text.replace(",", " ").split()
            if len(cards) != 7:
                raise CardError(f"expected 7 cards, got {len(cards)}")
            record: dict[str, object] = _setting_json(cards, rules)
        except (CardError, HouseWayError) as exc:
            failed += 1
            record = {"line": number, "error": str(exc)}
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()  # a line out for every line in: callers may pipe hands one at a time
    return 1 if failed else 0


def cmd_house_way(args: argparse.Namespace) -> int:
    rules = _rules_from(args)
    if not args.cards:
        return house_way_lines(sys.stdin, sys.stdout, rules)
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
