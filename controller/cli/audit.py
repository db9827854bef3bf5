"""``paigow-table audit verify|recall``: the journal as a regulator reads it (docs/audit.md)."""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from controller.exits import (
    EXIT_DATAERR,
    EXIT_FINDING,
    EXIT_IOERR,
    EXIT_USAGE,
    CliError,
    Subcommands,
    existing_file,
    existing_journal,
    iso_time,
)


def cmd_verify(args: argparse.Namespace) -> int:
    from controller.audit import verify_journal
    from controller.cli.house_way import load_way_or_fail

    existing_journal(args.journal)
    ways = [load_way_or_fail(f) for f in args.way or ()]
    if args.checkpoints is not None and args.checkpoint_key is None:
        raise CliError(EXIT_USAGE, "--checkpoints needs --checkpoint-key")
    report = verify_journal(args.journal, ways)
    for finding in report.findings:
        print(finding.line(), file=sys.stderr, flush=True)
    print(report.summary(), flush=True)
    ok = report.ok
    if args.feed is not None:
        ok = _verify_feed(args) and ok
    if args.checkpoints is None:
        return 0 if ok else 1
    from controller.journal.checkpoints import (
        read_checkpoint_lines,
        read_hex_key,
        verify_checkpoints,
    )

    key = _key(args.checkpoint_key, read_hex_key)
    existing_file(args.checkpoints, "checkpoints")
    try:
        checkpoints = read_checkpoint_lines(args.checkpoints)
    except ValueError as exc:
        raise CliError(EXIT_DATAERR, f"checkpoints {args.checkpoints}: {exc}") from None
    checked, problems = verify_checkpoints(args.journal, checkpoints, key)
    for row, what in problems:
        print(f"event row {row}: {what}" if row else what, file=sys.stderr, flush=True)
    verdict = "ok" if not problems else f"{len(problems)} problem(s)"
    print(f"checkpoints {args.checkpoints}: {verdict}; {checked} checked", flush=True)
    return 0 if ok and not problems else 1


def _verify_feed(args: argparse.Namespace) -> bool:
    from pathlib import Path

    from controller.journal.audit import read_feed, verify_feed
    from controller.journal.checkpoints import read_hex_key

    key = _key(args.checkpoint_key, read_hex_key) if args.checkpoint_key else None
    existing_file(args.feed, "feed")
    for archive in args.archives or []:
        existing_file(archive, "archive")
    try:
        with open(args.feed, encoding="utf-8") as lines:
            archives = [Path(a) for a in args.archives or []]
            feed = verify_feed(args.journal, read_feed(list(lines)), key, archives)
    except (UnicodeDecodeError, ValueError) as exc:
        raise CliError(EXIT_DATAERR, f"feed {args.feed}: not a copy of the feed: {exc}") from None
    for finding in feed.findings:
        print(finding.line(), file=sys.stderr, flush=True)
    print(feed.summary(args.feed), flush=True)
    return not feed.findings


def _key(path: str, read: Callable[[str], bytes]) -> bytes:
    """A hex key file: 66/74 if it cannot be read, 65 if it is not a key."""
    existing_file(path, "key file")
    try:
        return read(path)
    except ValueError as exc:
        raise CliError(EXIT_DATAERR, f"key file {path}: {exc}") from None


def cmd_recall(args: argparse.Namespace) -> int:
    from controller.journal.audit import recall_rounds, recall_text

    existing_journal(args.journal)
    rounds = recall_rounds(
        args.journal, last=args.last, round_id=args.round, since=args.since, until=args.until
    )
    if not rounds:
        print(f"audit recall: {_nothing_matched(args)}", file=sys.stderr, flush=True)
        return EXIT_FINDING
    if args.json:
        for r in rounds:
            print(json.dumps(r, ensure_ascii=False), flush=True)
    else:
        for line in recall_text(rounds):
            print(line, flush=True)
    return 0


def _nothing_matched(args: argparse.Namespace) -> str:
    """What was asked and what the journal holds, in one line."""
    import contextlib
    from urllib.parse import quote

    uri = f"file:{quote(args.journal)}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10.0)) as conn:
        count, first, last = conn.execute(
            "SELECT count(*), min(opened_at), max(opened_at) FROM rounds"
        ).fetchone()
    if args.round is not None:
        asked = f"no round {args.round!r}"
    elif args.since is not None or args.until is not None:
        asked = "no round opened" + (f" at or after {args.since}" if args.since else "")
        asked += f" before {args.until}" if args.until else ""
    else:
        asked = "no rounds"
    holds = f"it holds {count} rounds, opened {first} to {last}" if count else "it holds none"
    return f"{asked} in {args.journal}: {holds}"


def cmd_export(args: argparse.Namespace) -> int:
    from controller.journal.maintenance import export_rounds

    existing_journal(args.journal)
    key = None
    if args.key_file:
        from controller.journal.checkpoints import read_hex_key

        key = _key(args.key_file, read_hex_key)
    try:
        rounds, events = export_rounds(
            args.journal, args.out, since=args.since, until=args.until, key=key
        )
    except (OSError, sqlite3.Error) as exc:
        raise CliError(EXIT_IOERR, f"{args.out}: {exc}") from None
    signed = "signed" if key is not None else "unsigned"
    print(f"{args.out}: {rounds} rounds and {events} events, {signed}", flush=True)
    return 0


def cmd_authenticate(args: argparse.Namespace) -> int:
    from controller.software import authenticate, check_software

    try:
        answer = authenticate(args.nonce)
    except ValueError as exc:
        print(f"authenticate: {exc}", file=sys.stderr, flush=True)
        return 2
    check = check_software()
    answer["verified"] = check.verified
    answer["software_digest"] = check.digest
    if not check.ok:
        answer["findings"] = check.findings() or [check.summary()]
    if args.config:
        from controller.wiring import config_digest

        answer["config_digest"] = config_digest(args.config)
    print(json.dumps(answer), flush=True)
    return 0 if check.ok else 1


def cmd_software(args: argparse.Namespace) -> int:
    from controller.exits import EXIT_NOINPUT, CliError, file_refusal
    from controller.software import check_software, seal

    if args.prefix and not Path(args.prefix).is_dir():
        raise CliError(EXIT_NOINPUT, f"installation {args.prefix}: no such directory")
    if args.action == "seal":
        try:
            path, entries = seal(Path(args.prefix) if args.prefix else None)
        except OSError as exc:
            raise file_refusal(exc, "file") from None
        print(f"{path}: {entries} files and links sealed", flush=True)
        return 0
    check = check_software(Path(args.prefix) if args.prefix else None)
    print(check.summary(), flush=True)
    for finding in check.findings():
        print(f"  {finding}", flush=True)
    return 0 if check.ok else 1


def cmd_badge_pin(args: argparse.Namespace) -> int:
    """``dealer-pin`` and ``supervisor-pin``: a badges file line, the PIN read from stdin."""
    from controller.badges import hash_pin
    from controller.credentials import BADGE, DEALER_PIN_DIGITS, SUPERVISOR_PIN_DIGITS

    name = args.command
    digits = SUPERVISOR_PIN_DIGITS if name == "supervisor-pin" else DEALER_PIN_DIGITS
    if not BADGE.match(args.badge):
        print(f"{name}: a badge is 1–32 letters, digits, '.', '_' or '-'", file=sys.stderr)
        return 2
    pin = sys.stdin.readline().strip()
    if len(pin) < digits or not pin.isdigit():
        print(f"{name}: the PIN must be at least {digits} digits", file=sys.stderr)
        return 2
    print(f"{args.badge} {hash_pin(pin)}", flush=True)
    return 0


def register(sub: Subcommands) -> None:
    p = sub.add_parser(
        "dealer-pin",
        help="a dealers_file line for BADGE: the PIN read from stdin, stored as a salted hash",
        description="Print 'BADGE pbkdf2_sha256$…' for [display] dealers_file. The PIN is read "
        "from the first line of stdin, never from the command line (docs/audit.md).",
    )
    p.add_argument("badge")
    p.set_defaults(func=cmd_badge_pin)
    p = sub.add_parser(
        "supervisor-pin",
        help="a supervisors_file line for BADGE: the PIN (6+ digits) read from stdin, stored as "
        "a salted hash",
        description="Print 'BADGE pbkdf2_sha256$…' for [display] supervisors_file: the "
        "supervisors who void, acknowledge alarms and correct players' settings at the display, "
        "each by badge and PIN. The PIN (at least 6 digits) is read from the first line of stdin, "
        "never from the command line (docs/audit.md).",
    )
    p.add_argument("badge")
    p.set_defaults(func=cmd_badge_pin)
    p = sub.add_parser(
        "authenticate",
        help="HMAC-SHA256 of every installed file, keyed by a nonce (software authentication)",
        description="Software authentication on demand (docs/audit.md): HMAC-SHA256 keyed by "
        "NONCE over every installed file in a fixed order, the version, whether every file "
        "still matches the package, and the config's digest. Exit 1 if a file differs.",
    )
    p.add_argument("--nonce", required=True, help="the regulator's tool's challenge")
    p.add_argument("--config", help="the table's config file, for its digest")
    p.set_defaults(func=cmd_authenticate)
    p = sub.add_parser(
        "software",
        help="seal the installation, or check it against its seal (software authentication)",
        description="seal: write the manifest of everything that executes (the installation, "
        "the standard library, the interpreter), as the user who installed it, once after a "
        "pip install (the .deb ships sealed). check: what `run` checks at start (docs/audit.md).",
    )
    p.add_argument("action", choices=["seal", "check"])
    p.add_argument("--prefix", help="the installation (default: the running one, sys.prefix)")
    p.set_defaults(func=cmd_software)
    _register_audit(sub)


def _register_audit(sub: Subcommands) -> None:
    """``audit verify|recall|export``."""
    p = sub.add_parser(
        "audit",
        help="verify the journal's hash chain, recall rounds",
        description="The journal as a regulator reads it (docs/audit.md).",
    )
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    v = actions.add_parser("verify", help="check the hash chain and every round's seal (exit 1)")
    v.add_argument("--journal", required=True)
    v.add_argument(
        "--checkpoints", help="the table's signed checkpoints as the casino kept them (JSON lines)"
    )
    v.add_argument("--checkpoint-key", help="the file holding the checkpoint key (hex)")
    v.add_argument(
        "--feed",
        help="the casino's copy of the table's feed (`monitor --json` lines, or envelopes): "
        "every round sent must be in the journal as sent; checkpoints in it are checked too",
    )
    v.add_argument(
        "--archives",
        action="append",
        metavar="PATH",
        help="with --feed: an archive file or directory retention wrote (repeatable); a round the "
        "journal calls archived must be in one, as sent, else it is a finding",
    )
    v.add_argument(
        "--way",
        action="append",
        metavar="FILE",
        help="a House Way file the table dealt by (repeatable): its rounds are dealt again by it "
        "(shipped ways are found by name)",
    )
    v.set_defaults(func=cmd_verify)
    r = actions.add_parser("recall", help="print rounds with everything journaled about them")
    r.add_argument("--journal", required=True)
    which = r.add_mutually_exclusive_group()
    which.add_argument("--last", type=int, default=10, help="the last N rounds (default 10)")
    which.add_argument("--round", help="one round, by its id")
    which.add_argument(
        "--since", type=iso_time, help="rounds opened at or after this ISO time (UTC by default)"
    )
    r.add_argument("--until", type=iso_time, help="… and before this ISO time")
    r.add_argument("--json", action="store_true", help="one JSON object a round")
    r.set_defaults(func=cmd_recall)
    e = actions.add_parser(
        "export",
        help="a time range as a signed, self-verifying archive (journal verify-archive checks it)",
    )
    e.add_argument("--journal", required=True)
    e.add_argument(
        "--since", type=iso_time, required=True, help="rounds opened at or after this ISO time"
    )
    e.add_argument("--until", type=iso_time, help="… and before this ISO time")
    e.add_argument("--out", required=True, help="the file to write (.jsonl.gz)")
    e.add_argument("--key-file", help="sign it: an HMAC key (hex, at least 32 bytes)")
    e.set_defaults(func=cmd_export)
