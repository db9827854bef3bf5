"""The pit at scale (issues 25, 31): many simulated tables publish real feeds — schema-valid,
sequenced, hash-chained, signed-checkpointed and signed, made with the table's own message code
(simulators/feed.py) — into one Mosquitto; the pit (``paigow-table pit run``, a separate process; or
``--pits N`` of them in an MQTT 5 shared subscription, one database) ingests them into a
PostgreSQL of the benchmark's own (a private cluster in a temporary directory, never the
machine's) or SQLite; during the run the broker, the pit (the first) and PostgreSQL are each
restarted once.

* The tables deal in generator processes of their own (``--generators``, default one per 700
  tables), so the benchmark's own Python is not the pit's bottleneck: each table a round every
  ``--round-seconds`` (6 s), spread evenly: the round, sometimes a player's setting or an alarm,
  and a checkpoint. A table's messages leave in order and stay in its outbox until the broker
  acknowledged them (PUBACK), as a table's journal does; a lost link sends them again, replayed,
  with the same msg_id. ``generator_backlog_max``: the most messages made and not yet
  acknowledged by the broker at once (a generator falling behind shows there).
* Publishers: ``--connections`` MQTT connections, shared among the generators.
* The broker: persistence on; its restart is SIGTERM (it saves the pit's session and queued
  messages) and a start. The pit: killed -9 and started again 2 s later. PostgreSQL:
  ``pg_ctl restart -m fast``.
* A reader of each pit page's live stream (server-sent events) measures publish → page: from
  the envelope's time (set when the message is first published, and signed) to the event.
* PostgreSQL counts the pits' statements (``pg_stat_statements``, the pits' role only: the
  bench reads as another; the pages' reads are included) and deadlocks (``pg_stat_database``,
  and ``deadlock detected`` in the pits' logs).

Afterwards the database is compared with what was published: lost (a seq never stored),
duplicated (a seq stored twice), gaps reported and filled. Progress lines every 15 s; the last
line is one JSON object.

Run: `.venv/bin/python bench/pit.py --quick` (100 tables, 3 minutes of dealing) or
`.venv/bin/python bench/pit.py --tables 2000 --minutes 5` (`--pits 2` for two pits, `--database
sqlite` for the embedded database).
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

from common import cpu_seconds

from controller.mqtt.client import Client
from controller.mqtt.wire import NODELAY
from pit.pagedb import PageStore
from pit.service import settle_collector
from pit.store import Store, parse_time
from simulators.feed import SimTable, sim_keys_text, wire
from simulators.mosquitto import Mosquitto, free_port, with_parent

PG_BIN = Path("/usr/lib/postgresql/15/bin")
KEY = bytes(range(64, 96))
WINDOW = 100  # messages in flight per publishing connection
PUBACK_WAIT = 10.0  # seconds a window waits for its PUBACKs before the link counts as lost


def _now_text() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


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
                # the pits' statements counted (the bench's own reads run as another role)
                "shared_preload_libraries = 'pg_stat_statements'\n"
                "pg_stat_statements.track = top\n"
            )

    def ctl(self, *args: str) -> None:
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-w",
                  "-l", str(self.dir / "log"), *args)  # fmt: skip

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    @property
    def bench_url(self) -> str:
        """The bench's own reads: another role, so that the statements counted are the pits'."""
        return f"postgresql://bench@127.0.0.1:{self.port}/postgres"

    def prepare(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            conn.execute("CREATE ROLE bench LOGIN SUPERUSER")

    def statements(self) -> int:
        """Statements the pits ran (role postgres) since the last :meth:`reset`."""
        import psycopg

        with psycopg.connect(self.bench_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s "
                "JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname = 'postgres'"
            ).fetchone()
            keep = os.environ.get("PIT_BENCH_LOGS")  # which statements, for the curious
            if keep:
                top = conn.execute(
                    "SELECT s.calls, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 160) "
                    "FROM pg_stat_statements s JOIN pg_roles r ON r.oid = s.userid "
                    "WHERE r.rolname = 'postgres' ORDER BY s.calls DESC LIMIT 25"
                ).fetchall()
                lines = "".join(f"{calls}\t{query}\n" for calls, query in top)
                (Path(keep) / "statements.tsv").write_text(lines)
        return int(row[0]) if row else 0

    def reset(self) -> None:
        import psycopg

        with psycopg.connect(self.bench_url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_statements_reset()")

    def deadlocks(self) -> int:
        import psycopg

        with psycopg.connect(self.bench_url, autocommit=True) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(deadlocks), 0) FROM pg_stat_database"
            ).fetchone()
        return int(row[0]) if row else 0


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
        self.kept: dict[tuple[str, int], tuple[str, bytes]] = {}  # (table, seq): as published
        self.asked = 0  # messages published again on a resend command

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
                        stamp = _now_text()
                        for topic, body in window:
                            if body.get("_tried"):
                                body["replayed"] = True
                                self.resent += 1
                            else:  # publish -> page counts from here, not from when it was made
                                body["time"] = stamp
                            body["_tried"] = True
                            clean = {k: v for k, v in body.items() if k != "_tried"}
                            payloads.append((topic, wire(clean)))
                        # A PUBACK that never comes (the broker went away mid-window) is a lost
                        # link: connect again and resend, as a table's outbox does.
                        async with asyncio.timeout(PUBACK_WAIT):
                            await asyncio.gather(
                                *(client.publish(t, p, qos=1) for t, p in payloads)
                            )
                        for (_, body), sent in zip(window, payloads, strict=True):
                            self.pending.popleft()
                            if "seq" in body:  # kept for a resend
                                self.kept[body["table_id"], body["seq"]] = sent
                        self.sent += len(window)
            except (aiomqtt.MqttError, TimeoutError):
                self.reconnects += 1
                await asyncio.sleep(0.2)

    def add(self, messages: list[tuple[str, dict[str, Any]]]) -> None:
        self.pending.extend(messages)
        self.wake.set()

    def resend(self, table: str, first: int, last: int) -> None:
        """A ``resend`` command: the kept copies of those seqs again, replayed, as a table's
        journal does (docs/mqtt.md §3); the time stays that of the first publish."""
        for seq in range(first, last + 1):
            kept = self.kept.get((table, seq))
            if kept is None:
                continue
            body = json.loads(kept[1])
            body.pop("sig", None)
            body["_tried"] = True
            self.pending.append((kept[0], body))
            self.asked += 1
        self.wake.set()


async def answer_resends(port: int, index: int, owners: dict[str, Publisher]) -> None:
    """The generator's tables answer the pit's ``resend`` commands (``pit.liveness``)."""
    while True:
        try:
            async with Client("127.0.0.1", port, identifier=f"bench-resend-{index}",
                              socket_options=NODELAY, keepalive=10) as client:  # fmt: skip
                await client.subscribe("casino/bench/paigow/+/cmd/resend", qos=1)
                async for message in client.messages:
                    topic = message.topic.value
                    table = topic.split("/")[-3]
                    if table not in owners or not isinstance(message.payload, bytes):
                        continue
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        body = json.loads(message.payload)
                        first, last = int(body["from_seq"]), int(body["to_seq"])
                        owners[table].resend(table, first, min(last, first + 999))
        except aiomqtt.MqttError:
            await asyncio.sleep(0.5)


# --- the pit as a process --------------------------------------------------------------------


class PitProcess:
    def __init__(
        self, workdir: Path, broker: int, db_url: str, http: int, tables: list[str],
        *, index: int = 0, group: str = "", protocol: str = "5", batch_wait: float = 0.2,
    ) -> None:  # fmt: skip
        workdir.mkdir(parents=True, exist_ok=True)
        self.http = http
        self.config = workdir / "pit.toml"
        key = workdir / "checkpoint.key"
        key.write_text(KEY.hex() + "\n")
        key.chmod(0o600)
        feed_keys = workdir / "feed-keys"  # each simulated table's feed key, registered
        feed_keys.write_text(sim_keys_text(tables), encoding="utf-8")
        self.config.write_text(
            'log_level = "INFO"\n[site]\nid = "bench"\n'
            f'[broker]\nport = {broker}\nprotocol = "{protocol}"\nclient_id = "pit-bench-{index}"\n'
            f'batch = 500\nbatch_wait = {batch_wait}\nshare_group = "{group}"\n'
            f'[database]\nurl = "{db_url}"\n[record]\ncheckpoint_key_file = "{key}"\n'
            f'feed_keys_file = "{feed_keys}"\n'
            f'[web]\nhost = "127.0.0.1"\nport = {http}\n'
        )
        self.log = workdir / "pit.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu = 0.0
        self.threads: dict[str, float] = {}  # CPU seconds by thread, over every run
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
            self._live_cpu = cpu_seconds(pid)
            self._live_threads = self._threads(pid)
            children = self._children(pid)  # the floor's process (pit.floorwatch), the pit's too
            self._live_cpu += children
            self._live_threads["floor-process"] = children
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    self.rss_max = max(self.rss_max, int(line.split()[1]) * 1024)

    _live_cpu = 0.0
    _live_threads: dict[str, float] = {}  # noqa: RUF012 (replaced, never changed in place)

    @staticmethod
    def _threads(pid: int) -> dict[str, float]:
        """CPU seconds by thread, named as the pit names them (``pit.db.name_thread``; the
        main thread, which runs the event loop: ``event-loop``)."""
        out: dict[str, float] = {}
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, ValueError, IndexError):
                cpu = cpu_seconds(pid, task / "stat")
                name = "event-loop" if task.name == str(pid) else (task / "comm").read_text()
                name = name.strip() if name.startswith("pit-") or name == "event-loop" else "other"
                out[name] = out.get(name, 0.0) + cpu
        return out

    @staticmethod
    def _children(pid: int) -> float:
        """CPU seconds of the pit's child processes (its floor's process and the resource
        tracker that comes with it), alive now."""
        total = 0.0
        kids: list[str] = []
        for task in Path(f"/proc/{pid}/task").iterdir():  # each thread's own children
            with contextlib.suppress(OSError):
                kids += (task / "children").read_text().split()
        for kid in kids:
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += cpu_seconds(kid)
        return total

    def _bank(self) -> None:
        """The live process's CPU into the totals (before it is killed or stopped)."""
        self.sample()
        self.cpu += self._live_cpu
        self._live_cpu = 0.0
        for name, cpu in self._live_threads.items():
            self.threads[name] = self.threads.get(name, 0.0) + cpu
        self._live_threads = {}

    def kill(self) -> None:
        self._bank()
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        self._bank()
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
                event, pending = "", b""
                # Chunks split into lines here: an event of many tiles (the whole floor after a
                # reconnect, a catch-up batch) is one line longer than aiohttp's line limit
                # (its line iterator raised LineTooLong, and the reader reconnected for ever).
                async for chunk in response.content.iter_any():
                    *lines, pending = (pending + chunk).split(b"\n")
                    for raw in lines:
                        line = raw.decode()
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


# --- the tables: dealing and publishing in processes of their own ----------------------------


def generate(
    port: int, names: list[str], seeds: list[int], index: int, args: dict[str, float], pipe: Any
) -> None:
    """A generator process: these tables deal on the run's schedule (a round every period
    each, spread evenly) from ``args["start"]`` (wall clock) for ``args["duration"]`` s, and
    their messages are published over ``args["connections"]`` connections; its progress and
    then its totals go to ``pipe``."""
    logging.getLogger("mqtt").setLevel(logging.ERROR)
    asyncio.run(_generate(port, names, seeds, index, args, pipe))


async def _generate(
    port: int, names: list[str], seeds: list[int], index: int, args: dict[str, float], pipe: Any
) -> None:
    tables = [SimTable(n, site="bench", key=KEY, seed=s) for n, s in zip(names, seeds, strict=True)]
    publishers = [Publisher(port, index * 1000 + i) for i in range(int(args["connections"]))]
    senders = [asyncio.create_task(p.run()) for p in publishers]
    owners = {t.table_id: publishers[i % len(publishers)] for i, t in enumerate(tables)}
    senders.append(asyncio.create_task(answer_resends(port, index, owners)))
    now = datetime.now(UTC)
    for i, t in enumerate(tables):
        publishers[i % len(publishers)].add([t.status(now), *t.devices(now)])
    period, duration, start = args["period"], args["duration"], args["start"]
    rounds, backlog_max, reported = 0, 0, 0.0
    while (elapsed := time.time() - start) < duration:
        slot = int(elapsed / period * len(tables))
        due = min(slot, len(tables) * (int(elapsed // period) + 1))
        while rounds < due:
            i = rounds % len(tables)
            publishers[i % len(publishers)].add(tables[i].next_round(datetime.now(UTC)))
            rounds += 1
        backlog = sum(len(p.pending) for p in publishers)
        backlog_max = max(backlog_max, backlog)
        if time.monotonic() - reported >= 2.0:
            reported = time.monotonic()
            pipe.send(("progress", rounds, backlog))
        await asyncio.sleep(0.05)
    deadline = time.monotonic() + 600
    while any(p.pending for p in publishers) and time.monotonic() < deadline:
        pipe.send(("progress", rounds, sum(len(p.pending) for p in publishers)))
        await asyncio.sleep(0.5)
    pipe.send(("done", {
        "seqs": {t.table_id: t.seq for t in tables}, "rounds": rounds, "backlog_max": backlog_max,
        "resent": sum(p.resent for p in publishers),
        "asked": sum(p.asked for p in publishers),
        "unpublished": sum(len(p.pending) for p in publishers),
    }))  # fmt: skip
    # On, answering resends (and publishing them) until the run has drained and stops us.
    await asyncio.gather(*senders, return_exceptions=True)


class Generators:
    """The generator processes (``--generators``), the tables split among them."""

    def __init__(self, args: argparse.Namespace, port: int, names: list[str]) -> None:
        import multiprocessing

        count = args.generators or max(1, math.ceil(len(names) / 700))
        self.start_at = time.time() + 3.0  # every process built its tables by then
        plan = {
            "period": args.round_seconds,
            "duration": args.minutes * 60,
            "start": self.start_at,
            "connections": max(1, args.connections // count),
        }
        context = multiprocessing.get_context("spawn")
        self.pipes: list[Any] = []
        self.procs: list[Any] = []
        for g in range(count):
            mine = list(range(g, len(names), count))
            ours, theirs = context.Pipe(duplex=False)
            proc = context.Process(
                target=generate, name=f"bench-generator-{g}", daemon=True,
                args=(port, [names[i] for i in mine], [i + 1 for i in mine], g, plan, theirs),
            )  # fmt: skip
            proc.start()
            self.pipes.append(ours)
            self.procs.append(proc)
        self.progress: list[tuple[int, int]] = [(0, 0)] * count
        self.done: list[dict[str, Any] | None] = [None] * count
        self.backlog_max = 0

    def poll(self) -> None:
        for g, pipe in enumerate(self.pipes):
            while self.done[g] is None and pipe.poll():
                what, *rest = pipe.recv()
                if what == "progress":
                    self.progress[g] = (rest[0], rest[1])
                else:
                    self.done[g] = rest[0]
        self.backlog_max = max(self.backlog_max, self.backlog)

    @property
    def rounds(self) -> int:
        return sum(r for r, _ in self.progress)

    @property
    def backlog(self) -> int:
        return sum(b for _, b in self.progress)

    @property
    def finished(self) -> bool:
        return all(d is not None for d in self.done)

    def totals(self) -> dict[str, Any]:
        done = [d for d in self.done if d is not None]
        seqs: dict[str, int] = {}
        for d in done:
            seqs |= d["seqs"]
        return {
            "seqs": seqs,
            "rounds": sum(d["rounds"] for d in done),
            "backlog_max": max(self.backlog_max, *(d["backlog_max"] for d in done)),
            "resent": sum(d["resent"] for d in done),
            "asked": sum(d["asked"] for d in done),
            "unpublished": sum(d["unpublished"] for d in done),
            "generators": len(self.done),
        }

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
            proc.join(5)
            if proc.is_alive():
                proc.kill()


# --- the run ---------------------------------------------------------------------------------


class Run:
    """One run: the broker, the pits, the database, the generators, what was measured."""

    def __init__(self, args: argparse.Namespace, workdir: Path) -> None:
        self.args = args
        self.workdir = workdir
        self.postgres: Postgres | None = None
        self.latencies: list[tuple[float, float]] = []
        self.restart_times: list[float] = []
        self.events: list[dict[str, Any]] = []
        self.rates: list[float] = []
        #: --flood: when it began and ended (epoch), the pit's RSS before, its peak while it
        #: lasted and a minute after, and what admission dropped (issue 40, F1)
        self.flood: dict[str, Any] = {}
        self.page_counts: list[dict[str, int]] = []
        self.stop_page = asyncio.Event()
        self.pages: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        args, workdir = self.args, self.workdir
        if args.database == "postgresql":
            self.postgres = Postgres(workdir)
            self.postgres.init()
            self.postgres.ctl("start")
            self.postgres.prepare()
            self.db_url, self.read_url = self.postgres.url, self.postgres.bench_url
        else:
            self.db_url = self.read_url = f"sqlite:///{workdir / 'pit.sqlite3'}"
        self.broker = Mosquitto(
            workdir / "broker", persistence=True, autosave=5,
            options=["max_queued_messages 1000000", "max_inflight_messages 1000",
                     "max_queued_bytes 0",
                     *([f"max_packet_size {args.max_packet}"] if args.max_packet else [])],
        )  # fmt: skip
        await self.broker.start()
        self.names = [f"T{i:04d}" for i in range(args.tables)]
        group = "bench" if args.pits > 1 else ""
        self.pits = [
            PitProcess(workdir / f"pit{i}", self.broker.port, self.db_url, free_port(),
                       self.names, index=i, group=group, protocol=args.protocol,
                       batch_wait=args.batch_wait)
            for i in range(args.pits)
        ]  # fmt: skip
        for pit in self.pits:
            pit.start()
        deadline = time.monotonic() + 60
        for pit in self.pits:
            while "pit_subscribed" not in (pit.log.read_text() if pit.log.exists() else ""):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the pit did not subscribe: see {pit.log}")
                await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # the page listens
        base = PageStore(self.read_url)
        self.db_bytes_before = base.db.database_bytes()
        base.close()
        self.deadlocks_before = self.postgres.deadlocks() if self.postgres else 0
        if self.postgres is not None:
            self.postgres.reset()
        for pit in self.pits:
            counts: dict[str, int] = {}
            self.page_counts.append(counts)
            self.pages.append(asyncio.create_task(
                watch_page(f"http://127.0.0.1:{pit.http}", self.latencies, self.stop_page, counts)
            ))  # fmt: skip

    async def flood_one(self) -> None:
        """F1 of issue 40: one table's account publishes 1,000 unsigned 200 KB messages on its
        round topic as fast as the broker takes them; the pit's RSS before, at its peak while
        the flood lasts (and 20 s on) and after, sampled every 0.2 s."""
        pit = self.pits[0]
        self.flood["rss_before_mb"] = round(_rss(pit) / 2**20, 1)
        self.flood["began"] = time.time()
        big = b'{"schema":"paigow.round","pad":"' + b"x" * 200_000 + b'"}'
        peak = 0
        client = aiomqtt.Client("127.0.0.1", self.broker.port, timeout=5)
        sending = asyncio.create_task(self._flood_publish(client, big))
        while not sending.done() or time.time() - self.flood["began"] < 20:
            peak = max(peak, _rss(pit))
            await asyncio.sleep(0.2)
        self.flood["published"] = sending.result()
        self.flood["ended"] = time.time()
        self.flood["rss_peak_mb"] = round(peak / 2**20, 1)

    @staticmethod
    async def _flood_publish(client: aiomqtt.Client, big: bytes) -> int:
        """How many the broker took before it refused the account (``--max-packet``: at once)."""
        sent = 0
        try:
            async with client:
                for _ in range(1000):
                    await client.publish("casino/bench/paigow/T0007/round", big, qos=1)
                    sent += 1
        except aiomqtt.MqttError:
            pass  # the broker closed the flooding client's connection
        return sent

    async def restart(self, what: str, elapsed: float) -> None:
        if what == "flood":
            self.events.append({"flood": "T0007", "at_s": round(elapsed, 1)})
            self.flooding = asyncio.create_task(self.flood_one())
            return
        at = time.time()
        self.restart_times.append(at)
        if what == "broker":
            await self.broker.stop()
            await self.broker.start()
        elif what == "pit":
            self.pits[0].kill()
            await asyncio.sleep(2.0)  # as systemd's RestartSec=2 would
            self.pits[0].start()
        elif what == "postgresql" and self.postgres is not None:
            await asyncio.to_thread(self.postgres.ctl, "restart", "-m", "fast")
        if what != "none":
            self.events.append({"restart": what, "at_s": round(elapsed, 1),
                                "took_s": round(time.time() - at, 2)})  # fmt: skip

    async def deal(self) -> None:
        """The dealing (in the generators), the restarts at their times, progress lines."""
        args = self.args
        gens = self.generators = Generators(args, self.broker.port, self.names)
        duration = args.minutes * 60
        plan = [(0.25, "broker"), (0.45, "pit"),
                (0.65, "postgresql" if self.postgres is not None else "none")]  # fmt: skip
        if args.flood:  # instead of the restarts: the flood alone, measured (issue 40)
            plan = [(0.3, "flood")]
        counter = PageStore(self.read_url)
        last = (time.monotonic(), 0)
        progress = time.monotonic()
        while not gens.finished:
            gens.poll()
            elapsed = time.time() - gens.start_at
            while plan and elapsed >= plan[0][0] * duration:
                await self.restart(plan.pop(0)[1], elapsed)
            for pit in self.pits:
                pit.sample()
            if time.monotonic() - last[0] >= 2.0:
                with contextlib.suppress(Exception):  # the database may be restarting
                    if counter.db.conn is None or getattr(counter.db.conn, "closed", False):
                        counter.db.connect()
                    row = counter.db.one("SELECT count(*) FROM messages")
                    n = int(row[0]) if row else 0
                    self.rates.append((n - last[1]) / (time.monotonic() - last[0]))
                    last = (time.monotonic(), n)
            if time.monotonic() - progress >= 15:
                progress = time.monotonic()
                rate = self.rates[-1] if self.rates else 0.0
                print(
                    f"  {elapsed:5.0f} s  {gens.rounds} rounds dealt, {gens.backlog} waiting "
                    f"to publish, {last[1]} messages stored ({rate:.0f}/s)",
                    flush=True,
                )
            await asyncio.sleep(0.1)
        self.dealt_at = time.monotonic()
        counter.close()

    async def drain(self, total_sequenced: int) -> float:
        store = PageStore(self.read_url)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                got = store.db.one("SELECT count(*) FROM messages WHERE sequenced = 1")
                if got is not None and got[0] >= total_sequenced:
                    break
            for pit in self.pits:
                pit.sample()
            await asyncio.sleep(0.5)
        store.close()
        end = time.monotonic()
        await asyncio.sleep(1.0)  # the last page events
        return end

    async def stop(self) -> None:
        self.stop_page.set()
        for pit in self.pits:
            pit.stop()
        for page in self.pages:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(page, 10)  # the stream ends with the pit
        await self.broker.stop()


def _rss(pit: PitProcess) -> int:
    """The pit process's resident memory now (bytes; 0 if it is not running)."""
    if pit.proc is None or pit.proc.poll() is not None:
        return 0
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path(f"/proc/{pit.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def flood_figures(r: Run) -> dict[str, Any]:
    """--flood: the other tables' publish → page p99 while the flood lasted (and 20 s on), the
    tables called silent, the pit's RSS before, at its peak and after the run drained, and
    what admission dropped (issue 40)."""
    f = r.flood
    began, ended = f.get("began", 0.0), f.get("ended", 0.0)
    during = [v for t, v in r.latencies if began <= t <= ended + 20]
    store = PageStore(r.read_url)
    try:
        silent = [t for (t,) in store.db.all(
            "SELECT table_id FROM record_alarms WHERE kind = 'table_silent'")]  # fmt: skip
        dropped = store.db.one(
            "SELECT coalesce(sum(count), 0) FROM reject_counts WHERE reason = 'flood'"
        )
    finally:
        store.close()
    return {
        "flood_p99_publish_to_page_ms": round(percentile(during, 99) * 1000, 1),
        "flood_p50_publish_to_page_ms": round(percentile(during, 50) * 1000, 1),
        "flood_page_events": len(during),
        "flood_tables_silent": silent,
        "flood_dropped": int(dropped[0]) if dropped else 0,
        "flood_rss_before_mb": f.get("rss_before_mb"),
        "flood_rss_peak_mb": f.get("rss_peak_mb"),
        "flood_rss_after_mb": f.get("rss_after_mb"),
        "flood_s": round(ended - began, 1),
        "flood_published": f.get("published"),
    }


def deadlocks_logged(pits: list[PitProcess]) -> int:
    return sum(p.log.read_text(errors="replace").count("deadlock detected") for p in pits)


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    r = Run(args, workdir)
    await r.start()
    started = time.monotonic()
    await r.deal()
    totals = r.generators.totals()
    expected: dict[str, int] = totals["seqs"]
    total_sequenced = sum(expected.values())
    total_messages = total_sequenced + len(expected)  # and one status each
    ingest_end = await r.drain(total_sequenced)
    if args.flood:
        await r.flooding
        r.flood["rss_after_mb"] = round(_rss(r.pits[0]) / 2**20, 1)
    r.generators.stop()  # they answered the pits' resends until now
    await r.stop()
    statements = r.postgres.statements() if r.postgres is not None else None
    deadlocks = deadlocks_logged(r.pits)
    if r.postgres is not None:
        deadlocks = max(deadlocks, r.postgres.deadlocks() - r.deadlocks_before)
    figures = verdict(r, expected, total_messages, ingest_end - started)
    keep = os.environ.get("PIT_BENCH_LOGS")  # the run's publish → page as a time series
    if keep:
        zero = r.generators.start_at
        lines = [f"{t - zero:.3f},{v:.4f}\n" for t, v in r.latencies]
        (Path(keep) / "latencies.csv").write_text("at_s,seconds\n" + "".join(lines))
    figures["db_statements_per_message"] = (
        round(statements / max(1, total_messages), 3) if statements is not None else None
    )
    figures["deadlocks"] = deadlocks
    figures["generator_backlog_max"] = totals["backlog_max"]
    figures["generators"] = totals["generators"]
    figures["rounds"] = totals["rounds"]
    figures["publisher_resends"] = totals["resent"]
    figures["resent_on_request"] = totals["asked"]
    figures["unpublished"] = totals["unpublished"]
    figures["dealing_s"] = round(r.dealt_at - started, 1)
    if args.flood:
        figures.update(flood_figures(r))
    figures["drain_after_dealing_s"] = round(ingest_end - r.dealt_at, 1)
    figures.update(reference(figures, args))
    if r.postgres is not None:
        with contextlib.suppress(Exception):
            r.postgres.ctl("stop", "-m", "fast")
    return figures


def verdict(
    r: Run, expected: dict[str, int], total_messages: int, ingest_s: float
) -> dict[str, Any]:
    """What the database holds against what was published, and the run's figures."""
    store = PageStore(r.read_url)
    stored = dict(store.db.all("SELECT table_id, count(*) FROM messages WHERE sequenced = 1 "
                            "GROUP BY table_id"))  # fmt: skip
    distinct = dict(store.db.all("SELECT table_id, count(DISTINCT seq) FROM messages "
                              "WHERE sequenced = 1 GROUP BY table_id"))  # fmt: skip
    counts = store.pages.counts()
    rows = 0
    for name in ("messages", "rounds", "players", "alarms", "checkpoints", "missing"):
        row = store.db.one(f"SELECT count(*) FROM {name}")
        rows += int(row[0]) if row else 0
    db_bytes = store.db.database_bytes() - r.db_bytes_before
    kinds = dict(store.db.all("SELECT kind, count(*) FROM record_alarms GROUP BY kind"))
    store.close()
    steady = [v for t, v in r.latencies if not any(x <= t <= x + 20 for x in r.restart_times)]
    # Also without the floor's start: every table's first status and device messages in the
    # same second (6,000 at 2,000 tables), a burst like a restart's backlog.
    begun = r.generators.start_at + 20
    settled = [v for t, v in r.latencies
               if t > begun and not any(x <= t <= x + 20 for x in r.restart_times)]  # fmt: skip
    every = [v for _, v in r.latencies]
    cpu = sum(p.cpu for p in r.pits)
    db_rounds = counts["rounds"]
    names = sorted({n for p in r.pits for n in p.threads})
    by_thread = {
        n: round(sum(p.threads.get(n, 0.0) for p in r.pits) / max(1, total_messages) * 1000, 3)
        for n in names
    }
    return {
        "tables": len(expected),
        "pits": len(r.pits),
        "rounds_stored": db_rounds,
        "messages": total_messages,
        "messages_per_s": round(total_messages / ingest_s, 1),
        "peak_ingest_per_s": round(max(r.rates, default=0.0), 1),
        "p50_publish_to_page_ms": round(percentile(every, 50) * 1000, 1),
        "p99_publish_to_page_ms": round(percentile(every, 99) * 1000, 1),
        "p99_outside_restarts_ms": round(percentile(steady, 99) * 1000, 1),
        "p99_outside_start_and_restarts_ms": round(percentile(settled, 99) * 1000, 1),
        "page_events_measured": len(r.latencies),
        "page_reconnects": sum(max(0, c.get("connects", 0) - 1) for c in r.page_counts),
        "lost": sum(n - distinct.get(t, 0) for t, n in expected.items()),
        "duplicated": sum(stored.get(t, 0) - distinct.get(t, 0) for t in expected),
        "gaps_reported": counts["gaps_reported"],
        "gaps_filled": counts["gaps_reported"] - counts["gaps_open"],
        "rejects": counts["rejects"],
        "record_alarms": kinds,
        "restarts": r.events,
        "db": r.args.database,
        "db_rows_per_round": round(rows / max(1, db_rounds), 2),
        "db_bytes_per_round": round(db_bytes / max(1, db_rounds)),
        "pit_cpu_s": round(cpu, 1),
        "pit_cpu_percent": round(100 * cpu / ingest_s, 1),
        "pit_cpu_ms_per_message": round(cpu / max(1, total_messages) * 1000, 3),
        "pit_cpu_ms_by_thread": by_thread,
        "pit_rss_max_mb": round(max(p.rss_max for p in r.pits) / 2**20, 1),
    }


def ingest_cost(
    n: int, database: str, url: str, batch: int = 200, *, freeze: bool = True
) -> dict[str, Any]:
    """Messages a second, CPU ms and database statements a message of ``Store.ingest`` (the
    pit's whole ingest but MQTT) on ``n`` simulated messages of 50 tables, in batches."""
    from pit.store import Incoming, migrate
    from simulators.feed import SimulatedKeys

    workdir = Path(tempfile.mkdtemp(prefix="paigow-pit-ingest-"))
    try:
        db_url = url if database == "postgresql" else f"sqlite:///{workdir / 'pit.sqlite3'}"
        migrate(db_url)
        store = Store(db_url, root="casino/bench/paigow/", feed_keys=SimulatedKeys())
        statements = 0
        execute = store.db.x

        def counted(sql: str, params: Any = ()) -> Any:
            nonlocal statements
            statements += 1
            return execute(sql, params)

        execute_many = store.db.xmany

        def counted_many(sql: str, rows: Any) -> None:
            nonlocal statements
            statements += 1  # an executemany (SQLite, in process) counts once
            execute_many(sql, rows)

        store.db.x = counted  # type: ignore[method-assign]
        store.db.xmany = counted_many  # type: ignore[method-assign]
        tables = [SimTable(f"T{i:04d}", site="bench", key=KEY, seed=i + 1) for i in range(50)]
        now = datetime.now(UTC)
        feed: list[tuple[str, dict[str, Any]]] = []
        while len(feed) < n:
            for t in tables:
                feed += t.next_round(now)
        items = [Incoming(topic, wire(body), False, time.time()) for topic, body in feed[:n]]
        if freeze:  # as the pit does once it has started
            settle_collector()
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
        "gc": "freeze" if freeze else "default",
        "messages_per_s": round(n / wall, 1),
        "pit_cpu_ms_per_message": round(cpu / n * 1000, 3),
        "db_statements_per_message": round(statements / n, 2),
    }


def reference(figures: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The run's figures against this machine's own speed (issue 42): libsodium's Ed25519
    verify of a feed message, measured now in this process (the same C code the pit runs), and
    the pit's CPU a message as a multiple of it; with the fast paths and settings the pit ran
    with, and whether the run is whole (a run that lost or doubled a message says so)."""
    from pit import judge

    measured = verify_cost(2000)
    verify_ms = measured["libsodium_verify_ms"] or measured["cryptography_verify_ms"]
    per_message = figures.get("pit_cpu_ms_per_message")
    return {
        "reference_verify_ms": verify_ms,
        "reference_verify_by": "libsodium" if measured["libsodium_verify_ms"] else "cryptography",
        "pit_cpu_per_verify": round(per_message / verify_ms, 2) if per_message else None,
        "fast_paths": {
            "signature": "libsodium" if judge.FAST_VERIFY is not None else "cryptography",
            "json": "orjson",
            "mqtt": f"paho public API, MQTT {args.protocol}",
            "batch_wait_s": args.batch_wait,
            "collector": "frozen after start, young generation every 50,000 allocations",
        },
        "whole": figures.get("lost") == 0 and figures.get("duplicated") == 0,
    }


def verify_cost(n: int, *, freeze: bool = True) -> dict[str, Any]:
    """CPU per message of the pit's judging (``pit.judge.read``: bounds, parse, values,
    signature, envelope, schema) of ``n`` simulated feed messages, and of the signature check
    alone (``verify_envelope`` on the parsed message), best of three passes."""
    from controller.feed_signature import verify_envelope
    from pit import judge
    from simulators.feed import SimulatedKeys

    keys = SimulatedKeys()
    tables = [SimTable(f"T{i:04d}", site="bench", key=KEY, seed=i + 1) for i in range(20)]
    now = datetime.now(UTC)
    feed: list[tuple[str, bytes]] = []
    while len(feed) < n:
        for t in tables:
            feed += [(t.table_id, wire(b)) for _, b in t.next_round(now)]
    feed = feed[:n]
    parsed = [(tid, json.loads(raw)) for tid, raw in feed]
    if freeze:  # as the pit does once it has started
        settle_collector()

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
    # The fast path's check alone, over the signed bytes: libsodium (pit.sodium) and
    # cryptography (OpenSSL), the same triples.
    from controller.feed_signature import public_bytes
    from pit import sodium

    triples = []
    for tid, raw in feed:  # the signature and the bytes it covers, as judge._fast cuts them
        tail = judge.SIG_TAIL.match(raw, raw.rfind(b',"sig":{'))
        assert tail is not None
        key = next(iter((keys.for_table(tid) or {}).values()))
        signed = raw[: tail.start()] + b"}"
        triples.append((key, public_bytes(key), bytes.fromhex(tail.group(2).decode()), signed))
    libsodium = sodium.verifier()
    sodium_ms = (
        best(lambda: [libsodium(r, g, m) for _, r, g, m in triples])
        if libsodium is not None
        else None
    )
    openssl_ms = best(lambda: [k.verify(g, m) for k, _, g, m in triples])
    return {
        "messages": n,
        "gc": "freeze" if freeze else "default",
        "mean_bytes": round(sum(len(r) for _, r in feed) / n),
        "judge_read_ms_per_message": round(read_ms, 4),
        "verify_ms_per_message": round(verify_ms, 4),
        "verify_share_of_judging": round(verify_ms / read_ms, 2),
        "libsodium_verify_ms": round(sodium_ms, 4) if sodium_ms is not None else None,
        "cryptography_verify_ms": round(openssl_ms, 4),
    }


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=1000)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--round-seconds", type=float, default=6.0)
    parser.add_argument(
        "--connections",
        type=int,
        default=20,
        help="MQTT connections the tables publish over (shared by the generators)",
    )
    parser.add_argument(
        "--generators",
        type=int,
        default=0,
        help="generator processes (default: one per 700 tables)",
    )
    parser.add_argument(
        "--pits",
        type=int,
        default=1,
        help="pits sharing the database (an MQTT 5 shared subscription)",
    )
    parser.add_argument("--database", choices=["postgresql", "sqlite"], default="postgresql")
    parser.add_argument(
        "--protocol", choices=["5", "3.1.1"], default="5", help="the pits' MQTT version"
    )
    parser.add_argument(
        "--batch-wait", type=float, default=0.2, help="the pits' [broker] batch_wait (s)"
    )
    parser.add_argument("--quick", action="store_true", help="100 tables for 3 minutes")
    parser.add_argument(
        "--max-packet",
        type=int,
        default=0,
        help="the broker's max_packet_size (docs/mqtt.md §5 sets 65536): a larger packet is "
        "refused by the broker itself; 0: none",
    )
    parser.add_argument(
        "--flood",
        action="store_true",
        help="no restarts; at 30 %% of the run one table's account publishes 1,000 unsigned "
        "200 KB messages on its topic: the others' p99, silent tables, the pit's RSS (issue 40)",
    )
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
    parser.add_argument("--batch", type=int, default=200, help="for --ingest-cost")
    parser.add_argument(
        "--gc",
        choices=["freeze", "default"],
        default="freeze",
        help="for --ingest-cost and --verify-cost: the collector frozen after the setup, as in "
        "the pit, or Python's default",
    )
    args = parser.parse_args()
    keep = os.environ.get("PIT_BENCH_LOGS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
    if args.ingest_cost:
        figures = ingest_cost(args.ingest_cost, args.database, args.database_url,
                              batch=args.batch, freeze=args.gc == "freeze")  # fmt: skip
        print(json.dumps(figures, separators=(",", ":")), flush=True)
        return 0
    if args.verify_cost:
        figures = verify_cost(args.verify_cost, freeze=args.gc == "freeze")
        print(json.dumps(figures, separators=(",", ":")), flush=True)
        return 0
    if args.quick:
        args.tables, args.minutes = 100, 3.0
    # aiomqtt logs every publish beyond 10 in flight; the publishers keep WINDOW in flight.
    logging.getLogger("mqtt").setLevel(logging.ERROR)
    workdir = Path(tempfile.mkdtemp(prefix="paigow-pit-bench-"))
    signal.signal(signal.SIGTERM, _interrupted)  # a stopped run still cleans up (finally)
    try:
        print(f"pit bench: {args.tables} tables, a round every {args.round_seconds:g} s each, "
              f"{args.minutes:g} min, {args.database}, {args.pits} pit(s)", flush=True)  # fmt: skip
        figures = asyncio.run(run(args, workdir))
    finally:
        keep = os.environ.get("PIT_BENCH_LOGS")  # a directory for the pits' logs
        if keep:
            for log in workdir.glob("pit*/pit.log"):
                shutil.copy(log, Path(keep) / f"{log.parent.name}.log")
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
