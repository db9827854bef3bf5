"""The pit at scale (issue 25): many simulated tables publish real feeds — schema-valid, sequenced,
hash-chained and signed-checkpointed, made with the table's own message code (pit/simfeed.py) —
into one Mosquitto; the pit (``paigow-table pit run``, a separate process) ingests them into a
PostgreSQL of the benchmark's own (a private cluster in a temporary directory, never the
machine's) or SQLite; during the run the broker, the pit and PostgreSQL are each restarted once.

* Each table deals a round every ``--round-seconds`` (6 s): the round, sometimes a player's
  setting or an alarm, and a checkpoint. A table's messages leave in order and stay in its
  outbox until the broker acknowledged them (PUBACK), as a table's journal does; a lost link
  sends them again, replayed, with the same msg_id.
* Publishers: ``--connections`` MQTT connections, the tables spread over them.
* The broker: persistence on; its restart is SIGTERM (it saves the pit's session and queued
  messages) and a start. The pit: killed -9 and started again. PostgreSQL: ``pg_ctl restart``.
* A reader of the pit page's live stream (server-sent events) measures publish → page: from the
  envelope's time (set when the message is made, just before it is published) to the event.

Afterwards the database is compared with what was published: lost (a seq never stored),
duplicated (a seq stored twice), gaps reported and filled. The last line is one JSON object.

Run: `.venv/bin/python bench/pit.py --quick` (100 tables, about 4 minutes) or
`.venv/bin/python bench/pit.py --tables 1000 --minutes 10` (add `--database sqlite` for the
embedded database).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from controller.mqtt.client import Client
from controller.mqtt.wire import NODELAY
from pit.simfeed import SimTable, sim_keys_text, wire
from pit.store import Store, parse_time
from simulators.mosquitto import Mosquitto, free_port, with_parent

PG_BIN = Path("/usr/lib/postgresql/15/bin")
KEY = bytes(range(64, 96))
WINDOW = 100  # messages in flight per publishing connection


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))  # nearest rank
    return ordered[min(rank, len(ordered)) - 1]


# --- a private PostgreSQL --------------------------------------------------------------------


class Postgres:
    """A PostgreSQL cluster of the benchmark's own (run as the postgres user, trust on a unix
    socket directory and 127.0.0.1:port), started, restarted and removed by us."""

    def __init__(self, workdir: Path) -> None:
        self.dir = workdir / "pg"
        self.port = free_port()

    def _run(self, *args: str) -> None:
        subprocess.run(
            ["runuser", "-u", "postgres", "--", *args],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def init(self) -> None:
        self.dir.mkdir(parents=True)
        shutil.chown(self.dir, "postgres")
        shutil.chown(self.dir.parent, "postgres")
        self._run(str(PG_BIN / "initdb"), "-D", str(self.dir / "data"), "-A", "trust",
                  "-U", "postgres")  # fmt: skip
        with open(self.dir / "data" / "postgresql.conf", "a") as conf:
            conf.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.dir}'\nfsync = on\n"
                "synchronous_commit = on\nshared_buffers = 128MB\n"
            )

    def ctl(self, *args: str) -> None:
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-w",
                  "-l", str(self.dir / "log"), *args)  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


# --- the tables ------------------------------------------------------------------------------


class Publisher:
    """One MQTT connection for some tables: their messages in order, each kept until PUBACK."""

    def __init__(self, port: int, index: int) -> None:
        self.port = port
        self.index = index
        self.pending: deque[tuple[str, dict[str, Any]]] = deque()
        self.wake = asyncio.Event()
        self.sent = 0
        self.resent = 0
        self.reconnects = 0

    async def run(self) -> None:
        """Publish in order, up to WINDOW at a time (QoS 1: the broker keeps them in order on
        one connection); a window leaves the outbox only once every PUBACK is in, and a lost
        link sends the window again, replayed (same msg_id)."""
        while True:
            try:
                async with Client(
                    "127.0.0.1", self.port, identifier=f"bench-table-{self.index}",
                    socket_options=NODELAY, keepalive=10, timeout=30,
                    max_inflight_messages=WINDOW,
                ) as client:  # fmt: skip
                    while True:
                        while not self.pending:
                            self.wake.clear()
                            await self.wake.wait()
                        window = [self.pending[i] for i in range(min(WINDOW, len(self.pending)))]
                        payloads = []
                        for topic, body in window:
                            if body.get("_tried"):
                                body["replayed"] = True
                                self.resent += 1
                            body["_tried"] = True
                            clean = {k: v for k, v in body.items() if k != "_tried"}
                            payloads.append((topic, wire(clean)))
                        await asyncio.gather(*(client.publish(t, p, qos=1) for t, p in payloads))
                        for _ in window:
                            self.pending.popleft()
                        self.sent += len(window)
            except aiomqtt.MqttError:
                self.reconnects += 1
                await asyncio.sleep(0.2)

    def add(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        self.pending.extend(messages)
        self.wake.set()


# --- the pit as a process --------------------------------------------------------------------


class PitProcess:
    def __init__(
        self, workdir: Path, broker: int, db_url: str, http: int, tables: list[str]
    ) -> None:
        self.config = workdir / "pit.toml"
        key = workdir / "checkpoint.key"
        key.write_text(KEY.hex() + "\n")
        key.chmod(0o600)
        feed_keys = workdir / "feed-keys"  # each simulated table's feed key, registered
        feed_keys.write_text(sim_keys_text(tables), encoding="utf-8")
        self.config.write_text(
            'log_level = "INFO"\n[site]\nid = "bench"\n'
            f'[broker]\nport = {broker}\nprotocol = "5"\nclient_id = "pit-bench"\nbatch = 500\n'
            f'[database]\nurl = "{db_url}"\n[record]\ncheckpoint_key_file = "{key}"\n'
            f'feed_keys_file = "{feed_keys}"\n'
            f'[web]\nhost = "127.0.0.1"\nport = {http}\n'
        )
        self.log = workdir / "pit.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu = 0.0
        self.rss_max = 0

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                with_parent([sys.executable, "-m", "controller.cli", "pit", "run", "--config",
                             str(self.config)]),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            )  # fmt: skip

    def sample(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = self.proc.pid
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            self._live_cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    self.rss_max = max(self.rss_max, int(line.split()[1]) * 1024)

    _live_cpu = 0.0

    def kill(self) -> None:
        self.sample()
        self.cpu += self._live_cpu
        self._live_cpu = 0.0
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        self.sample()
        self.cpu += self._live_cpu
        self._live_cpu = 0.0
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def watch_page(
    url: str, latencies: list[tuple[float, float]], stop: asyncio.Event, counts: dict[str, int]
) -> None:
    """Read the pit page's live stream; publish→page of every table each event names, as
    (when, seconds)."""
    counts["connects"] = 0
    while not stop.is_set():
        try:
            timeout = aiohttp.ClientTimeout(total=None, sock_read=30)
            async with (
                aiohttp.ClientSession(timeout=timeout) as http,
                http.get(f"{url}/api/events") as response,
            ):
                counts["connects"] += 1
                event = ""
                async for raw in response.content:
                    line = raw.decode().rstrip("\n")
                    if line.startswith("event: "):
                        event = line[7:]
                    elif line.startswith("data: ") and event == "tiles":
                        now = time.time()
                        data = json.loads(line[6:])
                        for sent in data["sent"].values():
                            latencies.append((now, now - parse_time(sent).timestamp()))
                    if stop.is_set():
                        break
        except Exception as exc:  # the pit restarting: connect again
            if os.environ.get("PIT_BENCH_DEBUG"):
                print(f"  page stream: {type(exc).__name__}; reconnecting", flush=True)
            await asyncio.sleep(0.3)


# --- the run ---------------------------------------------------------------------------------


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    postgres = None
    if args.database == "postgresql":
        postgres = Postgres(workdir)
        postgres.init()
        postgres.ctl("start")
        db_url = postgres.url
    else:
        db_url = f"sqlite:///{workdir / 'pit.sqlite3'}"
    broker = Mosquitto(
        workdir / "broker", persistence=True, autosave=5,
        options=["max_queued_messages 1000000", "max_inflight_messages 1000",
                 "max_queued_bytes 0"],
    )  # fmt: skip
    await broker.start()
    http = free_port()
    names = [f"T{i:04d}" for i in range(args.tables)]
    pit = PitProcess(workdir, broker.port, db_url, http, names)
    pit.start()
    url = f"http://127.0.0.1:{http}"
    deadline = time.monotonic() + 60
    while "pit_subscribed" not in (pit.log.read_text() if pit.log.exists() else ""):
        if time.monotonic() > deadline:
            raise RuntimeError(f"the pit did not subscribe: see {pit.log}")
        await asyncio.sleep(0.2)
    # The log says WARNING; wait for the page instead of a log line.
    await asyncio.sleep(1.0)
    tables = [SimTable(n, site="bench", key=KEY, seed=i + 1) for i, n in enumerate(names)]
    publishers = [Publisher(broker.port, i) for i in range(args.connections)]
    senders = [asyncio.create_task(p.run()) for p in publishers]
    latencies: list[tuple[float, float]] = []
    base_store = Store(db_url, root="casino/bench/paigow/")
    db_bytes_before = base_store.database_bytes()
    base_store.close()
    counter = Store(db_url, root="casino/bench/paigow/")
    rates: list[float] = []
    last_count: tuple[float, int] = (time.monotonic(), 0)
    restart_times: list[float] = []
    stop_page = asyncio.Event()
    page_counts: dict[str, int] = {}
    page = asyncio.create_task(watch_page(url, latencies, stop_page, page_counts))
    now = datetime.now(UTC)
    for i, t in enumerate(tables):
        publishers[i % len(publishers)].add([t.status(now), *t.devices(now)])
    duration = args.minutes * 60
    period = args.round_seconds
    started = time.monotonic()
    wall_start = time.time()
    events: list[dict[str, Any]] = []
    plan = [
        (0.25, "broker"),
        (0.45, "pit"),
        (0.65, "postgresql" if postgres is not None else "none"),
    ]
    rounds = 0
    last_progress = started
    pit_restart_at: float | None = None
    while (elapsed := time.monotonic() - started) < duration:
        # Every table deals once per period, spread evenly over it.
        slot = int(elapsed / period * len(tables))
        due = min(slot, len(tables) * (int(elapsed // period) + 1))
        while rounds < due:
            t = tables[rounds % len(tables)]
            publishers[(rounds % len(tables)) % len(publishers)].add(
                t.next_round(datetime.now(UTC))
            )
            rounds += 1
        while plan and elapsed >= plan[0][0] * duration:
            _, what = plan.pop(0)
            at = time.time()
            restart_times.append(at)
            if what == "broker":
                await broker.stop()
                await broker.start()
            elif what == "pit":
                pit.kill()
                await asyncio.sleep(2.0)  # as systemd's RestartSec=2 would
                pit.start()
                pit_restart_at = time.monotonic()
            elif what == "postgresql" and postgres is not None:
                await asyncio.to_thread(postgres.ctl, "restart", "-m", "fast")
            if what != "none":
                events.append({"restart": what, "at_s": round(elapsed, 1),
                               "took_s": round(time.time() - at, 2)})  # fmt: skip
        pit.sample()
        if time.monotonic() - last_count[0] >= 2.0:
            with contextlib.suppress(Exception):  # the database may be restarting
                row = counter.one("SELECT count(*) FROM messages")
                n = int(row[0]) if row else 0
                rates.append((n - last_count[1]) / (time.monotonic() - last_count[0]))
                last_count = (time.monotonic(), n)
            if counter.conn is None or getattr(counter.conn, "closed", False):
                with contextlib.suppress(Exception):
                    counter.connect()
        if time.monotonic() - last_progress > 15:
            last_progress = time.monotonic()
            backlog = sum(len(p.pending) for p in publishers)
            print(f"  {elapsed:5.0f} s  {rounds} rounds dealt, {backlog} waiting to publish",
                  flush=True)  # fmt: skip
        await asyncio.sleep(0.05)
    dealing_s = time.monotonic() - started
    # Drain: every message published, then every message in the database.
    publish_deadline = time.monotonic() + 600
    while any(p.pending for p in publishers) and time.monotonic() < publish_deadline:
        await asyncio.sleep(0.2)
    unpublished = sum(len(p.pending) for p in publishers)
    expected = {t.table_id: t.seq for t in tables}
    total_sequenced = sum(expected.values())
    total_messages = total_sequenced + len(tables)  # and one status each
    store = Store(db_url, root="casino/bench/paigow/")
    drain_deadline = time.monotonic() + 300
    while True:
        with contextlib.suppress(Exception):
            got = store.one("SELECT count(*) FROM messages WHERE sequenced = 1")
            if got is not None and got[0] >= total_sequenced:
                break
        if time.monotonic() > drain_deadline:
            break
        pit.sample()
        await asyncio.sleep(0.5)
    ingest_end = time.monotonic()
    await asyncio.sleep(1.0)  # the last page events
    stop_page.set()
    pit.stop()
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(page, 10)  # the stream ends with the pit
    page_reconnects = max(0, page_counts.get("connects", 0) - 1)
    for sender in senders:
        sender.cancel()
    await asyncio.gather(*senders, return_exceptions=True)
    await broker.stop()
    # The verdict.
    stored = dict(store.all("SELECT table_id, count(*) FROM messages WHERE sequenced = 1 "
                            "GROUP BY table_id"))  # fmt: skip
    distinct = dict(store.all("SELECT table_id, count(DISTINCT seq) FROM messages "
                              "WHERE sequenced = 1 GROUP BY table_id"))  # fmt: skip
    lost = sum(n - distinct.get(t, 0) for t, n in expected.items())
    duplicated = sum(stored.get(t, 0) - distinct.get(t, 0) for t in expected)
    counts = store.counts()
    gaps_filled = counts["gaps_reported"] - counts["gaps_open"]
    rows = 0
    for name in ("messages", "rounds", "players", "alarms", "checkpoints", "missing"):
        row = store.one(f"SELECT count(*) FROM {name}")
        rows += int(row[0]) if row else 0
    db_bytes = store.database_bytes() - db_bytes_before
    counter.close()
    steady = [lat for t, lat in latencies if not any(r <= t <= r + 20 for r in restart_times)]
    every = [lat for _, lat in latencies]
    if os.environ.get("PIT_BENCH_DEBUG"):
        for at, lat in sorted(latencies, key=lambda x: -x[1])[:8]:
            print(f"  slow: {lat:.2f} s at {at - wall_start:.1f} s", flush=True)
        print(f"  restarts at {[round(r - wall_start, 1) for r in restart_times]}", flush=True)
    db_rounds = counts["rounds"]
    store.close()
    if postgres is not None:
        with contextlib.suppress(Exception):
            postgres.ctl("stop", "-m", "fast")
    ingest_s = ingest_end - started
    figures = {
        "tables": len(tables),
        "rounds": rounds,
        "rounds_stored": db_rounds,
        "messages": total_messages,
        "messages_per_s": round(total_messages / ingest_s, 1),
        "peak_ingest_per_s": round(max(rates, default=0.0), 1),
        "p50_publish_to_page_ms": round(percentile(every, 50) * 1000, 1),
        "p99_publish_to_page_ms": round(percentile(every, 99) * 1000, 1),
        "p99_publish_to_page_outside_restarts_ms": round(percentile(steady, 99) * 1000, 1),
        "page_events_measured": len(latencies),
        "page_reconnects": page_reconnects,
        "lost": lost,
        "duplicated": duplicated,
        "gaps_reported": counts["gaps_reported"],
        "gaps_filled": gaps_filled,
        "rejects": counts["rejects"],
        "record_alarms": counts["record_alarms"],
        "restarts": events,
        "db": args.database,
        "db_rows_per_round": round(rows / max(1, db_rounds), 2),
        "db_bytes_per_round": round(db_bytes / max(1, db_rounds)),
        "pit_cpu_s": round(pit.cpu, 1),
        "pit_cpu_percent": round(100 * pit.cpu / ingest_s, 1),
        "pit_cpu_ms_per_message": round(pit.cpu / max(1, total_messages) * 1000, 3),
        "pit_rss_max_mb": round(pit.rss_max / 2**20, 1),
        "dealing_s": round(dealing_s, 1),
        "drain_after_dealing_s": round(ingest_end - started - dealing_s, 1),
        "publisher_resends": sum(p.resent for p in publishers),
        "unpublished": unpublished,
        "pit_restarted_at_s": round(pit_restart_at - started, 1) if pit_restart_at else None,
    }
    return figures


def ingest_cost(n: int, database: str, url: str, batch: int = 200) -> dict[str, Any]:
    """Messages a second, CPU ms and database statements a message of ``Store.ingest`` (the
    pit's whole ingest but MQTT) on ``n`` simulated messages of 50 tables, in batches."""
    from pit.simfeed import SimulatedKeys
    from pit.store import Incoming, migrate

    workdir = Path(tempfile.mkdtemp(prefix="paigow-pit-ingest-"))
    try:
        db_url = url if database == "postgresql" else f"sqlite:///{workdir / 'pit.sqlite3'}"
        migrate(db_url)
        store = Store(db_url, root="casino/bench/paigow/", feed_keys=SimulatedKeys())
        statements = 0
        execute = store.x

        def counted(sql: str, params: Any = ()) -> Any:
            nonlocal statements
            statements += 1
            return execute(sql, params)

        store.x = counted  # type: ignore[method-assign]
        tables = [SimTable(f"T{i:04d}", site="bench", key=KEY, seed=i + 1) for i in range(50)]
        now = datetime.now(UTC)
        feed: list[tuple[str, dict[str, Any]]] = []
        while len(feed) < n:
            for t in tables:
                feed += t.next_round(now)
        items = [Incoming(topic, wire(body), False, time.time()) for topic, body in feed[:n]]
        wall, cpu = time.perf_counter(), time.process_time()
        stored = 0
        for i in range(0, n, batch):
            stored += store.ingest(items[i : i + batch]).stored
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        store.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return {
        "database": database,
        "messages": n,
        "stored": stored,
        "batch": batch,
        "messages_per_s": round(n / wall, 1),
        "pit_cpu_ms_per_message": round(cpu / n * 1000, 3),
        "db_statements_per_message": round(statements / n, 2),
    }


def verify_cost(n: int) -> dict[str, Any]:
    """CPU per message of the pit's judging (``pit.judge.read``: bounds, parse, values,
    signature, envelope, schema) of ``n`` simulated feed messages, and of the signature check
    alone (``verify_envelope`` on the parsed message), best of three passes."""
    from controller.feed_signature import verify_envelope
    from pit import judge
    from pit.simfeed import SimulatedKeys

    keys = SimulatedKeys()
    tables = [SimTable(f"T{i:04d}", site="bench", key=KEY, seed=i + 1) for i in range(20)]
    now = datetime.now(UTC)
    feed: list[tuple[str, bytes]] = []
    while len(feed) < n:
        for t in tables:
            feed += [(t.table_id, wire(b)) for _, b in t.next_round(now)]
    feed = feed[:n]
    parsed = [(tid, json.loads(raw)) for tid, raw in feed]

    def best(fn: Any) -> float:
        times = []
        for _ in range(3):
            start = time.process_time()
            fn()
            times.append(time.process_time() - start)
        return min(times) / n * 1000

    read_ms = best(lambda: [judge.read(raw, tid, keys.for_table) for tid, raw in feed])
    verify_ms = best(
        lambda: [verify_envelope(d, keys.for_table(tid) or {}, table_id=tid) for tid, d in parsed]
    )
    return {
        "messages": n,
        "mean_bytes": round(sum(len(r) for _, r in feed) / n),
        "judge_read_ms_per_message": round(read_ms, 4),
        "verify_ms_per_message": round(verify_ms, 4),
        "verify_share_of_judging": round(verify_ms / read_ms, 2),
    }


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--round-seconds", type=float, default=6.0)
    parser.add_argument("--connections", type=int, default=20)
    parser.add_argument("--database", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument("--quick", action="store_true", help="100 tables for 3 minutes")
    parser.add_argument(
        "--verify-cost",
        type=int,
        metavar="N",
        default=0,
        help="only measure the pit's judging of N feed messages in process, with and without "
        "the signature check (docs/performance.md), and exit",
    )
    parser.add_argument(
        "--ingest-cost",
        type=int,
        metavar="N",
        default=0,
        help="only measure Store.ingest of N simulated messages in batches of 200, in process, "
        "into --database (sqlite: a temporary file; postgresql: --database-url), and exit",
    )
    parser.add_argument("--database-url", default="", help="for --ingest-cost postgresql")
    args = parser.parse_args()
    if args.ingest_cost:
        figures = ingest_cost(args.ingest_cost, args.database, args.database_url)
        print(json.dumps(figures, separators=(",", ":")), flush=True)
        return 0
    if args.verify_cost:
        print(json.dumps(verify_cost(args.verify_cost), separators=(",", ":")), flush=True)
        return 0
    if args.quick:
        args.tables, args.minutes = 100, 3.0
    # aiomqtt logs every publish beyond 10 in flight; the publishers keep WINDOW in flight.
    logging.getLogger("mqtt").setLevel(logging.ERROR)
    workdir = Path(tempfile.mkdtemp(prefix="paigow-pit-bench-"))
    signal.signal(signal.SIGTERM, _interrupted)  # a stopped run still cleans up (finally)
    try:
        print(f"pit bench: {args.tables} tables, a round every {args.round_seconds:g} s each, "
              f"{args.minutes:g} min, {args.database}", flush=True)  # fmt: skip
        figures = asyncio.run(run(args, workdir))
    finally:
        data = workdir / "pg" / "data"
        if (data / "postmaster.pid").exists():  # a run that ended early: stop its PostgreSQL
            with contextlib.suppress(Exception):
                Postgres(workdir).ctl("stop", "-m", "immediate")
        shutil.rmtree(workdir, ignore_errors=True)
    for key, value in figures.items():
        print(f"  {key:<28} {value}")
    print(json.dumps(figures, separators=(",", ":")), flush=True)
    return 0 if figures["lost"] == 0 and figures["duplicated"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
