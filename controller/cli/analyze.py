"""`paigow-table analyze`: the game's math, computed (docs/rules.md §9).

``register(sub)`` adds the ``analyze`` subcommand to the top-level parser; each sub-subcommand
prints a table for a person, or one JSON document with ``--json``. Progress goes to stderr, only
when it is a terminal."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from controller.exits import Subcommands
from controller.game.paytables import (
    CHAN_CHU_PAYTABLES,
    JACKS_BEAT_PAYTABLES,
    PaytableError,
    chan_chu_paytable,
    jacks_beat_paytable,
)

#: The base game's strategies (controller.analysis.base_game.STRATEGIES; tested equal).
STRATEGIES = ("optimal", "house-way")
DEFAULT_WORKERS = max(1, os.cpu_count() or 1)


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """A command of analyze_commands, imported when it runs (the CLI starts without numpy-like
    weight: the analysis modules load only for ``analyze``)."""

    def run(args: argparse.Namespace) -> int:
        from controller.cli import analyze_commands

        code: int = getattr(analyze_commands, name)(args)
        return code

    run.__name__ = name
    return run


def _positive(text: str) -> int:
    value = int(text.replace("_", "").replace(",", ""))
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text.replace("_", "").replace(",", ""))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _chan_chu_name(text: str) -> str:
    if text.lower() == "all":
        return "all"
    try:
        return chan_chu_paytable(text).name
    except PaytableError as exc:
        raise argparse.ArgumentTypeError(f"{exc} or all") from None


def _jacks_beat_name(text: str) -> str:
    if text.lower() == "all":
        return "all"
    try:
        return jacks_beat_paytable(text).name
    except PaytableError as exc:
        raise argparse.ArgumentTypeError(f"{exc} or all") from None


def _common(p: argparse.ArgumentParser, *, seeded: bool) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument(
        "--workers",
        type=_positive,
        default=DEFAULT_WORKERS,
        help=f"worker processes (default {DEFAULT_WORKERS}, the cores here)",
    )
    if seeded:
        p.add_argument("--seed", type=int, default=1, help="seed of the deals (default 1)")


def register(sub: Subcommands) -> None:
    """Add ``analyze`` and its sub-subcommands to the top-level parser's subcommands."""
    analyze = sub.add_parser(
        "analyze",
        help="the game's math, computed (docs/rules.md §9)",
        description="The game's math, computed by the engine's own rules (docs/rules.md §9).",
    )
    what = analyze.add_subparsers(dest="analysis", required=True, metavar="ANALYSIS")
    _add_chan_chu(what)
    _add_dealer_jacks(what)
    _add_base_game(what)
    _add_jacks_beat(what)
    _add_ace_high(what)
    _add_report(what)


def _add_chan_chu(what: Subcommands) -> None:
    """``analyze chan-chu``."""
    p = what.add_parser(
        "chan-chu",
        help="Chan Chu exactly, over all 154,143,080 hands",
        description="Every line's combinations, probability and return, the house edge, and "
        "the Envy bonus's value per other player (PT3–PT5).",
    )
    p.add_argument(
        "--paytable",
        type=_chan_chu_name,
        default="all",
        help=f"{', '.join(CHAN_CHU_PAYTABLES)} or all (default all)",
    )
    _common(p, seeded=False)
    p.set_defaults(func=_command("cmd_chan_chu"))


def _add_dealer_jacks(what: Subcommands) -> None:
    """``analyze dealer-jacks``."""
    p = what.add_parser(
        "dealer-jacks",
        help="the dealer's chance of two or more Jacks, counted and in closed form",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_command("cmd_dealer_jacks"))


def _add_base_game(what: Subcommands) -> None:
    """``analyze base-game``."""
    p = what.add_parser(
        "base-game",
        help="the Pai Gow wager by Monte Carlo",
        description="Win, push and lose rates and the house edge with its 95%% interval, split "
        "by the dealer's class; the dealer sets by the House Way.",
    )
    p.add_argument("--rounds", type=_positive, default=200_000, help="default 200,000")
    p.add_argument(
        "--house-way",
        metavar="NAME|FILE",
        help="the way the dealer (and a house-way player) sets by: a shipped way "
        "(dealer-open, classic) or a way file (default: the filed way's rule code)",
    )
    p.add_argument(
        "--strategy",
        choices=STRATEGIES,
        default="optimal",
        help="optimal: the best reply to the dealer's exposed setting; house-way: the player "
        "sets by the House Way (default optimal)",
    )
    p.add_argument(
        "--ace-high-pushes",
        action="store_true",
        help="the rule switch ace_high_pushes_pai_gow (docs/rules.md §5; default off)",
    )
    _common(p, seeded=True)
    p.set_defaults(func=_command("cmd_base_game"))


def _add_jacks_beat(what: Subcommands) -> None:
    """``analyze jacks-beat``."""
    p = what.add_parser(
        "jacks-beat",
        help="Jacks Beat exactly (and by Monte Carlo with --rounds)",
        description="Exact: the census of the player's hands, conditioned on the dealer's two "
        "Jacks among the 46 cards left. With --rounds N, also N Monte Carlo rounds as a check.",
    )
    p.add_argument(
        "--paytable",
        type=_jacks_beat_name,
        default="B",
        help=f"{', '.join(JACKS_BEAT_PAYTABLES)} or all "
        "(default B, the one the outside analysis analyses)",
    )
    p.add_argument(
        "--rounds", type=_non_negative, default=0, help="Monte Carlo rounds (default 0: none)"
    )
    _common(p, seeded=True)
    p.set_defaults(func=_command("cmd_jacks_beat"))


def _add_ace_high(what: Subcommands) -> None:
    """``analyze ace-high``."""
    p = what.add_parser(
        "ace-high",
        help="Push Ace High by Monte Carlo",
        description="Per line probability and return, and the house edge with its interval.",
    )
    p.add_argument("--rounds", type=_positive, default=1_000_000, help="default 1,000,000")
    p.add_argument(
        "--exact-marginals",
        action="store_true",
        help="also the exact single-hand chances of Ace-high pai gow (takes the census)",
    )
    _common(p, seeded=True)
    p.set_defaults(func=_command("cmd_ace_high"))


def _add_report(what: Subcommands) -> None:
    """``analyze report``."""
    p = what.add_parser(
        "report",
        help="write docs/math.md: every figure beside the sources'",
    )
    p.add_argument("--output", default="docs/math.md", help="default docs/math.md")
    p.add_argument(
        "--rounds",
        type=_positive,
        default=2_000_000,
        help="base game rounds per strategy (default 2,000,000)",
    )
    p.add_argument(
        "--side-rounds",
        type=_positive,
        default=2_000_000,
        help="Push Ace High rounds (default 2,000,000)",
    )
    _common(p, seeded=True)
    p.set_defaults(func=_command("cmd_report"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m controller.cli.analyze …``: the same commands without the top-level CLI."""
    parser = argparse.ArgumentParser(prog="python -m controller.cli.analyze")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["analyze", *(sys.argv[1:] if argv is None else argv)])
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
