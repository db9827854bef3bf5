"""``paigow-table journal check|salvage|archive|verify-archive``: looking after the journal file
(docs/journal.md). Imports the maintenance module only when a command runs."""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys

from controller.exits import (
    EXIT_DATAERR,
    EXIT_IOERR,
    EXIT_USAGE,
    CliError,
    Subcommands,
    existing_file,
    existing_journal,
    file_refusal,
)


def cmd_check(args: argparse.Namespace) -> int:
    from controller.journal.maintenance import check_journal

    existing_file(args.journal, "journal")  # a directory is 66 with the rest, not an I/O error
    result = check_journal(args.journal)
    print(result.summary(), file=sys.stdout if result.ok else sys.stderr, flush=True)
    return result.status


def cmd_salvage(args: argparse.Namespace) -> int:
    from controller.journal import JournalError
    from controller.journal.maintenance import (
        EXIT_DAMAGED,
        check_journal,
        print_progress,
        salvage_journal,
    )

    existing_file(args.journal, "journal")  # a damaged one is what salvage is for
    try:
        report = salvage_journal(args.journal, args.out, progress=print_progress())
    except JournalError as exc:
        print(f"salvage: {exc}", file=sys.stderr, flush=True)
        return EXIT_DAMAGED
    for line in report.lines():
        print(line, flush=True)
    after = check_journal(args.out)
    print(after.summary(), flush=True)
    return after.status


def cmd_archive(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime, timedelta
    from pathlib import Path

    from controller.journal import Journal
    from controller.journal.maintenance import archive_rounds

    existing_journal(args.journal)  # a typo must not create an empty journal
    _its_table(args.journal, args.table_id)
    directory = Path(args.to) if args.to else Path(args.journal).parent / "archive"
    before = datetime.now(UTC) - timedelta(days=args.older_than_days)
    with Journal.open(args.journal, args.table_id) as journal:
        report = archive_rounds(journal, before=before, directory=directory)
    for path in report.files:
        print(path, flush=True)
    applied = datetime.fromisoformat(report.cutoff.replace("Z", "+00:00"))
    floored = " (retention keeps at least a day)" if applied < before else ""
    print(
        f"archived {report.rounds} rounds and {report.events} events opened before "
        f"{applied:%Y-%m-%d %H:%M:%S} UTC{floored} into {len(report.files)} file(s) in {directory}"
        + (
            f"; {report.kept_pending} kept: their messages wait for the broker"
            if report.kept_pending
            else ""
        ),
        flush=True,
    )
    return 0


def _its_table(journal: str, table_id: str) -> None:
    """A usage error (2) when the journal is another table's: archiving under a table id it
    does not hold would find nothing and write an empty trail under the wrong name."""
    uri = f"file:{journal}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        held = {
            str(k).rpartition("/")[2]
            for (k,) in conn.execute("SELECT key FROM meta WHERE key LIKE '%/%'")
        } | {str(t) for (t,) in conn.execute("SELECT DISTINCT table_id FROM rounds")}
    if held and table_id not in held:
        raise CliError(
            EXIT_USAGE,
            f"journal {journal} is table {', '.join(sorted(held))}'s, not {table_id}'s "
            "(--table-id)",
        )


def cmd_verify_archive(args: argparse.Namespace) -> int:
    from controller.journal.maintenance import verify_archive

    key = None
    if args.key_file:
        from controller.journal.checkpoints import read_hex_key

        try:
            key = read_hex_key(args.key_file)
        except OSError as exc:
            raise file_refusal(exc, "key file") from None
        except ValueError as exc:
            raise CliError(EXIT_DATAERR, f"key file {args.key_file}: {exc}") from None
    if args.journal:
        existing_journal(args.journal)
    for name in args.files:
        existing_file(name, "archive")
    worst = 0
    for name in args.files:
        if args.journal:  # also: the journal's chained archived event names it and its rows
            from controller.journal.audit import check_archive

            ok, line = check_archive(args.journal, name, key)
        else:
            ok, line = verify_archive(name, key)
        print(line, file=sys.stdout if ok else sys.stderr, flush=True)
        worst = worst or (0 if ok else 1)
    return worst


def cmd_backup(args: argparse.Namespace) -> int:
    from controller.audit import RulesReplay
    from controller.journal.maintenance import backup_journal

    existing_journal(args.journal)
    try:
        report = backup_journal(args.journal, args.to, keep=args.keep, replay=RulesReplay())
    except (OSError, sqlite3.Error) as exc:
        raise CliError(EXIT_IOERR, f"cannot copy {args.journal} into {args.to}: {exc}") from None
    # The copy was checked under its temporary name; the line names the file that is kept.
    detail = report.detail.replace(f"{report.path}.part", str(report.path))
    print(f"{report.path}: {detail}", file=sys.stdout if report.ok else sys.stderr)
    for old in report.removed:
        print(f"removed {old} (keeping the newest {args.keep})", flush=True)
    return 0 if report.ok else 1


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "journal",
        help="check, salvage or archive a journal file",
        description="Look after the journal file (docs/journal.md).",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    c = actions.add_parser("check", help="integrity and schema check, read only (exit 0/65/66/74)")
    c.add_argument("--journal", required=True, help="the journal file")
    c.set_defaults(func=cmd_check)
    s = actions.add_parser("salvage", help="copy what is readable into a new journal")
    s.add_argument("--journal", required=True, help="the damaged journal file")
    s.add_argument("--out", required=True, help="the new journal file (must not exist)")
    s.set_defaults(func=cmd_salvage)
    a = actions.add_parser("archive", help="archive and remove closed rounds older than N days")
    a.add_argument("--journal", required=True, help="the journal file")
    a.add_argument("--table-id", required=True, help="the table whose rounds to archive")
    a.add_argument("--older-than-days", type=int, required=True, help="age in days (≥ 0)")
    a.add_argument("--to", help="archive directory (default: 'archive' beside the journal)")
    a.set_defaults(func=cmd_archive)
    v = actions.add_parser("verify-archive", help="check archive files and their checksums")
    v.add_argument("files", nargs="+")
    v.add_argument("--key-file", help="check a signed export's signature with this key (hex)")
    v.add_argument(
        "--journal",
        help="the journal archived from: check that its chained archived event names the file "
        "and exactly the rows it holds, all older than its cutoff",
    )
    v.set_defaults(func=cmd_verify_archive)
    b = actions.add_parser(
        "backup",
        help="an online copy, verified (integrity and hash chain), the oldest rotated out",
        description="A copy of the journal made while the daemon runs (SQLite's backup API), "
        "checked by SQLite and by audit verify; exit 1 and a '.bad' file if it does not verify. "
        "systemd/paigow-table-backup.timer runs it daily (docs/operations.md).",
    )
    b.add_argument("--journal", required=True, help="the journal file")
    b.add_argument("--to", required=True, help="the backup directory")
    b.add_argument("--keep", type=int, default=14, help="good copies kept (default 14)")
    b.set_defaults(func=cmd_backup)
