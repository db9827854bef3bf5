"""The pit's database connection (SQLite or PostgreSQL, one code: ``pit.store``), and the shapes
a batch goes through: the message as it came (:class:`Incoming`), the bounds it is judged by
(:class:`Limits`) and what a batch did
(:class:`Outcome`). Every part that reads or writes holds a :class:`Database` (composition, not
a base class): the ingest's ``pit.record`` (rejects and record checks) and ``pit.projections``
(seq bookkeeping and projections) under ``pit.store`` (the ingest itself), the page's
``pit.pages`` and ``pit.sessions``.
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pit import judge


def name_thread(name: str) -> Callable[[], None]:
    """An executor's ``initializer`` that gives its thread ``name`` as the kernel sees it
    (``top -H``, ``/proc/PID/task/*/comm``; at most 15 bytes): which thread of the pit spends
    the CPU is then readable from outside (``bench/pit.py``'s ``pit_cpu_ms_by_thread``)."""

    def initializer() -> None:
        with contextlib.suppress(OSError, AttributeError):
            Path("/proc/thread-self/comm").write_text(name[:15])

    return initializer


@dataclass(frozen=True, slots=True)
class Incoming:
    """One MQTT message as it came off the wire."""

    topic: str
    payload: bytes
    retained: bool
    received_at: float


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds a message is judged by (``[broker] max_message_bytes``, ``[record]``)."""

    max_bytes: int = judge.MAX_BYTES
    max_depth: int = judge.MAX_DEPTH
    #: a seq or round number further than this past the table's highest is refused
    max_seq_jump: int = 100_000
    #: a claimed time ahead of the arrival by more than this is implausible (seconds)
    clock_tolerance: float = 300.0
    #: a claimed time older than this before the arrival is implausible (not for a replay)
    max_age: float = 7 * 86_400 + 300.0
    #: this many rejects on one table's topic within ``reject_window`` s: a record alarm
    reject_burst: int = 20
    reject_window: float = 60.0
    #: a gap found by a jump counts on the tiles after this many seconds (a pit of a shared
    #: group: the seq is usually in the other pit's batch; ``pit.pages.STATUS_GAP_GRACE``)
    jump_gap_grace: float = 0.0
    #: a checkpoint naming one the pit does not hold waits this many seconds for it before it
    #: is ``chain_skipped`` (0: at once): the other pit of a group may hold it in its batch, or
    #: a resend may bring it (``pit.liveness``)
    checkpoint_grace: float = 0.0
    #: rejects, their counts and acknowledged record alarms are kept this many days
    retention_days: float = 30.0


def database_down(exc: BaseException) -> bool:
    """Whether ``exc`` is the database itself failing (its connection, its file, its disk),
    as opposed to one message it refused (a value out of range, a constraint)."""
    if isinstance(exc, sqlite3.Error):
        down = (sqlite3.OperationalError, sqlite3.InternalError)
        return isinstance(exc, down) or type(exc) is sqlite3.DatabaseError
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency of the pit
        return False
    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)


@dataclass
class Outcome:
    """What a batch did."""

    stored: int = 0
    duplicates: int = 0
    rejected: int = 0
    ignored: int = 0  # commands and replies on the tables' topics
    tables: set[str] = field(default_factory=set)
    gaps_reported: list[tuple[str, int]] = field(default_factory=list)
    gaps_filled: list[tuple[str, int]] = field(default_factory=list)
    alarms: list[dict[str, Any]] = field(default_factory=list)
    #: per table, the envelope time of the newest message stored (publish→page latency)
    sent: dict[str, str] = field(default_factory=dict)
    #: each reject: the table its topic names and the reason (both escaped)
    rejects: list[tuple[str, str]] = field(default_factory=list)
    #: per table, when the pit last heard it in this batch (its own clock)
    heard: dict[str, float] = field(default_factory=dict)
    #: messages kept to wait for their key, and messages that had waited judged again
    awaiting: int = 0
    rejudged: int = 0
    #: messages admission dropped over their tables' budgets (``pit.admission``)
    dropped: int = 0

    def merge(self, other: Outcome) -> None:
        """Add what ``other`` (one message's outcome) did."""
        self.stored += other.stored
        self.duplicates += other.duplicates
        self.rejected += other.rejected
        self.ignored += other.ignored
        self.tables |= other.tables
        self.gaps_reported += other.gaps_reported
        self.gaps_filled += other.gaps_filled
        self.alarms += other.alarms
        for table, when in other.sent.items():
            self.sent[table] = max(self.sent.get(table, ""), when)
        self.rejects += other.rejects
        self.awaiting += other.awaiting
        for table, at in other.heard.items():
            self.heard[table] = max(self.heard.get(table, 0.0), at)


@functools.lru_cache(maxsize=1024)
def postgres_sql(sql: str) -> str:
    """``sql``, written once for both databases with SQLite's ``?`` placeholders, as psycopg
    reads a query: each ``?`` outside a quoted literal or identifier is a ``%s``, ``??`` a
    literal ``?`` (PostgreSQL's operator); psycopg's own ``%s``, ``%b`` and ``%t`` outside
    quotes (a statement for PostgreSQL alone: its binary arrays) are kept, and every other
    ``%`` is doubled (psycopg reads a ``%`` anywhere, quotes included, as the start of a
    placeholder). A ``?`` inside quotes stays a question mark. (Replacing every ``?`` took a
    quoted one, and the operator, for a placeholder, and left a ``%`` to break the query:
    issue 41.)"""
    out: list[str] = []
    quote = ""
    i = 0
    while i < len(sql):
        ch = sql[i]
        if ch == "%" and not quote and sql[i + 1 : i + 2] in ("s", "b", "t"):
            out.append(sql[i : i + 2])  # psycopg's own placeholder, in a PostgreSQL statement
            i += 1
        elif ch == "%":
            out.append("%%")
        elif quote:
            out.append(ch)
            if ch == quote:
                quote = ""  # a doubled quote closes and opens again: the same text
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?" and sql[i + 1 : i + 2] == "?":
            out.append("?")
            i += 1
        elif ch == "?":
            out.append("%s")
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def database_kind(url: str) -> str:
    if url.startswith("sqlite:"):
        return "sqlite"
    if url.startswith(("postgresql:", "postgres:", "postgresql+psycopg:")):
        return "postgresql"
    raise ValueError(f"unsupported database URL {redact(url)!r}: sqlite:/// or postgresql://")


def redact(url: str) -> str:
    """A URL fit for a log line: no password."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"


def down_reason(url: str, exc: BaseException) -> str:
    """Why the database at ``url`` could not be used, in one line for a person: the database's
    own words (its first line), the URL without its password."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"database {redact(url)}: {type(exc).__name__}: {first}".rstrip(": ")


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite database URL (None for PostgreSQL)."""
    return Path(_sqlite_path(url)) if database_kind(url) == "sqlite" else None


def _sqlite_path(url: str) -> str:
    path = url.removeprefix("sqlite:///")
    return path


def migrate(url: str) -> list[str]:
    """Apply the pit's migrations (yoyo) that the database lacks; returns their ids."""
    from yoyo import get_backend, read_migrations  # type: ignore[import-untyped]

    kind = database_kind(url)
    if kind == "sqlite":
        Path(_sqlite_path(url)).parent.mkdir(parents=True, exist_ok=True)
        yoyo_url = "sqlite:///" + _sqlite_path(url)
    else:
        yoyo_url = "postgresql+psycopg://" + url.split("://", 1)[1]
    with resources.as_file(resources.files("pit") / "migrations") as directory:
        migrations = read_migrations(str(directory))
        backend = get_backend(yoyo_url)
        try:
            with backend.lock():
                todo = backend.to_apply(migrations)
                backend.apply_migrations(todo)
                return [m.id for m in todo]
        finally:
            with contextlib.suppress(Exception):
                backend.connection.close()


class Shifts:
    """Shift boundaries (HH:MM, local time in ``timezone``): a time's shift is named by the
    local date and time its shift began, ``2026-11-25 14:00``."""

    def __init__(self, starts: Sequence[str], timezone: str = "UTC") -> None:
        self.starts = sorted((int(s[:2]), int(s[3:5])) for s in starts)
        self.zone = ZoneInfo(timezone)

    def of(self, when: datetime) -> str:
        local = when.astimezone(self.zone)
        minutes = local.hour * 60 + local.minute
        day = local.date()
        begun = [s for s in self.starts if s[0] * 60 + s[1] <= minutes]
        if begun:
            h, m = begun[-1]
        else:  # before the first start: the previous day's last shift
            h, m = self.starts[-1]
            day = day - timedelta(days=1)
        return f"{day.isoformat()} {h:02d}:{m:02d}"


class Database:
    """One connection to the pit's database: what the ingest's parts, the page's queries and
    the sessions each hold (``pit.store``, ``pit.pages``, ``pit.sessions``), never a base class."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.kind = database_kind(url)
        self.conn: Any = None
        self.connect()

    def connect(self) -> None:
        self.close()
        if self.kind == "sqlite":
            path = _sqlite_path(self.url)
            conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")  # acknowledged means on disk
            conn.execute("PRAGMA busy_timeout = 30000")
            self.conn = conn
        else:
            import psycopg

            dsn = self.url.replace("postgresql+psycopg://", "postgresql://", 1)
            self.conn = psycopg.connect(dsn, autocommit=True, connect_timeout=5)

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None

    def _sql(self, sql: str) -> str:
        return sql if self.kind == "sqlite" else postgres_sql(sql)

    def x(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Execute one statement; returns the cursor."""
        return self.conn.execute(self._sql(sql), tuple(params))

    def xmany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute one statement for each of ``rows`` (SQLite's ``executemany``)."""
        self.conn.executemany(self._sql(sql), rows)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self.x(sql, params).fetchall())

    def among(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """The condition ``column`` among ``values`` and its parameters: on PostgreSQL one
        array parameter, so the statement's text is the same whatever the number of values
        (psycopg prepares it once; an ``IN`` list of another length each time is parsed anew
        each time), on SQLite an ``IN`` list."""
        if self.kind == "postgresql":
            return f"{column} = ANY(?)", [list(values)]
        return f"{column} IN ({', '.join('?' for _ in values)})", list(values)

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        row = self.x(sql, params).fetchone()
        return tuple(row) if row is not None else None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.x("BEGIN IMMEDIATE" if self.kind == "sqlite" else "BEGIN")
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.x("ROLLBACK")
            raise
        self.x("COMMIT")

    def database_bytes(self) -> int:
        if self.kind == "sqlite":
            path = Path(_sqlite_path(self.url))
            return sum(
                p.stat().st_size for p in (path, path.with_name(path.name + "-wal")) if p.exists()
            )
        row = self.one("SELECT pg_database_size(current_database())")
        return int(row[0]) if row else 0
