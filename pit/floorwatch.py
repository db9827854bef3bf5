"""The floor's game protection (issue 44): the pit's worker that feeds every stored settled
round to the pooled tests (``pit.pooling``) and raises what they find.

- **Which rounds.** Every round the ingest stores is marked ``pooled = 0`` (migration 0008);
  the worker takes them (in the order they closed, up to ``TAKE`` a step), reads the round as
  the table signed it (its ``paigow.round`` message), and marks them taken. A correction of a
  round already taken is not taken again: a round counts once.
- **Which pools.** The table's devices at the round's seq (``device_history``: each device's
  make, model, firmware, serial and role, from the table's signed device messages): the
  shuffler's or shoe's model and firmware for the deal's tests, the RNG box's or dice reader's
  for the draw's; a serial seen on two tables gets a pool of its own.
- **Exactly once, across restarts.** The whole pooled state is saved in the transaction that
  marks the rounds taken and raises the findings: a crash before the commit takes the same
  rounds again from the same state; after it, nothing is taken or raised twice.
- **A finding** is a record alarm (kind ``pooled_protection``), on the table it names when the
  evidence points to one table, else on ``floor``; with it a ``pooled_findings`` row (the pool,
  the test, the finding and its attribution). Acknowledging the alarm (badge + PIN, like any
  record alarm) restarts that test of that pool, at the worker's next step.
- **Its own process** (:class:`FloorProcess`, issue 42): a step is seconds of Python at 2,000
  tables (about 0.15 ms of CPU a round); in a thread of the pit it held the interpreter's lock
  from the ingest and the page, and the pit fell 2–4 s behind the broker at every step. The
  child process keeps the pooled state between steps, runs at a lower priority (``nice``), and
  is started again if it dies (the step it was in rolled back: nothing counted twice).
- **Two pits** on one PostgreSQL database: each step takes a transaction-scoped advisory lock;
  the pit that does not get it skips the step, and a pit whose copy of the state is older than
  the saved one (the other pit stepped) reads it again first.
"""

from __future__ import annotations

import contextlib
import json
import logging
import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from controller.messages import RoundPayload
from controller.protection.observation import observation_from_round
from controller.protection.watch import Finding
from pit.config import configure_logging
from pit.db import Database
from pit.pooling import FloorBudget, FloorWatch, PooledFinding, PoolKey

log = logging.getLogger("pit.floorwatch")

#: Rounds taken in one step (one transaction): a 2,000-table floor deals about 2,000 a minute.
TAKE = 20_000
#: The advisory lock two pits share on PostgreSQL (any constant both use).
LOCK = 44_044
KIND = "pooled_protection"


class StoredRound(BaseModel):
    """A stored ``paigow.round`` message as the floor reads it: the table's own round model over
    its payload, checked in the same pass that parses the stored text (pydantic's JSON parser;
    about 0.04 ms a round against 0.06 for ``json.loads`` and then the model, issue 42). The
    envelope's other members are not read here: the ingest judged them before storing it. A
    text that is not such a message raises ``ValidationError``, a ``ValueError``."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    time: str
    payload: RoundPayload


class _Stored(BaseModel):
    """What the floor reads back of a text it wrote: the members it uses, typed; the rest kept
    as they are. No NaN or infinity: the floor writes finite numbers, and the page's JSON cannot
    carry them (the browser refused the whole answer)."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)


class _TableRounds(_Stored):
    table: str
    rounds: int


class _StoredShare(_TableRounds):
    llr: float


class _StoredAttribution(_Stored):
    verdict: Literal["table", "model", "device", "undecided"]
    table: str | None
    shares: list[_StoredShare]


class _StoredTest(_Stored):
    test: str
    title: str
    detail: str
    statistic: float
    threshold: float
    rounds: int
    since: str | None
    at: str


class StoredFinding(_Stored):
    """A pooled finding as the floor stored it (``PooledFinding.to_dict``), checked for what the
    page shows and the re-attribution reads, in the pass that parses it. A text rewritten in the
    database into something else (no JSON, a member missing or of another type, arrays nested
    too deep for any parser) raises ``ValidationError``, a ``ValueError``."""

    pool: str
    label: str
    advice: str
    tables: list[str]
    cusum: int
    finding: _StoredTest
    attribution: _StoredAttribution


class _ViewTest(_Stored):
    title: str
    statistic: float
    threshold: float
    worst: str
    alarmed_since: str | None


class _ViewPool(_Stored):
    pool: str
    label: str
    kind: str
    rounds: int
    tables: list[_TableRounds]
    tests: list[_ViewTest]


class _ViewBudget(_Stored):
    false_alarms_per_year: float
    pooled_share: float
    tables: int
    table_false_alarms_per_year: float


class StoredView(_Stored):
    """The floor's saved view (``FloorProtection._save``) as the page reads it; a text rewritten
    in the database into something else raises ``ValidationError``."""

    budget: _ViewBudget | None
    pools: list[_ViewPool]


#: What reading a stored text the floor wrote raises once somebody has rewritten it.
UNREADABLE = (ValueError, KeyError, TypeError, RecursionError)


class FloorProtection:
    """``step`` from one thread (its own connection); ``view`` reads what the last step saved."""

    def __init__(self, url: str, budget: FloorBudget) -> None:
        self.url = url
        self.budget = budget
        self.db: Database | None = None
        self.floor: FloorWatch | None = None
        self.generation = -1
        self.rounds_taken = 0
        #: The pooled findings found unreadable (alarm, test), each said on the log once.
        self.unreadable: set[tuple[str, str]] = set()

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None

    def _database(self) -> Database:
        if self.db is None:
            self.db = Database(self.url)
        return self.db

    def step(self, now: float | None = None) -> list[dict[str, Any]]:
        """Take the rounds waiting, in one transaction; the record alarms raised."""
        now = time.time() if now is None else now
        started, cpu = time.perf_counter(), time.thread_time()
        taken = 0
        db = self._database()
        try:
            with db.transaction():
                if db.kind == "postgresql":
                    got = db.one("SELECT pg_try_advisory_xact_lock(?)", (LOCK,))
                    if not got or not got[0]:
                        return []
                floor = self._current(db)
                changed = self._resets(db, floor, now)
                taken, findings = self._take(db, floor)
                alarms = [a for f in findings if (a := self._raise(db, f, now)) is not None]
                if taken:
                    self._refresh(db, floor)
                if taken or changed or self.generation < 0:
                    self._save(db, floor, now)
        except Exception:
            self.floor, self.generation = None, -1  # read the saved state again next time
            self.close()
            raise
        self.rounds_taken += taken
        if taken:
            log.info(
                "pit_floor_step rounds=%d seconds=%.3f cpu=%.3f",
                taken,
                time.perf_counter() - started,
                time.thread_time() - cpu,
            )
        return alarms

    def _current(self, db: Database) -> FloorWatch:
        row = db.one("SELECT generation, state FROM floor_protection WHERE id = 1")
        if self.floor is not None and (row is None or row[0] == self.generation):
            return self.floor
        floor = FloorWatch(self.budget)
        if row is not None:
            try:
                floor.load(json.loads(row[1]))
                self.generation = int(row[0])
            except UNREADABLE as exc:  # rewritten
                log.error(
                    "pit_floor_protection_state_unreadable: %s: starting afresh", _first_line(exc)
                )
        self.floor = floor
        return floor

    def _resets(self, db: Database, floor: FloorWatch, now: float) -> bool:
        rows = db.all(
            "SELECT p.alarm_id, p.pool_id, p.test FROM pooled_findings p JOIN record_alarms r "
            "ON r.id = p.alarm_id WHERE p.reset_done = 0 AND r.acked_at IS NOT NULL"
        )
        for alarm_id, pool_id, test in rows:
            floor.reset(pool_id, test, datetime.fromtimestamp(now, UTC))
            db.x("UPDATE pooled_findings SET reset_done = 1 WHERE alarm_id = ?", (alarm_id,))
            log.info("pit_pooled_reset pool=%s test=%s alarm=%s", pool_id, test, alarm_id)
        return bool(rows)

    def _devices(self, db: Database) -> dict[tuple[str, str], list[tuple[int, tuple[Any, ...]]]]:
        out: dict[tuple[str, str], list[tuple[int, tuple[Any, ...]]]] = {}
        for table, role, first_seq, *identity in db.all(
            "SELECT table_id, role, first_seq, make, model, firmware, serial FROM device_history "
            "WHERE role IS NOT NULL ORDER BY table_id, role, first_seq"
        ):
            out.setdefault((table, role), []).append((int(first_seq), tuple(identity)))
        return out

    def _take(self, db: Database, floor: FloorWatch) -> tuple[int, list[PooledFinding]]:
        rows = db.all(
            "SELECT r.table_id, r.round_id, r.msg_seq, r.status, m.body FROM rounds r "
            "LEFT JOIN messages m ON m.table_id = r.table_id AND m.seq = r.msg_seq "
            "AND m.sequenced = 1 WHERE r.pooled = 0 ORDER BY r.closed_at, r.table_id, r.msg_seq "
            "LIMIT ?",
            (TAKE,),
        )
        if not rows:
            return 0, []
        devices = self._devices(db)
        findings: list[PooledFinding] = []
        for table, round_id, seq, status, body in rows:
            if status != "settled" or body is None:
                continue
            try:
                stored = StoredRound.model_validate_json(body)
                payload = stored.payload
                obs = observation_from_round(payload)
                at = _aware(payload.closed_at or datetime.fromisoformat(stored.time))
            except UNREADABLE as exc:  # stored, so signed: log, go on
                log.error("pit_pooled_round_unreadable table=%s round=%s: %s",
                          table, round_id, _first_line(exc))  # fmt: skip
                continue
            if obs is None:
                continue
            for role in ("cards", "position"):
                current = [ident for first, ident in devices.get((table, role), []) if first < seq]
                if current:
                    floor.identify(table, role, *current[-1])
            findings += floor.observe(table, obs, at)
        _mark_taken(db, [(t, r) for t, r, *_ in rows])
        return len(rows), findings

    def _refresh(self, db: Database, floor: FloorWatch) -> None:
        """An open finding whose attribution was undecided, weighed again with the rounds its
        pool has taken since (its model-mates' latest): once decided, its record alarm names
        the table (or the floor, for the model) and says what to do."""
        rows = db.all(
            "SELECT p.alarm_id, p.test, p.body FROM pooled_findings p JOIN record_alarms r "
            "ON r.id = p.alarm_id WHERE r.acked_at IS NULL ORDER BY p.raised_at"
        )
        first: set[str] = set()
        for alarm_id, test, body in rows:
            main = alarm_id not in first
            first.add(alarm_id)
            try:
                stored = StoredFinding.model_validate_json(body)
                if stored.attribution.verdict != "undecided" or stored.cusum < 0:
                    continue
                finding = _finding(stored.finding.model_dump(), stored.cusum)
                pool = PoolKey.from_id(stored.pool)
            except UNREADABLE as exc:  # rewritten in the database: its record alarm stands
                if (alarm_id, test) not in self.unreadable:
                    self.unreadable.add((alarm_id, test))
                    log.error("pit_pooled_finding_unreadable alarm=%s test=%s: %s",
                              alarm_id, test, _first_line(exc))  # fmt: skip
                continue
            a = floor.reattribute(stored.pool, test, finding.cusum, finding.since or finding.at)
            if a is None or a.verdict == "undecided":
                continue
            pf = PooledFinding(pool, finding, a, tuple(stored.tables))
            db.x(
                "UPDATE pooled_findings SET body = ? WHERE alarm_id = ? AND test = ?",
                (json.dumps(pf.to_dict()), alarm_id, test),
            )
            log.warning("pit_pooled_attributed pool=%s test=%s verdict=%s table=%s alarm=%s",
                        pf.pool.id, test, a.verdict, a.table, alarm_id)  # fmt: skip
            if main:
                table, detail = _alarm_text(pf)
                db.x(
                    "UPDATE record_alarms SET table_id = ?, detail = ? WHERE id = ?",
                    (table, detail, alarm_id),
                )

    def _raise(self, db: Database, f: PooledFinding, now: float) -> dict[str, Any] | None:
        """A record alarm for the finding; or, while the pool has one open, the finding joins
        it (None: nothing new to raise). Acknowledging it restarts every test it holds."""
        body = json.dumps(f.to_dict())
        open_ = db.one(
            "SELECT p.alarm_id FROM pooled_findings p JOIN record_alarms r ON r.id = p.alarm_id "
            "WHERE p.pool_id = ? AND r.acked_at IS NULL LIMIT 1",
            (f.pool.id,),
        )
        if open_ is not None:
            db.x(
                "INSERT INTO pooled_findings (alarm_id, pool_id, test, raised_at, body) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (open_[0], f.pool.id, f.finding.test, now, body),
            )
            log.info("pit_pooled_finding_joined pool=%s test=%s alarm=%s", f.pool.id,
                     f.finding.test, open_[0])  # fmt: skip
            return None
        table, detail = _alarm_text(f)
        alarm_id = f"{table}:{KIND}:{uuid.uuid4().hex[:12]}"
        db.x(
            "INSERT INTO record_alarms (id, table_id, kind, detail, raised_at) "
            "VALUES (?, ?, ?, ?, ?)",
            (alarm_id, table, KIND, detail, now),
        )
        db.x(
            "INSERT INTO pooled_findings (alarm_id, pool_id, test, raised_at, body) "
            "VALUES (?, ?, ?, ?, ?)",
            (alarm_id, f.pool.id, f.finding.test, now, body),
        )
        log.warning("pit_pooled_finding pool=%s test=%s verdict=%s table=%s alarm=%s",
                    f.pool.id, f.finding.test, f.attribution.verdict, f.attribution.table,
                    alarm_id)  # fmt: skip
        return {"id": alarm_id, "table_id": table, "kind": KIND, "detail": detail, "raised_at": now}

    def _save(self, db: Database, floor: FloorWatch, now: float) -> None:
        self.generation += 1
        state = json.dumps(floor.to_state(), separators=(",", ":"))
        view = json.dumps(
            {"budget": floor.budget.to_dict(), "pools": floor.view(), "saved_at": now},
            separators=(",", ":"),
        )
        if db.one("SELECT 1 FROM floor_protection WHERE id = 1") is None:
            db.x(
                "INSERT INTO floor_protection (id, generation, saved_at, state, view) "
                "VALUES (1, ?, ?, ?, ?)",
                (self.generation, now, state, view),
            )
        else:
            db.x(
                "UPDATE floor_protection SET generation = ?, saved_at = ?, state = ?, view = ? "
                "WHERE id = 1",
                (self.generation, now, state, view),
            )


def _alarm_text(f: PooledFinding) -> tuple[str, str]:
    """The record alarm's table (the one named, or ``floor`` for a model or a device) and
    detail."""
    a = f.attribution
    table = a.table if a.verdict in ("table", "undecided") and a.table else "floor"
    named = f": {a.table}" if a.verdict != "model" and a.table else ""
    detail = f"{f.pool.label}: {f.finding.title} — {f.finding.detail} ({a.verdict}{named}). "
    return table, (detail + f.advice)[:2000]


def _finding(data: dict[str, Any], cusum: int) -> Finding:
    """A finding back from its ``to_dict``."""
    fields = {k: v for k, v in data.items() if k in Finding.__dataclass_fields__}
    since = data.get("since")
    fields |= {
        "since": None if since is None else datetime.fromisoformat(since),
        "at": datetime.fromisoformat(data["at"]),
        "cusum": cusum,
    }
    return Finding(**fields)


def _aware(when: datetime) -> datetime:
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _mark_taken(db: Database, keys: list[tuple[str, str]]) -> None:
    """``pooled = 1`` for these (table, round): one statement on PostgreSQL (arrays)."""
    if db.kind == "postgresql":
        db.x(
            "UPDATE rounds SET pooled = 1 FROM unnest(?::text[], ?::text[]) AS k(t, r) "
            "WHERE rounds.table_id = k.t AND rounds.round_id = k.r",
            ([t for t, _ in keys], [r for _, r in keys]),
        )
    else:
        db.xmany("UPDATE rounds SET pooled = 1 WHERE table_id = ? AND round_id = ?", keys)


def floor_view(db: Database) -> dict[str, Any]:
    """What the page shows (``/api/protection``'s ``floor``): the budget, every pool with its
    tests against their thresholds and its tables, and the pooled findings, newest first."""
    row = db.one("SELECT view FROM floor_protection WHERE id = 1")
    view: dict[str, Any] = {"budget": None, "pools": []}
    if row:
        try:
            view = StoredView.model_validate_json(row[0]).model_dump(mode="json")
        except UNREADABLE:  # rewritten: the page says so; the next step writes it again
            view = {"budget": None, "pools": [], "unreadable": True}
    findings = []
    for alarm_id, body, acked_by, acked_at in db.all(
        "SELECT p.alarm_id, p.body, r.acked_by, r.acked_at FROM pooled_findings p "
        "LEFT JOIN record_alarms r ON r.id = p.alarm_id ORDER BY p.raised_at DESC LIMIT 50"
    ):
        try:
            item = StoredFinding.model_validate_json(body).model_dump(mode="json")
        except UNREADABLE:  # rewritten: shown as such, with its alarm (the step logs it)
            item = {"unreadable": True}
        item |= {"alarm_id": alarm_id, "acked_by": acked_by, "acked_at": acked_at}
        findings.append(item)
    view["findings"] = findings
    return view


def budget_of(protection: Any, registered: Callable[[], int]) -> FloorBudget:
    """The floor's budget from ``[protection]`` (``tables`` 0: the tables with a key)."""
    return FloorBudget(
        false_alarms_per_year=protection.false_alarms_per_year,
        pooled_share=protection.pooled_share,
        tables=protection.tables or max(1, registered()),
        rounds_per_table_year=protection.rounds_per_table_year,
    )


#: How much lower the floor's process runs than the pit (``os.nice``): under a full machine
#: the ingest, the page and the database come first; the floor's step waits.
NICE = 10
#: The floor's worker inside its process (:func:`_child_start`).
_CHILD: FloorProtection | None = None


def _child_start(url: str, budget: FloorBudget, level: int, nice: int) -> None:
    global _CHILD
    with contextlib.suppress(OSError):
        os.nice(nice)
    # The pit ends it (``FloorProcess.close``), not the signals a stop sends the whole group
    # (systemd's SIGTERM to every process of the unit, a terminal's ^C): a step in progress
    # finishes or is rolled back by the pit's own close, never cut short as a "failure".
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    threading.Thread(target=_orphaned, args=(parent,), name="pit-floor-parent", daemon=True).start()
    configure_logging(logging.getLevelName(level))
    _CHILD = FloorProtection(url, budget)


def _orphaned(parent: int, every: float = 0.5) -> None:
    """The child ends when the pit is gone (killed, crashed: nothing told it): a step it was in
    rolls back with its connection. Without this it lived on, idle, holding a connection."""
    while os.getppid() == parent:
        time.sleep(every)
    os.kill(os.getpid(), signal.SIGKILL)  # SIGTERM is ignored here (above)


def _child_step() -> list[dict[str, Any]]:
    assert _CHILD is not None
    return _CHILD.step()


def _child_close() -> None:
    if _CHILD is not None:
        _CHILD.close()


class FloorProcess:
    """:class:`FloorProtection` in a process of its own (spawned: nothing of the pit's threads
    or connections is inherited), one step at a time. :meth:`step` blocks: call it from a
    thread. A child that died is started again at the next step (its step's transaction rolled
    back; the new child reads the saved state)."""

    def __init__(self, url: str, budget: FloorBudget, nice: int = NICE) -> None:
        self.url = url
        self.budget = budget
        self.nice = nice
        self._pool: ProcessPoolExecutor | None = None

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                1,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_child_start,
                initargs=(self.url, self.budget, logging.getLogger().level, self.nice),
            )
        return self._pool

    def step(self) -> list[dict[str, Any]]:
        try:
            return self._executor().submit(_child_step).result()
        except BrokenProcessPool:  # the child died (killed, out of memory): a new one next
            self._drop()
            raise

    def pid(self) -> int | None:
        """The child's process id, once it runs (for the tests and the curious)."""
        pool = self._pool
        return pool.submit(os.getpid).result() if pool is not None else None

    def close(self) -> None:
        if self._pool is not None:
            with contextlib.suppress(Exception):
                self._pool.submit(_child_close).result(timeout=30)
            self._drop()

    def _drop(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def _first_line(exc: BaseException) -> str:
    """An error's first line (pydantic's run to many, with the input quoted)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
