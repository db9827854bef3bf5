"""The exit statuses every ``paigow-table`` command keeps (docs/audit.md, "Exit statuses"), so a
script can tell a finding from a typo: 0 nothing found, 1 a finding, 2 bad arguments, 65 the
input is not what the command reads (not a journal, not a way file), 66 it does not exist,
74 it cannot be read (permissions, an I/O error). Anything but 0 and 1 is one line on stderr."""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, NoReturn, Protocol
from urllib.parse import quote

EXIT_OK = 0
EXIT_FINDING = 1
EXIT_USAGE = 2  # argparse's own status for a bad command line
EXIT_DATAERR = 65  # sysexits EX_DATAERR: not a journal, not a way file, damaged
EXIT_NOINPUT = 66  # sysexits EX_NOINPUT: no such file
EXIT_IOERR = 74  # sysexits EX_IOERR: permissions, an I/O error
EXIT_UNAVAILABLE = 69  # sysexits EX_UNAVAILABLE: a port it needs is taken, a service is down

#: The exit statuses, in every command's --help (docs/audit.md, "Exit statuses").
EXIT_STATUSES = (
    "exit statuses: 0 nothing found; 1 a finding (what the command looks for is wrong, or "
    "absent); 2 bad arguments; 65 the input is not what the command reads (not a journal, not "
    "a way file); 66 no such file; 69 a port it needs is in use, or a database it needs is "
    "down; 74 it cannot be read. "
    "Anything but 0 and 1 is one line on stderr (docs/audit.md, 'Exit statuses')."
)


#: A command's verbs (``house-way check FILE``): given the command's words, the parser that
#: takes them instead and the words it gets, or None when no verb is named.
Verbs = Callable[[list[str]], "tuple[argparse.ArgumentParser, list[str]] | None"]


class Subcommands(Protocol):
    """What a command registers its subcommands on: ``ArgumentParser.add_subparsers()``'s
    answer, by what it does (argparse names its class only privately)."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


class Parser(argparse.ArgumentParser):
    """argparse's parser whose usage error is one line on stderr, exit 2 (the rule of every
    status but 0 and 1), naming the ``--help`` that shows the usage, and whose ``--help`` ends
    with the exit statuses unless it says its own. Subcommands' parsers are of the same class
    (argparse makes them of their parent's), so every command's are, through argparse's public
    constructor alone; so ``verbs`` is also a keyword of ``add_parser``: a command line that
    names a verb is parsed by the verb's own parser (its options anywhere, its own --help)."""

    def __init__(self, *args: Any, verbs: Verbs | None = None, **kwargs: Any) -> None:
        kwargs["epilog"] = kwargs.get("epilog") or EXIT_STATUSES
        super().__init__(*args, **kwargs)
        self.verbs = verbs

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed: tuple[argparse.Namespace, list[str]]
        if self.verbs is None:
            parsed = super().parse_known_args(args, namespace)
            return parsed
        words = list(sys.argv[1:] if args is None else args)
        verb = self.verbs(words)
        if verb is not None:
            parser, rest = verb
            parsed = parser.parse_known_args(rest, namespace)
            return parsed
        parsed = super().parse_known_args(words, namespace)
        return parsed

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class CliError(Exception):
    """A command that cannot do its work: ``main`` prints the one line and exits ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


#: The tables a table's journal has (controller/journal/maintenance.py's COLUMNS, by name).
JOURNAL_TABLES = frozenset({"meta", "rounds", "events", "outbox"})


def existing_file(path: str, what: str) -> str:
    """``path`` if it is a file that can be opened; otherwise a :class:`CliError` naming it."""
    if not os.path.exists(path):
        raise CliError(EXIT_NOINPUT, f"{what} {path}: no such file")
    if os.path.isdir(path):
        raise CliError(EXIT_NOINPUT, f"{what} {path}: is a directory, not a file")
    try:
        open(path, "rb").close()  # readable by this user, not only present
    except OSError as exc:
        raise CliError(EXIT_IOERR, f"{what} {path}: cannot be read: {exc.strerror}") from None
    return path


def file_refusal(exc: OSError, what: str) -> CliError:
    """The one-line refusal of a file the command could not open: 66 missing (or a directory
    where a file was meant), 74 anything else (permissions, an I/O error)."""
    name = exc.filename if exc.filename is not None else ""
    if isinstance(exc, FileNotFoundError | IsADirectoryError | NotADirectoryError):
        why = "is a directory, not a file" if isinstance(exc, IsADirectoryError) else "no such file"
        return CliError(EXIT_NOINPUT, f"{what} {name}: {why}")
    return CliError(EXIT_IOERR, f"{what} {name}: cannot be read: {exc.strerror or exc}")


def existing_journal(path: str) -> str:
    """``path`` if it is a table's journal (an SQLite file with the journal's tables), read
    without changing it; otherwise a :class:`CliError`: 66 missing, 74 unreadable, 65 not a
    journal. Commands check this first, so a typo never creates an empty journal."""
    existing_file(path, "journal")
    uri = f"file:{quote(os.fspath(path))}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10.0)) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    except sqlite3.DatabaseError as exc:
        raise CliError(EXIT_DATAERR, f"journal {path}: not a table's journal ({exc})") from None
    missing = JOURNAL_TABLES - tables
    if missing:
        raise CliError(
            EXIT_DATAERR,
            f"journal {path}: not a table's journal (no {', '.join(sorted(missing))} table)",
        )
    return path


def iso_time(text: str) -> str:
    """An argparse type: an ISO 8601 time (UTC unless it says otherwise) as the journal writes
    times, so text order is time order. ``yesterday`` is refused with an example."""
    import argparse

    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 time: {text!r} (e.g. 2026-11-24 or 2026-11-24T08:00, UTC)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def port_free(port: int, option: str, host: str = "127.0.0.1") -> None:
    """A :class:`CliError` (69) naming the port and the option that moves it, when something
    already listens there: said at once, before anything starts (0 is any free port)."""
    import errno
    import socket

    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise CliError(EXIT_UNAVAILABLE, f"cannot listen on {host}:{port}: {exc}") from None
            raise CliError(
                EXIT_UNAVAILABLE,
                f"port {port} on {host} is in use (another demo, or a table?): "
                f"choose another with {option} {port + 1}",
            ) from None
