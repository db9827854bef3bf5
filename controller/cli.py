"""`paigow-table`: the command line. Each subcommand lives with the code it drives."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import TextIO

from controller import __version__
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


def _add_house_way(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def build_parser(
    registrars: Iterable[
        Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]
    ] = (),
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="paigow-table", description="Dealer Open Pai Gow table controller"
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--wheel",
        choices=["second_highest", "lowest"],
        default="second_highest",
        help="rank of the A-2-3-4-5 straight (docs/rules.md §3; default second_highest)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_house_way(sub)
    for register in registrars:
        register(sub)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    import asyncio

    from controller.wiring import run_from_config

    return asyncio.run(run_from_config(args.config))


def cmd_check_config(args: argparse.Namespace) -> int:
    from controller.config.check import check_config_main

    return check_config_main(args.file)


def cmd_demo(args: argparse.Namespace) -> int:
    import asyncio

    from simulators.demo import run_demo

    try:
        return asyncio.run(run_demo(args))
    except KeyboardInterrupt:  # Ctrl-C before the daemon took over SIGINT (or after it)
        print("demo stopped", file=sys.stderr, flush=True)
        return 130


def _add_daemon_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from simulators.demo import add_arguments

    p = sub.add_parser("run", help="run the table daemon", description="Run the table daemon.")
    p.add_argument("--config", required=True, help="the table's TOML config file")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser(
        "check-config",
        help="check a config file and print every error",
        description="Check a config file: every error with its key and what was expected.",
    )
    p.add_argument("file")
    p.set_defaults(func=cmd_check_config)
    p = sub.add_parser(
        "demo",
        help="the daemon with simulated devices, dealing rounds you can watch",
        description="Run the daemon with a simulated shuffler and RNG box over ptys.",
    )
    add_arguments(p)
    p.set_defaults(func=cmd_demo)


def _registrars() -> list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]]:
    """Subcommands that live in other modules, imported only when the CLI starts."""
    from controller.analysis.cli import register as add_analysis_commands
    from controller.mqtt.feed import register as add_mqtt_commands

    return [_add_daemon_commands, add_analysis_commands, add_mqtt_commands]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser(_registrars())
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
