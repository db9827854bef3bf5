"""``paigow-table``: the one entry point; each group of subcommands registers itself."""

from __future__ import annotations

import argparse
import sqlite3
import sys
from collections.abc import Callable, Iterable, Sequence

from controller.cli import house_way, table
from controller.exits import (
    EXIT_DATAERR,
    CliError,
    Parser,
    Subcommands,
    file_refusal,
)


class _Version(argparse.Action):
    """``--version``: the installed version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from controller import __version__

        print(f"{parser.prog} {__version__}", flush=True)  # to stdout, as argparse's own
        parser.exit()


def build_parser(
    registrars: Iterable[Callable[[Subcommands], None]] = (),
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = Parser(
        prog="paigow-table",
        description="Dealer Open Pai Gow table controller",
    )
    parser.add_argument("--version", action=_Version)
    parser.add_argument(
        "--wheel",
        choices=["second_highest", "lowest"],
        default="second_highest",
        help="rank of the A-2-3-4-5 straight (docs/rules.md §3; default second_highest)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    house_way.register(sub)
    for register in registrars:
        register(sub)
    return parser  # every command's --help ends with the exit statuses (exits.Parser)


def _registrars() -> list[Callable[[Subcommands], None]]:
    """Subcommands that live in other modules, imported only when the CLI starts."""
    from controller.cli import analyze, audit, feed_key, journal, monitor
    from pit import cli as pit  # the casino's side: its own package and service (docs/pit.md)

    return [
        table.register,
        journal.register,
        audit.register,
        analyze.register,
        monitor.register,
        feed_key.register,
        pit.register,
    ]


def command_parser() -> argparse.ArgumentParser:
    """The whole command line, every subcommand registered: what ``main`` parses with."""
    return build_parser(_registrars())


def main(argv: Sequence[str] | None = None) -> int:
    # A sealed installation holds every .pyc it runs (controller/software.py): never add one.
    sys.dont_write_bytecode = True
    parser = command_parser()
    args = parser.parse_args(argv)
    name = " ".join(
        str(getattr(args, a)) for a in ("command", "action", "pit_command") if hasattr(args, a)
    )
    try:
        code: int = args.func(args)
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    except CliError as exc:
        return _refuse(name, str(exc), exc.code)
    except OSError as exc:  # a path no command checked first: still one line, 66 or 74
        if exc.filename is None:
            raise
        refusal = file_refusal(exc, "file")
        return _refuse(name, str(refusal), refusal.code)
    except sqlite3.DatabaseError as exc:
        return _refuse(name, f"not a table's journal, or a damaged one: {exc}", EXIT_DATAERR)
    return code


def _refuse(name: str, message: str, code: int) -> int:
    """One line on stderr, no traceback, and the status that says why (controller/exits)."""
    print(f"paigow-table {name}: {message}", file=sys.stderr, flush=True)
    return code
