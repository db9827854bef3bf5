"""Looking after the journal file: check it, salvage a damaged one, archive old rounds
(docs/journal.md).

- :func:`check_journal` opens the file read-only (also while the daemon runs), runs SQLite's
  integrity check (``quick_check`` above a size bound) and checks the schema; it never raises.
- :func:`salvage_journal` copies what is readable of a damaged journal into a new one; a bad page
  loses only the rows on it.
- :func:`archive_rounds` writes closed rounds older than a cut-off, with their events, to a
  compressed, checksummed archive file, and only then deletes them; :func:`verify_archive`
  checks such a file.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import sqlite3
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO
from urllib.parse import quote

from controller.clock import iso
from controller.journal.archive_file import (
    ARCHIVE_FORMAT,
    ARCHIVE_VERSION,
    read_archive,
    trailer_mac,
)
from controller.journal.schema import SCHEMA_VERSION
from controller.journal.store import (
    MIN_RETENTION,
    EventRecord,
    Journal,
    JournalError,
    RoundRecord,
)

#: Above this size the start-up check is ``quick_check`` (O(N), no index cross-checks).
FULL_CHECK_MAX_BYTES = 256 * 2**20

#: Exit statuses of ``paigow-table journal check`` (and of ``run`` on a damaged journal).
EXIT_OK = 0
EXIT_DAMAGED = 65
EXIT_MISSING = 66
EXIT_UNREADABLE = 74  # EX_IOERR: an I/O error, no permission, a full disk (not damage)

#: SQLite errors that say the file could not be read or opened, not that it is damaged.
_IO_CODES = ("SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_FULL", "SQLITE_READONLY", "SQLITE_BUSY")


#: The tables and columns this program writes (schema 1); a journal without them is not ours.
COLUMNS: dict[str, tuple[str, ...]] = {
    "meta": ("key", "value"),
    "rounds": (
        "round_id",
        "table_id",
        "seq",
        "opened_at",
        "closed_at",
        "status",
        "reason",
        "result",
    ),
    "events": ("id", "round_id", "at", "kind", "payload"),
    "outbox": (
        "msg_id",
        "table_id",
        "seq",
        "topic",
        "payload",
        "qos",
        "retain",
        "created_at",
        "attempts",
        "last_attempt_at",
        "replay",
        "round_id",
    ),
}

if TYPE_CHECKING:
    from controller.journal.audit import Replay


def _read_only(path: str | os.PathLike[str]) -> sqlite3.Connection:
    uri = f"file:{quote(os.fspath(path))}?mode=ro"
    return sqlite3.connect(uri, uri=True, timeout=10.0)


# --- check -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JournalCheck:
    """What :func:`check_journal` found. ``status`` is the CLI's exit status."""

    path: str
    problems: tuple[str, ...] = ()
    mode: str = ""
    missing: bool = False
    unreadable: bool = False  # an I/O error or permissions, not damage
    schema_version: int | None = None
    rounds: int | None = None
    events: int | None = None
    outbox: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and not self.missing

    @property
    def status(self) -> int:
        if self.missing:
            return EXIT_MISSING
        if self.unreadable:
            return EXIT_UNREADABLE
        return EXIT_OK if self.ok else EXIT_DAMAGED

    def summary(self) -> str:
        """One line: what a person needs to read at start-up or on a terminal."""
        if self.missing:
            return f"journal {self.path} does not exist"
        if self.unreadable:
            return (
                f"journal {self.path} cannot be read: {self.problems[0]} (its disk, its "
                "permissions, or a full disk; not damage)"
            )
        if self.ok:
            return (
                f"journal {self.path} ok ({self.mode}): schema {self.schema_version}, "
                f"{self.rounds} rounds, {self.events} events, {self.outbox} messages waiting"
            )
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        if self.schema_version is not None and self.schema_version > SCHEMA_VERSION and not more:
            # Not damage: a newer release migrated it (a downgrade). Salvage would be wrong.
            return (
                f"journal {self.path} was written by a newer paigow-table (journal schema "
                f"{self.schema_version}; this program knows {SCHEMA_VERSION}): it is not damaged "
                "and must not be salvaged; install the newer version again, or restore the "
                "backup taken before the upgrade (docs/operations.md §8)"
            )
        return (
            f"journal {self.path} is damaged: {self.problems[0]}{more}; copy out what is "
            f"readable with: paigow-table journal salvage --journal {self.path} --out NEW"
        )


def check_journal(
    path: str | os.PathLike[str], *, full_check_max_bytes: int = FULL_CHECK_MAX_BYTES
) -> JournalCheck:
    """Check the journal at ``path`` without changing it; never raises."""
    name = os.fspath(path)
    if not os.path.exists(name):
        return JournalCheck(name, missing=True)
    try:
        size = os.path.getsize(name)
        mode = "integrity_check" if size <= full_check_max_bytes else "quick_check"
        with contextlib.closing(_read_only(name)) as conn:
            problems = [str(row[0]) for row in conn.execute(f"PRAGMA {mode}(20)") if row[0] != "ok"]
            tables = {
                row[0]: {c[1] for c in conn.execute(f"PRAGMA table_info({row[0]})")}
                for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
            for table, columns in COLUMNS.items():
                if table not in tables:
                    problems.append(f"no {table} table: not a table journal")
                elif missing := [c for c in columns if c not in tables[table]]:
                    problems.append(f"table {table} lacks {', '.join(missing)}")
            version = None
            if "meta" in tables:
                row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
                version = int(row[0]) if row else 0
                if version > SCHEMA_VERSION:
                    problems.append(
                        f"journal schema {version} is newer than this program's {SCHEMA_VERSION}"
                    )
            counts: dict[str, int | None] = dict.fromkeys(("rounds", "events", "outbox"))
            if not problems:
                for table in counts:
                    counts[table] = int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    except (sqlite3.Error, OSError, ValueError) as exc:
        code = str(getattr(exc, "sqlite_errorname", "") or "")
        io = isinstance(exc, OSError) or code.startswith(_IO_CODES)
        return JournalCheck(name, problems=(str(exc) or type(exc).__name__,), unreadable=io)
    return JournalCheck(
        name,
        problems=tuple(problems),
        mode=mode,
        schema_version=version,
        rounds=counts["rounds"],
        events=counts["events"],
        outbox=counts["outbox"],
    )


# --- salvage -----------------------------------------------------------------------------------


#: A skipped range whose end is unknown (the table's structure itself is unreadable).
UNKNOWN_END = -1


@dataclass
class SalvageReport:
    source: str
    destination: str
    copied: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # rowid ranges
    orphan_events: int = 0

    def lines(self) -> list[str]:
        out = [f"salvaged {self.source} into {self.destination}"]
        for table in COLUMNS:
            ranges = self.skipped.get(table, [])
            where = ", ".join(
                f"{a} onwards" if b == UNKNOWN_END else f"{a}–{b}" if a != b else f"{a}"
                for a, b in ranges[:10]
            )
            more = " …" if len(ranges) > 10 else ""
            out.append(
                f"  {table:7} {self.copied.get(table, 0):>9} rows copied"
                + (f"; unreadable: rowid {where}{more}" if ranges else "")
            )
        if self.orphan_events:
            out.append(f"  {self.orphan_events} events belong to a round that was unreadable")
        return out


#: Columns later schemas added, copied by salvage when the damaged file has them.
LATER_COLUMNS: dict[str, tuple[str, ...]] = {"events": ("chain",)}


def _columns(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    try:
        present = {c[1] for c in conn.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError:
        present = set()
    return COLUMNS[table] + tuple(c for c in LATER_COLUMNS.get(table, ()) if c in present)


def _rows(
    conn: sqlite3.Connection,
    table: str,
    columns_of: tuple[str, ...],
    skipped: list[tuple[int, int]],
) -> Iterator[tuple[Any, ...]]:
    """Every readable row of ``table`` as (rowid, columns…), in rowid order. A chunk that fails
    is read again row by row, and rows that cannot be read are noted in ``skipped``."""
    columns = ", ".join(columns_of)
    last = 0
    try:
        top = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
    except sqlite3.Error:
        top = None
    while True:
        try:
            chunk = conn.execute(
                f"SELECT rowid, {columns} FROM {table} WHERE rowid > ? ORDER BY rowid LIMIT 500",
                (last,),
            ).fetchall()
        except sqlite3.DatabaseError:
            chunk = None
        if chunk is not None:
            if not chunk:
                return
            yield from chunk
            last = chunk[-1][0]
            continue
        found = _next_readable(conn, table, columns, last, top, skipped)
        if found is None:
            return
        last, row = found
        yield row  # readable again: back to chunks from here


def _next_readable(
    conn: sqlite3.Connection,
    table: str,
    columns: str,
    last: int,
    top: Any,
    skipped: list[tuple[int, int]],
) -> tuple[int, tuple[Any, ...]] | None:
    """Row by row past the damage after rowid ``last``, up to the largest rowid ``top`` (or well
    beyond, if unknown): the first readable row with its rowid, or None when there is none.
    Rows that cannot be read are noted in ``skipped``."""
    known = isinstance(top, int) and top > last
    end = top if known else last + 100_000
    bad_from: int | None = None
    for rowid in range(last + 1, end + 1):
        try:
            row = conn.execute(
                f"SELECT rowid, {columns} FROM {table} WHERE rowid = ?", (rowid,)
            ).fetchone()
        except sqlite3.DatabaseError:
            bad_from = rowid if bad_from is None else bad_from
            continue
        if bad_from is not None:
            skipped.append((bad_from, rowid - 1))
            bad_from = None
        if row is not None:
            return rowid, row
    if bad_from is not None:
        skipped.append((bad_from, end if known else UNKNOWN_END))
    return None


def salvage_journal(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    progress: Callable[[str, int], None] | None = None,
) -> SalvageReport:
    """Copy every readable row of ``source`` into a new journal at ``destination`` (which must
    not exist). Raises JournalError if the source cannot be opened at all."""
    src, dst = os.fspath(source), os.fspath(destination)
    if os.path.exists(dst):
        raise JournalError(f"{dst} exists: salvage writes a new file")
    report = SalvageReport(src, dst)
    try:
        reader = _read_only(src)
        reader.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        raise JournalError(f"cannot read {src} at all: {exc}") from None
    Journal(dst, "salvage").close()  # the current schema
    writer = sqlite3.connect(dst, isolation_level=None)
    try:
        writer.execute("BEGIN")
        round_ids: set[str] = set()
        for table in COLUMNS:
            columns = _columns(reader, table)
            marks = ", ".join("?" * len(columns))
            skipped: list[tuple[int, int]] = []
            copied = 0
            for row in _rows(reader, table, columns, skipped):
                values = row[1:]
                if table == "meta" and values[0] == "schema_version":
                    continue
                if table == "rounds":
                    round_ids.add(str(values[0]))
                if table == "events" and values[1] is not None and values[1] not in round_ids:
                    report.orphan_events += 1
                writer.execute(
                    f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({marks})",
                    values,
                )
                copied += 1
                if progress is not None and copied % 10_000 == 0:
                    progress(table, copied)
            report.copied[table] = copied
            report.skipped[table] = skipped
        writer.execute("COMMIT")
    finally:
        writer.close()
        reader.close()
    return report


# --- archive -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArchiveReport:
    files: tuple[Path, ...] = ()
    rounds: int = 0
    events: int = 0
    kept_pending: int = 0  # old rounds kept because their messages wait for the broker
    cutoff: str = ""  # the cut-off applied (never less than MIN_RETENTION before now)


def _write_archive(
    path: Path,
    header: dict[str, Any],
    lines: Iterator[dict[str, Any]],
    key: bytes | None = None,
) -> tuple[int, str]:
    """gzip JSON lines with a trailer holding the SHA-256 of all lines before it (and, with a
    ``key``, its HMAC-SHA256: a signed export); written to a temporary name, fsynced, renamed,
    the directory fsynced. Returns (lines, file sha256)."""
    tmp = path.with_name(path.name + ".tmp")
    digest = hashlib.sha256()
    count = 0
    with open(tmp, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for item in (header, *lines):
                data = (json.dumps(item, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
                digest.update(data)
                gz.write(data)
                count += 1
            trailer: dict[str, Any] = {
                "type": "trailer",
                "lines": count,
                "sha256": digest.hexdigest(),
            }
            if key is not None:
                trailer["hmac_sha256"] = trailer_mac(key, trailer["sha256"])
            gz.write((json.dumps(trailer, separators=(",", ":")) + "\n").encode())
        raw.flush()
        os.fsync(raw.fileno())
    file_digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    os.replace(tmp, path)
    sidecar = path.with_name(path.name + ".sha256")
    sidecar.write_text(f"{file_digest}  {path.name}\n", encoding="utf-8")
    for target in (sidecar,):
        with open(target, "rb") as f:
            os.fsync(f.fileno())
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return count, file_digest


def _archive_lines(
    records: list[RoundRecord], loose: list[EventRecord]
) -> Iterator[dict[str, Any]]:
    for r in records:
        yield {
            "type": "round",
            "round_id": r.round_id,
            "table_id": r.table_id,
            "seq": r.seq,
            "opened_at": r.opened_at,
            "closed_at": r.closed_at,
            "status": str(r.status),
            "reason": r.reason,
            "result": r.result,
            "events": [
                {"id": e.id, "at": e.at, "kind": e.kind, "payload": e.payload} for e in r.events
            ],
        }
    for e in loose:
        yield {"type": "event", "id": e.id, "at": e.at, "kind": e.kind, "payload": e.payload}


def archive_rounds(
    journal: Journal,
    *,
    before: datetime,
    directory: str | os.PathLike[str],
    batch: int = 1000,
    now: datetime | None = None,
) -> ArchiveReport:
    """Archive this table's oldest closed rounds opened before ``before`` (and loose events
    older than it) in files of up to ``batch`` rounds, deleting each batch only after its file
    is on disk. Only a prefix goes: the first round that is open, or whose messages still wait
    in the outbox, stops the run there (a later run takes it and those after it). ``before`` is
    at most :data:`MIN_RETENTION` before the journal's clock (a later one is taken as that)."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    cutoff = iso(min(before, journal.clock() - MIN_RETENTION))
    files: list[Path] = []
    rounds = events = 0
    while True:
        records, loose = journal.upkeep.archive_candidates(cutoff, batch)
        if not records and not loose:
            break
        stamp = journal.new_round_id().rsplit("-", 1)[-1]
        path = out / f"{journal.table_id}-{stamp}.jsonl.gz"
        first = min([r.opened_at for r in records] + [e.at for e in loose])
        last = max([r.opened_at for r in records] + [e.at for e in loose])
        header = {
            "type": "header",
            "format": ARCHIVE_FORMAT,
            "version": ARCHIVE_VERSION,
            "table_id": journal.table_id,
            "from": first,
            "to": last,
            "before": cutoff,
            "rounds": len(records),
            "events": sum(len(r.events) for r in records) + len(loose),
            "created_at": iso(now or datetime.now(UTC)),
        }

        _write_archive(path, header, _archive_lines(records, loose))
        try:
            with journal.transaction() as tx:
                tx.delete_archived(
                    [r.round_id for r in records],
                    [e.id for e in loose],
                    (path.name, hashlib.sha256(path.read_bytes()).hexdigest()),
                    before=cutoff,
                )
        except BaseException:
            # The rows stay; the file would duplicate them in the next run's archive.
            for leftover in (path, path.with_name(path.name + ".sha256")):
                leftover.unlink(missing_ok=True)
            raise
        files.append(path)
        rounds += len(records)
        events += sum(len(r.events) for r in records) + len(loose)
        if len(records) < batch and len(loose) < batch * 10:
            break
    kept = journal.upkeep.pending_old_rounds(cutoff)
    return ArchiveReport(tuple(files), rounds, events, kept, cutoff)


def export_rounds(
    journal: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    since: str | None,
    until: str | None,
    key: bytes | None = None,
    now: datetime | None = None,
) -> tuple[int, int]:
    """The rounds opened in [since, until) with every event of them, as a self-verifying
    archive (the retention format, docs/journal.md) signed with ``key`` when given; the journal
    is only read. Returns (rounds, events)."""
    from controller.journal.audit import recall_rounds

    rounds = recall_rounds(journal, last=None, since=since or "", until=until)
    made_at = iso(now or datetime.now(UTC))
    events = sum(len(r["events"]) for r in rounds)
    header = {
        "type": "header",
        "format": ARCHIVE_FORMAT,
        "version": ARCHIVE_VERSION,
        "table_id": rounds[0]["table_id"] if rounds else "",
        "from": since or "",
        "to": until or made_at,
        "export": True,
        "rounds": len(rounds),
        "events": events,
        "created_at": made_at,
    }
    _write_archive(Path(out), header, ({"type": "round", **r} for r in rounds), key)
    return len(rounds), events


def verify_archive(path: str | os.PathLike[str], key: bytes | None = None) -> tuple[bool, str]:
    """Check an archive file: its sidecar's SHA-256, the trailer's SHA-256 of the lines, the
    header's counts and, with ``key``, the trailer's signature. Returns (ok, one line)."""
    ok, line, _items = read_archive(path, key)
    return ok, line


def print_progress(stream: TextIO = sys.stderr) -> Callable[[str, int], None]:
    def show(table: str, count: int) -> None:
        print(f"  {table}: {count} rows …", file=stream, flush=True)

    return show


# --- backups -------------------------------------------------------------------------------------

BACKUP_PREFIX = "journal-"


@dataclass(frozen=True, slots=True)
class BackupReport:
    path: Path
    ok: bool
    detail: str
    removed: tuple[Path, ...] = ()


def backup_journal(
    journal: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    *,
    keep: int = 14,
    now: datetime | None = None,
    replay: Replay | None = None,
) -> BackupReport:
    """An online copy of the journal (SQLite's backup API: safe while the daemon writes, the
    WAL included), checked as a regulator would (SQLite's integrity check and the hash chain,
    ``audit verify``, with ``replay`` dealing the rounds again: the CLI gives the rules
    engine's), then the oldest good copies beyond ``keep`` removed. A copy that fails its check
    is kept beside as ``….bad`` and removes nothing."""
    from controller.journal.audit import verify_journal

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    target = out / f"{BACKUP_PREFIX}{stamp}.sqlite3"
    partial = target.with_name(target.name + ".part")
    source = _read_only(journal)
    try:
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy)
            copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
        finally:
            copy.close()
    finally:
        source.close()
    check = check_journal(partial)
    why = "" if check.ok else check.summary()
    audit = verify_journal(partial, replay) if check.ok else None
    if audit is not None and not audit.ok:
        why = "; ".join(f.line() for f in audit.findings[:3])
    if audit is None or why:
        bad = target.with_name(target.name + ".bad")
        os.replace(partial, bad)
        return BackupReport(bad, False, f"the copy does not verify: {why}")
    os.replace(partial, target)
    os.chmod(target, 0o640)
    good = sorted(out.glob(f"{BACKUP_PREFIX}*.sqlite3"))
    removed = tuple(good[: max(0, len(good) - max(1, keep))])
    for old in removed:
        old.unlink(missing_ok=True)
    return BackupReport(target, True, audit.summary(), removed)
