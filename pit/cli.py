"""``paigow-table pit …``: the casino's side (docs/pit.md).

paigow-table pit run --config /etc/paigow-pit/pit.toml
paigow-table pit check-config /etc/paigow-pit/pit.toml
paigow-table pit migrate --config pit.toml
paigow-table pit export --config pit.toml --table PG-07 --output PG-07.feed.jsonl
paigow-table pit shift --config pit.toml [--shift '2026-11-25 14:00'] [--csv]
paigow-table pit report --config pit.toml [--shift …] --output report.json
paigow-table pit demo --tables 6
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.exits import Subcommands
    from pit.config import PitConfig
    from pit.pagedb import PageStore


def register(sub: Subcommands) -> None:
    pit = sub.add_parser(
        "pit",
        help="the casino's pit: every table's feed into a database, the pit page",
        description="The casino side: ingest every table's MQTT feed (docs/pit.md).",
    )
    psub = pit.add_subparsers(dest="pit_command", required=True, metavar="PIT_COMMAND")
    p = psub.add_parser("run", help="run the pit (ingest and page) until SIGTERM")
    p.add_argument("--config", required=True)
    p.set_defaults(func=cmd_run)
    p = psub.add_parser(
        "check-config", help="every error of a pit config at once (1 with errors, 66 no file)"
    )
    p.add_argument("file")
    p.set_defaults(func=cmd_check_config)
    p = psub.add_parser("migrate", help="bring the pit's database to the current schema")
    p.add_argument("--config", required=True)
    p.set_defaults(func=cmd_migrate)
    p = psub.add_parser(
        "export", help="a table's copy of the feed, for `paigow-table audit verify --feed`"
    )
    p.add_argument("--config", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--output", required=True, help="file to write ('-' for stdout)")
    p.set_defaults(func=cmd_export)
    p = psub.add_parser("shift", help="the shift's numbers per table and dealer")
    p.add_argument("--config", required=True)
    p.add_argument("--shift", help="'YYYY-MM-DD HH:MM' (default: the latest)")
    p.add_argument("--csv", action="store_true", help="CSV instead of JSON lines")
    p.set_defaults(func=cmd_shift)
    p = psub.add_parser("report", help="the signed end-of-shift report")
    p.add_argument("--config", required=True)
    p.add_argument("--shift")
    p.add_argument("--output", required=True)
    p.set_defaults(func=cmd_report)
    p = psub.add_parser("verify-report", help="check a report's signature")
    p.add_argument("--config", required=True)
    p.add_argument("report")
    p.set_defaults(func=cmd_verify_report)
    p = psub.add_parser(
        "demo", help="a pit of live simulated tables: real daemons, simulated devices"
    )
    add_demo_arguments(p)
    p.set_defaults(func=cmd_demo)


def add_demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tables", type=int, default=6, help="how many tables (default 6)")
    p.add_argument("--interval", type=float, default=6.0, help="seconds between rounds")
    p.add_argument("--rounds", type=int, default=None, help="stop after N rounds per table")
    p.add_argument("--http-port", type=int, default=8090, help="the pit page's port (0: any)")
    p.add_argument("--database", default="", help="postgresql://… (default: SQLite in a temp dir)")


def _config(path: str) -> PitConfig:
    """The config, checked as ``pit check-config`` checks it (every file it names read): every
    error on stderr and exit 78 (EX_CONFIG, which the unit does not restart on)."""
    from controller.exits import existing_file
    from pit.config_check import check_pit_config

    existing_file(path, "config")  # 66 or 74, one line: a typo is not a config error
    result = check_pit_config(path)
    if result.config is None:
        for issue in result.errors:
            print(f"pit: {issue}", file=sys.stderr)
        raise SystemExit(78)
    return result.config


def cmd_check_config(args: argparse.Namespace) -> int:
    from pit.config_check import check_pit_config_main

    return check_pit_config_main(args.file)


def cmd_run(args: argparse.Namespace) -> int:
    from controller import systemd
    from pit.config import PitConfigError, configure_logging
    from pit.service import Pit, run_pit

    config = _config(args.config)
    configure_logging(config.log_level)

    def ready(pit: Pit) -> None:
        url = pit.web.url if pit.web is not None else "no page"
        systemd.ready(f"ingesting {config.site.root}+/#; {url}")

    try:
        return asyncio.run(run_pit(config, ready))
    except KeyboardInterrupt:
        return 130
    except (PitConfigError, OSError) as exc:  # a file gone since the check: one line
        print(f"pit: {exc}", file=sys.stderr)
        return 78


def cmd_migrate(args: argparse.Namespace) -> int:
    from pit.store import migrate, redact

    config = _config(args.config)
    with _database(config.database_url):
        applied = migrate(config.database_url)
    print(f"{redact(config.database_url)}: applied {', '.join(applied) or 'nothing (current)'}")
    return 0


def _store(config: PitConfig) -> PageStore:
    """The pit's database for a command that reads it: one it lacks (a SQLite file that is not
    there) is 66, one it cannot reach (the server down, the database missing on it, no
    permission) is 69 with the database's own reason, one line each, never a traceback."""
    from controller.exits import EXIT_NOINPUT, CliError
    from pit.db import sqlite_file
    from pit.pagedb import PageStore

    url = config.database_url
    path = sqlite_file(url)
    if path is not None and not path.is_file():
        raise CliError(EXIT_NOINPUT, f"database {path}: no such file (pit migrate makes it)")
    with _database(url):  # it reads what was stored: no keys needed (nor warned about)
        return PageStore(url)


@contextlib.contextmanager
def _database(url: str) -> Iterator[None]:
    """The database's failures as the command's one line and status 69 (module ``_store``)."""
    from controller.exits import EXIT_UNAVAILABLE, CliError
    from pit.db import database_down, down_reason

    try:
        yield
    except Exception as exc:
        if not database_down(exc):
            raise
        raise CliError(EXIT_UNAVAILABLE, down_reason(url, exc)) from None


def cmd_export(args: argparse.Namespace) -> int:
    config = _config(args.config)
    store = _store(config)
    with _database(config.database_url), contextlib.closing(store):
        n = 0
        out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")  # noqa: SIM115
        with out if out is not sys.stdout else _nullcontext():
            for line in store.pages.export_lines(args.table):
                out.write(line + "\n")
                n += 1
    print(f"{args.table}: {n} messages", file=sys.stderr)
    return 0 if n else 1


class _nullcontext:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def cmd_shift(args: argparse.Namespace) -> int:
    from pit import shift

    config = _config(args.config)
    store = _store(config)
    with _database(config.database_url), contextlib.closing(store):
        chosen = args.shift or next(iter(shift.shifts(store.pages)), "")
        rows = shift.numbers(store.pages, chosen)
    if args.csv:
        sys.stdout.write(shift.to_csv(rows))
    else:
        for row in rows:
            print(json.dumps(row))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pit import shift
    from pit.config import read_hex_key

    config = _config(args.config)
    if config.shift.report_key_file is None:
        print("pit report: set [shift] report_key_file", file=sys.stderr)
        return 78
    key = read_hex_key(config.shift.report_key_file)
    store = _store(config)
    with _database(config.database_url), contextlib.closing(store):
        chosen = args.shift or next(iter(shift.shifts(store.pages)), "")
        body = shift.report(
            store.pages, chosen, key, config.shift.report_key_file.name, config.site.id
        )
    Path(args.output).write_text(json.dumps(body, indent=1) + "\n", encoding="utf-8")
    print(f"shift {chosen}: {len(body['numbers'])} rows, signed", file=sys.stderr)
    return 0


def cmd_verify_report(args: argparse.Namespace) -> int:
    from controller.exits import EXIT_DATAERR, CliError, existing_file
    from pit import shift
    from pit.config import read_hex_key

    existing_file(args.report, "report")  # the argument first: a typo is 66, whatever the config
    config = _config(args.config)
    if config.shift.report_key_file is None:
        print("pit verify-report: set [shift] report_key_file", file=sys.stderr)
        return 78
    try:
        body = json.loads(Path(args.report).read_bytes())
        if not isinstance(body, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:  # JSON's errors and UTF-8's are ValueErrors
        raise CliError(EXIT_DATAERR, f"{args.report}: not a shift report: {exc}") from None
    ok = shift.verify_report(read_hex_key(config.shift.report_key_file), body)
    print("report signature ok" if ok else "report signature WRONG: altered or another key")
    return 0 if ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from controller.exits import port_free
    from simulators.pit_demo import run_demo

    port_free(args.http_port, "--http-port")

    try:
        with _database(args.database or "sqlite://"):  # a --database that is down: 69
            return asyncio.run(run_demo(args))
    except KeyboardInterrupt:
        return 130
