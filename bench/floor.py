"""A casino floor with failures (issue 8): many tables dealing fast into one broker while the
broker restarts and daemons are killed -9; afterwards, every round every table journaled must
have reached the casino system exactly once (after deduplication by msg_id), in order.

* Each table is a real daemon process (`paigow-table run --config …`, READY over its own
  $NOTIFY_SOCKET) with its MQTT publisher and its display on a free port, its journal with
  synchronous = FULL; its shuffler and RNG box are simulated on ptys in this process.
* Every table deals a round every ``--round-seconds / --speed`` s (60 s live, so every 6 s at
  10×), the deal's frames paced over ``--deal-seconds / --speed``.
* One Mosquitto with persistence ON (``mosquitto.db`` written on a clean stop): a broker restart
  is SIGTERM (it saves sessions and the messages queued for them), ``--broker-down`` s of
  outage, then a start from the saved file, as `systemctl restart mosquitto` does.
* ``--kills`` daemons are killed -9 (half of them in the middle of a deal) and started again
  after ``--restart-sec`` (2 s, the unit's RestartSec=), as systemd's Restart= would.
* The casino system is a separate process: MQTT 5, QoS 1, a persistent session (clean start
  off, session expiry 1 h), reconnecting within a fraction of a second. It writes each message
  it receives, stamped, to a JSON-lines file.

Afterwards every journal is opened read-only and compared with what the casino system got:
every outbox message (seq 1…N per table; status snapshots excepted) and every closed round,
gaps, duplicates, order, the latency from a deal's last frame to the round's arrival. The last
line is one JSON object; the exit status is 1 on any loss.

Run: `.venv/bin/python bench/floor.py [--tables 100] [--minutes 10] [--speed 10]
[--broker-restarts 2] [--kills 5]` (develop with `--tables 10 --minutes 1`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from common import (
    MB,
    SITE,
    Broker,
    Devices,
    DiskMonitor,
    cpu_seconds,
    display_section,
    last_line,
    machine,
    mqtt_section,
    ms,
    percentile,
    raise_fd_limit,
    rss_bytes,
)

from controller.logging import configure_logging
from simulators.mosquitto import free_port, with_parent
from simulators.tables import TableProcess

FEED = f"casino/{SITE}/paigow/#"
PROGRESS_EVERY = 10.0
PRESS_TO_DEAL = 0.2  # s between the RNG press and the deal's first frame


def now_wall() -> float:
    return time.time()


# --- the casino system (a separate process) --------------------------------------------------


async def subscribe(port: int, out: TextIO, client_id: str, delay: float) -> None:
    """Receive everything under FEED with a persistent MQTT 5 session until SIGTERM; write each
    message (and each connect and loss of the link) as one JSON line, flushed at once."""
    # The pit package, not bench/pit.py beside this script (first on the path when run).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pit.broker import BrokerError, Link, Session

    def write(record: dict[str, Any]) -> None:
        out.write(json.dumps(record, separators=(",", ":")) + "\n")
        out.flush()

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    stopper = asyncio.ensure_future(stop.wait())
    attempt = 0
    # The pit's own MQTT room (pit.broker): a persistent MQTT 5 session, on paho's public API.
    link = Link("127.0.0.1", port, client_id, persistent=True, session_expiry=3600,
                keepalive=10, timeout=5)  # fmt: skip
    while not stop.is_set():
        try:
            async with Session(link) as client:
                attempt = 0
                write({"event": "connected", "t": now_wall(), "session": client.session_present})
                # Retained device states are not news: never sent at subscribe (RH 2).
                await client.subscribe(FEED, timeout=30, retain_handling=2)
                print("subscribed", flush=True)
                while await client.arrived(stopper):
                    for message in client.take(1000):
                        write(_record(message.topic, bytes(message.payload), message.retain))
        except BrokerError as exc:
            write({"event": "lost", "t": now_wall(), "error": str(exc)[:200]})
            attempt += 1
            # A fast reconnect (0.1 s, 0.2 s, … up to 1 s) unless told to take ``delay`` s.
            await asyncio.wait({stopper}, timeout=delay or min(0.1 * attempt, 1.0))
    stopper.cancel()


def _record(topic: str, raw: bytes, retain: bool) -> dict[str, Any]:
    """One received message as the analysis reads it: when, where, and the feed's fields."""
    record: dict[str, Any] = {"t": now_wall(), "topic": topic, "retain": retain}
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict):
        payload = body.get("payload") or {}
        for key in ("msg_id", "table_id", "seq", "replayed", "schema"):
            record[key] = body.get(key)
        for key in ("round_id", "round_seq", "status", "shuffle_id", "state"):
            if key in payload:
                record[key] = payload[key]
    return record


def subscriber_main(args: argparse.Namespace) -> int:
    with open(args.out, "a", encoding="utf-8") as out:
        asyncio.run(subscribe(args.port, out, args.client_id, args.subscriber_delay))
    return 0


# --- the floor -------------------------------------------------------------------------------


@dataclass
class Deal:
    table: str
    shuffle_id: str
    started: float  # wall time of the first frame
    stub: float  # wall time after the stub frame was written
    killed: bool = False  # the daemon was killed while this deal was on the line


@dataclass
class Table:
    index: int
    process: TableProcess
    devices: Devices
    up: asyncio.Event = field(default_factory=asyncio.Event)
    in_deal: asyncio.Event = field(default_factory=asyncio.Event)
    deal_began: asyncio.Event = field(default_factory=asyncio.Event)
    deals: int = 0
    skipped: int = 0
    late: int = 0
    kills: int = 0

    @property
    def id(self) -> str:
        return self.process.table_id


@dataclass
class Incident:
    kind: str  # "broker_restart" or "kill"
    at: float  # wall time it began
    detail: dict[str, Any] = field(default_factory=dict)


class Floor:
    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.period = args.round_seconds / args.speed
        self.frame_interval = args.deal_seconds / args.speed / 10  # ten frames a deal
        self.random = random.Random(args.seed)
        self.broker = Broker(
            workdir / "broker",
            persistence=args.persistence,
            autosave=30,
            # The casino system's queue holds what arrives while it reconnects (default 1000).
            options=["max_queued_messages 100000", "max_inflight_messages 100"],
        )
        self.tables: list[Table] = []
        self.deals: list[Deal] = []
        self.incidents: list[Incident] = []
        self.feed_path = workdir / "casino-feed.jsonl"
        self.subscriber: subprocess.Popen[bytes] | None = None
        self.stopping = asyncio.Event()
        self.started_wall = 0.0
        self.backlog_peak = 0
        self._feed_offset = 0
        self._feed_seen: set[str] = set()
        self._feed_rounds = 0
        self._feed_lat: list[float] = []
        self._deal_stub: dict[tuple[str, str], float] = {}

    # --- setting up ------------------------------------------------------------------------

    def make_tables(self) -> None:
        for i in range(self.args.tables):
            table_id = f"PG-F{i + 1:03d}"
            workdir = self.workdir / table_id
            workdir.mkdir(parents=True)
            display = display_section(free_port()) if self.args.display else display_section(None)
            process = TableProcess(
                table_id, workdir, extra=mqtt_section(self.broker.port) + display
            )
            process.write_config()
            devices = Devices.make(workdir, seed=1000 + i, interval=self.frame_interval)
            self.tables.append(Table(i, process, devices))

    def start_subscriber(self) -> None:
        command = [sys.executable, __file__, "--subscriber", "--port", str(self.broker.port)]
        command += ["--subscriber-delay", str(self.args.subscriber_delay)]
        with open(self.workdir / "subscriber.log", "ab") as log:
            self.subscriber = subprocess.Popen(
                with_parent([*command, "--out", str(self.feed_path)]),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
            )

    async def wait_subscribed(self) -> None:
        assert self.subscriber is not None and self.subscriber.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(self.subscriber.stdout.readline), 30)
        if b"subscribed" not in line:
            raise RuntimeError(f"the casino subscriber did not start: {line!r}")

    async def start_table(self, table: Table) -> float:
        before = table.devices.greetings()
        ready = await table.process.start(timeout=120)
        if not await table.devices.wait_greeted(before, timeout=60):
            raise RuntimeError(f"{table.id}: the daemon did not open its device ports")
        table.up.set()
        return ready

    async def start_all(self) -> list[float]:
        for table in self.tables:
            await table.devices.open()
        ready: list[float] = []
        batch = 4  # two cores: a few interpreters starting at once
        for i in range(0, len(self.tables), batch):
            group = self.tables[i : i + batch]
            ready += await asyncio.gather(*(self.start_table(t) for t in group))
            if (i + batch) % 20 == 0 or i + batch >= len(self.tables):
                print(f"  {min(i + batch, len(self.tables))} daemons ready", flush=True)
        return ready

    # --- dealing ---------------------------------------------------------------------------

    async def dealer(self, table: Table, first: float, end: float) -> None:
        loop = asyncio.get_running_loop()
        slot = first
        while slot < end and not self.stopping.is_set():
            wait = slot - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            elif -wait > self.period:
                table.late += 1  # this box fell a whole round behind: deal now, keep the pace
                slot = loop.time()
            if not table.up.is_set():
                table.skipped += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(table.up.wait(), max(0.0, end - loop.time()))
                if loop.time() >= end:
                    return
            await table.devices.rng.press()
            await asyncio.sleep(PRESS_TO_DEAL)
            started = now_wall()
            table.devices.port.stub_at = None
            table.in_deal.set()
            table.deal_began.set()
            kills = table.kills
            try:
                plan = await table.devices.shuffler.deal()
            finally:
                table.in_deal.clear()
            stub = table.devices.port.stub_at
            table.deals += 1
            self.deals.append(
                Deal(
                    table.id,
                    plan.shuffle_id,
                    started,
                    stub[1] if stub else started,
                    killed=table.kills != kills,
                )
            )
            self._deal_stub[(table.id, plan.shuffle_id)] = stub[1] if stub else started
            slot += self.period

    # --- failures --------------------------------------------------------------------------

    async def restart_broker(self) -> None:
        began = now_wall()
        t0 = time.perf_counter()
        if self.args.broker_crash:
            await self.broker.kill()
        else:
            await self.broker.stop()
        stopped = time.perf_counter() - t0
        await asyncio.sleep(self.args.broker_down)
        backlog, _ = await asyncio.to_thread(self.journal_counts)
        self.backlog_peak = max(self.backlog_peak, backlog)
        await self.broker.start()
        up = now_wall()
        how = "killed -9" if self.args.broker_crash else f"clean stop {stopped:.2f} s"
        print(
            f"  ! broker restarted: {how}, down {up - began:.1f} s, {backlog} messages waiting "
            "in the outboxes",
            flush=True,
        )
        self.incidents.append(
            Incident(
                "broker_restart",
                began,
                {
                    "stop_s": round(stopped, 2),
                    "down_s": round(up - began, 1),
                    "backlog": backlog,
                    "up_at": up,
                },
            )
        )

    async def kill_table(self, table: Table, mid_deal: bool) -> None:
        if mid_deal:
            table.deal_began.clear()  # the next deal from its first frame
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(table.deal_began.wait(), 3 * self.period)
            # between the second packet and the last (frames go out every frame_interval)
            await asyncio.sleep(self.frame_interval * self.random.uniform(2.5, 7.5))
        was_dealing = table.in_deal.is_set()
        began = now_wall()
        table.up.clear()
        table.kills += 1
        code = await table.process.kill()
        await asyncio.sleep(self.args.restart_sec)  # systemd's RestartSec
        ready = await self.start_table(table)
        back = now_wall() - began
        print(
            f"  ! {table.id} killed -9 {'mid-deal' if was_dealing else 'between rounds'} "
            f"(exit {code}); READY again after {back:.2f} s",
            flush=True,
        )
        self.incidents.append(
            Incident(
                "kill",
                began,
                {
                    "table": table.id,
                    "mid_deal": was_dealing,
                    "exit": code,
                    "back_s": round(back, 2),
                    "ready_s": round(ready, 2),
                },
            )
        )

    async def failures(self, start: float) -> None:
        """Broker restarts and kills at fixed fractions of the run (a kill's table by seed)."""
        duration = self.args.minutes * 60
        plan: list[tuple[float, str, int]] = []
        for i in range(self.args.broker_restarts):
            plan.append((duration * (i + 1) / (self.args.broker_restarts + 1), "broker", i))
        for j in range(self.args.kills):
            plan.append((duration * 0.9 * (j + 0.5) / self.args.kills, "kill", j))
        victims = self.random.sample(self.tables, min(self.args.kills, len(self.tables)))
        loop = asyncio.get_running_loop()
        running: set[asyncio.Task[None]] = set()
        for at, kind, n in sorted(plan):
            delay = start + at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if kind == "broker":
                await self.restart_broker()
            elif n < len(victims):
                task = asyncio.create_task(self.kill_table(victims[n], mid_deal=n % 2 == 0))
                running.add(task)
                task.add_done_callback(running.discard)
        if running:
            await asyncio.gather(*running)

    # --- watching --------------------------------------------------------------------------

    def journal_counts(self) -> tuple[int, int]:
        """Outbox messages pending and rounds closed, over every journal (read-only)."""
        pending = closed = 0
        for table in self.tables:
            with contextlib.suppress(sqlite3.Error), read_only(table.process.journal_path) as db:
                pending += db.execute("SELECT count(*) FROM outbox").fetchone()[0]
                closed += db.execute(
                    "SELECT count(*) FROM rounds WHERE status != 'open'"
                ).fetchone()[0]
        return pending, closed

    def read_feed(self) -> None:
        """Take in what the casino system wrote since the last look."""
        with contextlib.suppress(FileNotFoundError), open(self.feed_path, "rb") as f:
            f.seek(self._feed_offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._feed_offset += end
        for line in data[:end].splitlines():
            record = json.loads(line)
            msg_id = record.get("msg_id")
            if not msg_id or msg_id in self._feed_seen or record["topic"].endswith("/status"):
                continue
            self._feed_seen.add(msg_id)
            if record["topic"].endswith(("/round", "/dead")):
                self._feed_rounds += 1
                stub = self._deal_stub.get((record["table_id"], record.get("shuffle_id", "")))
                if stub is not None:
                    self._feed_lat.append(record["t"] - stub)

    async def progress(self, start_wall: float) -> None:
        while not self.stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), PROGRESS_EVERY)
            pending, closed = await asyncio.to_thread(self.journal_counts)
            self.backlog_peak = max(self.backlog_peak, pending)
            self.read_feed()
            recent = self._feed_lat[-2000:]
            up = sum(t.up.is_set() for t in self.tables)
            print(
                f"  {now_wall() - start_wall:6.0f} s  deals {len(self.deals):6d}  journaled "
                f"{closed:6d}  received {self._feed_rounds:6d} rounds / {len(self._feed_seen):6d} "
                f"msgs  outbox {pending:5d}  up {up}/{len(self.tables)}  recent p99 "
                f"{percentile(recent, 99) * 1000:7.0f} ms  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )

    # --- ending ----------------------------------------------------------------------------

    async def drain(self) -> tuple[bool, float]:
        """Wait until every outbox is empty and the casino system has every message."""
        began = time.monotonic()
        deadline = began + self.args.drain_timeout
        seen, still_since = -1, began
        while time.monotonic() < deadline:
            pending, _ = await asyncio.to_thread(self.journal_counts)
            self.read_feed()
            expected = await asyncio.to_thread(self.expected_messages)
            if pending == 0 and len(self._feed_seen) >= expected:
                return True, time.monotonic() - began
            if pending or len(self._feed_seen) != seen:
                seen, still_since = len(self._feed_seen), time.monotonic()
            elif time.monotonic() - still_since > 20:
                break  # every outbox is empty and nothing more arrives: what is missing is lost
            await asyncio.sleep(1.0)
        return False, time.monotonic() - began

    def expected_messages(self) -> int:
        total = 0
        for table in self.tables:
            with contextlib.suppress(sqlite3.Error), read_only(table.process.journal_path) as db:
                total += msg_seq(db, table.id)
        return total

    def usage(self) -> dict[str, tuple[int, float, int]]:
        """Per table: the daemon's pid, CPU seconds so far and RSS bytes."""
        out = {}
        for table in self.tables:
            pid = table.process.pid
            if pid is not None and table.process.alive:
                with contextlib.suppress(OSError, RuntimeError):
                    out[table.id] = (pid, cpu_seconds(pid), rss_bytes(pid))
        return out

    async def stop_all(self) -> dict[str, Any]:
        for table in self.tables:
            table.process.terminate()
        codes = await asyncio.gather(
            *(t.process.stop(timeout=30, signalled=True) for t in self.tables)
        )
        for table in self.tables:
            table.process.close()
        return dict(Counter(str(c) for c in codes))


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A journal opened for reading only (query_only: a read-only URI cannot open a WAL file
    whose daemon has stopped and removed its -shm)."""
    conn = sqlite3.connect(path, timeout=10)
    try:
        conn.execute("PRAGMA query_only = 1")
        yield conn
    finally:
        conn.close()


def msg_seq(db: sqlite3.Connection, table_id: str) -> int:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (f"msg_seq/{table_id}",)).fetchone()
    return int(row[0]) if row else 0


# --- the audit -------------------------------------------------------------------------------


def audit(floor: Floor) -> dict[str, Any]:
    """Compare every journal with what the casino system received."""
    records = [json.loads(line) for line in floor.feed_path.read_bytes().splitlines()]
    feed = [r for r in records if "msg_id" in r and not r["topic"].endswith("/status")]
    connects = [r for r in records if r.get("event") == "connected"]
    statuses = [r for r in records if r.get("topic", "").endswith("/status")]
    by_table: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in feed:
        by_table[r["table_id"]].append(r)
    stubs = {(d.table, d.shuffle_id): d.stub for d in floor.deals}
    totals: Counter[str] = Counter()
    problems: list[str] = []
    latencies: list[float] = []
    live_latencies: list[float] = []
    for table in floor.tables:
        got = by_table.get(table.id, [])
        first: dict[str, dict[str, Any]] = {}
        for r in got:
            first.setdefault(r["msg_id"], r)
        totals["received"] += len(got)
        totals["duplicates"] += len(got) - len(first)
        with read_only(table.process.journal_path) as db:
            expected = msg_seq(db, table.id)
            left = db.execute("SELECT count(*) FROM outbox").fetchone()[0]
            rounds = db.execute(
                "SELECT round_id, seq, status, reason, json_extract(result, '$.shuffle_id') "
                "FROM rounds ORDER BY seq"
            ).fetchall()
        totals["messages_journaled"] += expected
        totals["outbox_left"] += left
        seqs = Counter(r["seq"] for r in first.values())
        missing = [s for s in range(1, expected + 1) if s not in seqs]
        conflicts = [s for s, n in seqs.items() if n > 1 or not 1 <= s <= expected]
        totals["message_gaps"] += len(missing)
        totals["seq_conflicts"] += len(conflicts)
        if missing:
            problems.append(f"{table.id}: messages never received, seq {short(missing)}")
        if conflicts:
            problems.append(f"{table.id}: seq with two msg_ids or unknown {short(conflicts)}")
        # Order: first arrivals per table should climb in seq.
        arrivals = sorted(first.values(), key=lambda r: r["t"])
        high = 0
        for r in arrivals:
            if r["seq"] < high:
                totals["out_of_order"] += 1
            high = max(high, r["seq"])
        # Rounds: every closed round exactly once on round/dead, with the journal's status.
        round_msgs: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in first.values():
            if r["topic"].endswith(("/round", "/dead")):
                round_msgs[r["round_id"]].append(r)
        closed = [row for row in rounds if row[2] != "open"]
        totals["rounds_journaled"] += len(closed)
        totals["rounds_open_at_end"] += len(rounds) - len(closed)
        totals["rounds_voided_restart"] += sum(row[3] == "restart" for row in closed)
        for status in ("settled", "dead", "misdeal", "void"):
            totals[f"rounds_{status}"] += sum(row[2] == status for row in closed)
        for round_id, seq, status, _reason, shuffle in closed:
            msgs = round_msgs.pop(round_id, [])
            if not msgs:
                totals["rounds_missing"] += 1
                problems.append(f"{table.id}: round {seq} ({round_id}, {status}) never received")
                continue
            totals["rounds_received"] += 1
            if len(msgs) > 1:
                totals["rounds_twice"] += 1
                problems.append(f"{table.id}: round {seq} received under {len(msgs)} msg_ids")
            if msgs[-1].get("status") != status:
                totals["rounds_wrong_status"] += 1
                problems.append(
                    f"{table.id}: round {seq} is {status} in the journal, "
                    f"{msgs[-1].get('status')} on the wire"
                )
            stub = stubs.get((table.id, shuffle or ""))
            if stub is not None and status == "settled":
                latency = msgs[0]["t"] - stub
                latencies.append(latency)
                if not msgs[0].get("replayed"):
                    live_latencies.append(latency)
        for round_id in round_msgs:
            totals["rounds_unknown"] += 1
            problems.append(f"{table.id}: round {round_id} received but not in the journal")
        order = [
            r["round_seq"]
            for r in sorted(first.values(), key=lambda r: r["seq"])
            if r["topic"].endswith(("/round", "/dead"))
        ]
        if order != sorted(order):
            totals["round_seq_disorder"] += 1
            problems.append(f"{table.id}: round numbers do not climb with message seq")
        totals["replayed"] += sum(bool(r.get("replayed")) for r in first.values())
    journaled_shuffles = set()
    for table in floor.tables:
        with read_only(table.process.journal_path) as db:
            journaled_shuffles |= {
                (table.id, s)
                for (s,) in db.execute(
                    "SELECT json_extract(result, '$.shuffle_id') FROM rounds "
                    "WHERE result IS NOT NULL"
                )
            }
    unjournaled = [d for d in floor.deals if (d.table, d.shuffle_id) not in journaled_shuffles]
    return {
        "totals": totals,
        "problems": problems,
        "latencies": latencies,
        "live_latencies": live_latencies,
        "connects": connects,
        "statuses": statuses,
        "unjournaled_deals": unjournaled,
    }


def cpu_between(
    before: dict[str, tuple[int, float, int]], after: dict[str, tuple[int, float, int]]
) -> tuple[float, float]:
    """CPU seconds the daemons used between two looks (a restarted daemon counts from its
    start; a killed one's last seconds are lost) and their mean RSS at the second."""
    cpu = 0.0
    for table, (pid, seconds, _) in after.items():
        was = before.get(table)
        cpu += seconds - (was[1] if was is not None and was[0] == pid else 0.0)
    rss = sum(r for _, _, r in after.values()) / max(1, len(after))
    return cpu, rss


def short(values: list[int]) -> str:
    return ", ".join(map(str, values[:10])) + (f" … ({len(values)})" if len(values) > 10 else "")


def reconnect_times(floor: Floor, statuses: list[dict[str, Any]]) -> list[float]:
    """Per broker restart: seconds from the broker being up until the last table said online."""
    out = []
    for incident in floor.incidents:
        if incident.kind != "broker_restart":
            continue
        up = incident.detail["up_at"]
        first: dict[str, float] = {}
        for r in statuses:
            if r.get("state") == "online" and r["t"] >= up:
                first.setdefault(r["table_id"], r["t"])
        if len(first) == len(floor.tables):
            out.append(round(max(first.values()) - up, 2))
        else:
            out.append(float("nan"))
    return out


def log_summary(floor: Floor) -> Counter[str]:
    """Error and warning events in the daemons' logs, by event name."""
    events: Counter[str] = Counter()
    for table in floor.tables:
        with contextlib.suppress(FileNotFoundError):
            for line in (
                (table.process.workdir / "daemon.log").read_text("utf-8", "replace").splitlines()
            ):
                try:
                    entry = json.loads(line)
                except ValueError:
                    events["(not json) " + line[:60]] += 1
                    continue
                if entry.get("level") in ("error", "critical", "warning"):
                    events[f"{entry.get('level')} {entry.get('event')}"] += 1
    return events


# --- the run ---------------------------------------------------------------------------------


async def run(args: argparse.Namespace, workdir: Path) -> tuple[dict[str, Any], bool]:
    floor = Floor(args, workdir)
    await floor.broker.start()
    floor.make_tables()
    floor.start_subscriber()
    await floor.wait_subscribed()
    print(
        f"floor: {args.tables} tables, a round every {floor.period:g} s per table "
        f"({args.tables / floor.period:.1f} rounds/s), {args.minutes:g} min, broker on "
        f"127.0.0.1:{floor.broker.port} (persistence {'on' if args.persistence else 'OFF'}), "
        f"workdir {workdir}",
        flush=True,
    )
    t0 = time.perf_counter()
    ready = await floor.start_all()
    print(
        f"all {args.tables} daemons READY in {time.perf_counter() - t0:.0f} s "
        f"(each: p50 {percentile(ready, 50):.2f} s, max {max(ready):.2f} s)",
        flush=True,
    )
    loop = asyncio.get_running_loop()
    start = loop.time()
    start_wall = now_wall()
    end = start + args.minutes * 60
    disk = DiskMonitor(workdir, every=0.5)
    before = floor.usage()
    with disk:
        dealers = [
            asyncio.create_task(floor.dealer(t, start + floor.random.uniform(0, floor.period), end))
            for t in floor.tables
        ]
        watcher = asyncio.create_task(floor.progress(start_wall))
        failures = asyncio.create_task(floor.failures(start))
        await asyncio.gather(*dealers)
        await failures
        dealt_s = loop.time() - start
        cpu_s, rss_mean = cpu_between(before, floor.usage())
        print(f"dealing stopped after {dealt_s:.0f} s; draining…", flush=True)
        drained, drain_s = await floor.drain()
        floor.stopping.set()
        await watcher
    exits = await floor.stop_all()
    for table in floor.tables:
        await table.devices.close()
    assert floor.subscriber is not None
    floor.subscriber.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.to_thread(floor.subscriber.wait), 15)
    except TimeoutError:
        floor.subscriber.kill()
    await floor.broker.stop()
    report = audit(floor)
    totals = report["totals"]
    lat, live = report["latencies"], report["live_latencies"]
    reconnects = reconnect_times(floor, report["statuses"])
    kills = [i.detail for i in floor.incidents if i.kind == "kill"]
    restarts = [
        {k: v for k, v in i.detail.items() if k != "up_at"}
        for i in floor.incidents
        if i.kind == "broker_restart"
    ]
    sub_connects = report["connects"]
    logs = log_summary(floor)
    target = args.tables * args.minutes * 60 / floor.period
    loss = (
        totals["message_gaps"]
        + totals["rounds_missing"]
        + totals["seq_conflicts"]
        + totals["rounds_wrong_status"]
        + totals["rounds_twice"]
        + totals["rounds_unknown"]
        + totals["outbox_left"]
        + totals["round_seq_disorder"]
    )
    print()
    print(f"machine: {machine()}")
    print(
        f"deals: {len(floor.deals)} of {target:.0f} scheduled ({len(floor.deals) / target:.0%}); "
        f"late slots {sum(t.late for t in floor.tables)}, skipped while down "
        f"{sum(t.skipped for t in floor.tables)}; deals the journal never saw "
        f"{len(report['unjournaled_deals'])} "
        f"(of them during a kill: {sum(d.killed for d in report['unjournaled_deals'])})"
    )
    print(
        f"rounds journaled {totals['rounds_journaled']} (settled {totals['rounds_settled']}, "
        f"dead {totals['rounds_dead']}, misdeal {totals['rounds_misdeal']}, void "
        f"{totals['rounds_void']}, of which voided on restart {totals['rounds_voided_restart']}); "
        f"open at the end {totals['rounds_open_at_end']}"
    )
    print(
        f"casino system: rounds received {totals['rounds_received']}, missing "
        f"{totals['rounds_missing']}, twice {totals['rounds_twice']}, wrong status "
        f"{totals['rounds_wrong_status']}, unknown {totals['rounds_unknown']}"
    )
    print(
        f"messages: journaled {totals['messages_journaled']}, received {totals['received']} "
        f"(duplicates {totals['duplicates']}, replayed {totals['replayed']}), gaps "
        f"{totals['message_gaps']}, seq conflicts {totals['seq_conflicts']}, arrivals out of "
        f"seq order {totals['out_of_order']}, left in outboxes {totals['outbox_left']}"
    )
    print(
        f"latency deal→casino system (settled rounds): p50 {percentile(lat, 50) * 1000:.0f} ms, "
        f"p99 {percentile(lat, 99) * 1000:.0f} ms, max {max(lat, default=0) * 1000:.0f} ms; "
        f"live only (not replayed): p50 {percentile(live, 50) * 1000:.0f} ms, p99 "
        f"{percentile(live, 99) * 1000:.0f} ms"
    )
    print(
        f"broker restarts: {restarts}; all tables online again after {reconnects} s; casino "
        f"system connects {len(sub_connects)} (session resumed: "
        f"{[c['session'] for c in sub_connects]})"
    )
    for k in kills:
        print(f"kill: {k}")
    print(
        f"daemons: {cpu_s:.0f} CPU s over {dealt_s:.0f} s of dealing "
        f"({cpu_s / dealt_s:.2f} cores; {cpu_s / max(1, len(floor.deals)) * 1000:.0f} ms per "
        f"round, idle time included), mean RSS {rss_mean / MB:.0f} MB per daemon"
    )
    print(f"drained in {drain_s:.1f} s: {'yes' if drained else 'NO'}; daemon exits {exits}")
    monitor = disk.durations()
    print(
        f"disk monitor (fsync every 0.5 s): p50 {percentile(monitor, 50) * 1000:.1f} ms, p99 "
        f"{percentile(monitor, 99) * 1000:.0f} ms, max {max(monitor, default=0) * 1000:.0f} ms"
    )
    if logs:
        print(
            "daemon log warnings/errors: " + ", ".join(f"{k} ×{n}" for k, n in logs.most_common(12))
        )
    for line in report["problems"][:30]:
        print(f"PROBLEM {line}")
    ok = loss == 0 and drained
    print(f"verdict: {'nothing lost' if ok else 'LOSS OR UNDELIVERED MESSAGES'}")
    figures = {
        "tables": args.tables,
        "minutes": args.minutes,
        "speed": args.speed,
        "deals": len(floor.deals),
        "deals_scheduled": round(target),
        "rounds": totals["rounds_journaled"],
        "rounds_received": totals["rounds_received"],
        "rounds_missing": totals["rounds_missing"],
        "gaps": totals["message_gaps"],
        "duplicates": totals["duplicates"],
        "replayed": totals["replayed"],
        "out_of_order": totals["out_of_order"],
        "messages": totals["messages_journaled"],
        "outbox_left": totals["outbox_left"],
        "voided_on_restart": totals["rounds_voided_restart"],
        "p50_ms": ms(percentile(lat, 50)),
        "p99_ms": ms(percentile(lat, 99)),
        "max_ms": ms(max(lat, default=0.0)),
        "live_p99_ms": ms(percentile(live, 99)),
        "broker_restarts": len(restarts),
        "reconnect_all_s": reconnects,
        "kills": len(kills),
        "kill_to_ready_s": [k["back_s"] for k in kills],
        "backlog_peak": floor.backlog_peak,
        "daemon_cores": round(cpu_s / dealt_s, 2),
        "daemon_rss_mb_mean": round(rss_mean / MB, 1),
        "drained": drained,
        "disk_fsync_p99_ms": ms(percentile(monitor, 99)),
        "loss": loss,
        **{f"machine_{k}": v for k, v in machine().items()},
    }
    return figures, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tables", type=int, default=100)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--speed", type=float, default=10.0, help="times live speed")
    parser.add_argument("--broker-restarts", type=int, default=2)
    parser.add_argument("--kills", type=int, default=5, help="daemons killed -9 and restarted")
    parser.add_argument("--round-seconds", type=float, default=60.0, help="a live round")
    parser.add_argument("--deal-seconds", type=float, default=20.0, help="a live deal's frames")
    parser.add_argument("--broker-down", type=float, default=5.0, help="outage per restart, s")
    parser.add_argument(
        "--restart-sec",
        type=float,
        default=2.0,
        help="pause before a killed daemon starts again (systemd/paigow-table.service: 2 s)",
    )
    parser.add_argument("--drain-timeout", type=float, default=180.0)
    parser.add_argument(
        "--no-persistence",
        dest="persistence",
        action="store_false",
        help="broker without persistence (shows what a restart then loses)",
    )
    parser.add_argument(
        "--broker-crash", action="store_true", help="restart the broker by kill -9, not SIGTERM"
    )
    parser.add_argument("--no-display", dest="display", action="store_false")
    parser.add_argument(
        "--subscriber-delay",
        type=float,
        default=0.0,
        help="the casino system waits this long before reconnecting (default: 0.1 s, growing "
        "to 1 s); with --no-persistence a delay longer than the tables' shows the loss",
    )
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (new) and keep it")
    # the casino system's process
    parser.add_argument("--subscriber", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--client-id", default="casino-system", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.subscriber:
        return subscriber_main(args)
    configure_logging("WARNING", "console")
    raise_fd_limit()
    if args.keep:
        workdir = Path(args.keep)
        workdir.mkdir(parents=True)
    else:
        workdir = Path(tempfile.mkdtemp(prefix="paigow-floor-"))
    figures, ok = asyncio.run(run(args, workdir))
    if ok and not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    elif not ok:
        print(f"(kept {workdir} for inspection)")
    last_line(figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
