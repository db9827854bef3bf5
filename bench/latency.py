"""How fast the result of a deal reaches the casino system (MQTT) and the dealer page (SSE)
(issue 8; goal p99 ≤ 15 ms for both, the journal committed with synchronous = FULL first).

One table daemon runs as a real process (`paigow-table run`) with its shuffler and RNG box
simulated on ptys in this process, MQTT to a Mosquitto this benchmark starts on a free port
(persistence off) and the display on a free port. A round's clock starts when the last byte of
the frame that completes the deal (the STUB, after the seven packets; DEAL_END follows it at
once) has been written to the pty, and stops when (a) the round message arrives at an aiomqtt
subscriber (the casino system) and (b) the dealer page's event stream (/api/events) delivers the
settled round. Each observer is a process of its own, as the casino system and the dealer's
browser are: in one event loop, one's arrival waited while the other's was parsed.

The same-run floor, measured after every round under the same load: an fsync of a small
appended file on the journal's file system plus a QoS 1 publish→receive round trip through the
same broker on loopback. The daemon cannot beat it: it must commit the journal (one fsync)
before it publishes. The last line is one JSON object with the figures.

Run: `.venv/bin/python bench/latency.py [--rounds 200] [--warmup 10] [--gap 0.25]`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sqlite3
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import aiohttp
import aiomqtt
from common import (
    Broker,
    Devices,
    DiskMonitor,
    display_section,
    last_line,
    machine,
    mqtt_section,
    ms,
    percentile,
    sse_events,
    topic_prefix,
)

from controller.logging import configure_logging
from simulators.mosquitto import free_port
from simulators.tables import TableProcess

TABLE = "PG-LAT"
GOAL_MS = 15.0
PROBE_TOPIC = "bench/latency/probe"
WAIT = 10.0
STALL_S = 0.01  # an fsync this long is a disk stall (the median is well under 1 ms)


@dataclass(frozen=True, order=True)
class Slow:
    latency: float
    shuffle_id: str
    stub_wall: float


@dataclass
class Arrivals:
    """When each round (by shuffle id) and each probe arrived; ``changed`` is set on any."""

    mqtt: dict[str, tuple[float, float, str, bool]] = field(default_factory=dict)
    sse: dict[str, float] = field(default_factory=dict)
    probes: dict[str, float] = field(default_factory=dict)
    statuses: list[str] = field(default_factory=list)
    sse_connected: asyncio.Event = field(default_factory=asyncio.Event)
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def seen(self, line: dict[str, Any]) -> None:
        """One line an observer wrote (``observe_mqtt``, ``observe_page``)."""
        if line.get("ready") == "mqtt":
            self.subscribed.set()
        elif line.get("ready") == "page":
            self.sse_connected.set()
        elif "probe" in line:
            self.probes[line["probe"]] = line["at"]
        elif "round" in line:
            self.mqtt[line["round"]] = (line["at"], line["wall"], line["time"], line["replayed"])
        elif "page" in line:
            self.sse[line["page"]] = line["at"]
        elif "status" in line:
            self.statuses.append(line["status"])
        self.changed.set()

    async def until(self, condition: Any, timeout: float = WAIT) -> bool:
        deadline = time.monotonic() + timeout
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            if condition():
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), left)
        return True


# --- the observers: each a process of its own, as the casino system and the dealer's browser are --
#
# Both stamp an arrival with ``time.perf_counter()`` (CLOCK_MONOTONIC: one clock for every process
# of the machine) the moment their event loop hands it over, and write it to their stdout as one
# JSON line; this process reads the lines. Run in this process, the two shared an event loop with
# each other: the dealer page's event (one hop from the daemon) usually came first, and the
# casino system's message, through the broker, waited until the page's had been parsed, which
# added about 0.6 ms to the MQTT median on a quiet machine (docs/performance.md, ninth session).


async def observe_mqtt(port: int, prefix: str) -> None:
    """The casino system (``--observe mqtt``): every message of the table, and the probes."""
    out = sys.stdout
    async with aiomqtt.Client("127.0.0.1", port, identifier="bench-latency-casino") as client:
        await client.subscribe(f"{prefix}#", qos=1)
        await client.subscribe(PROBE_TOPIC, qos=1)
        out.write(json.dumps({"ready": "mqtt"}) + "\n")
        out.flush()
        async for message in client.messages:
            at, wall = time.perf_counter(), time.time()
            raw = message.payload
            body = json.loads(raw if isinstance(raw, bytes | str) else b"{}")
            topic = message.topic.value
            seen: dict[str, Any] = {"at": at}
            if topic == PROBE_TOPIC:
                seen["probe"] = body["id"]
            elif topic in (f"{prefix}round", f"{prefix}dead"):
                seen.update(
                    round=body["payload"].get("shuffle_id", ""),
                    wall=wall,
                    time=body["time"],
                    replayed=bool(body["replayed"]),
                )
            elif topic == f"{prefix}status":
                seen["status"] = body["payload"]["state"]
            else:
                continue
            out.write(json.dumps(seen) + "\n")
            out.flush()


async def observe_page(url: str) -> None:
    """The dealer page (``--observe page``): the live stream's settled ``round`` events."""
    out = sys.stdout
    async with aiohttp.ClientSession() as session:
        async for event in sse_events(session, url):
            if event.event == "snapshot":
                out.write(json.dumps({"ready": "page"}) + "\n")
            elif event.event == "round" and event.data.get("result"):
                shuffle = event.data["result"].get("shuffle_id", "")
                out.write(json.dumps({"at": event.at, "page": shuffle}) + "\n")
            else:
                continue
            out.flush()


async def observer(what: list[str], arrivals: Arrivals) -> None:
    """Run ``bench/latency.py --observe …`` and hand each line it writes to ``arrivals``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).resolve()),
        "--observe",
        *what,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        async for line in proc.stdout:
            arrivals.seen(json.loads(line))
        raise RuntimeError(f"the observer {what[0]} exited with {await proc.wait()}")
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()


class Floor:
    """The same-run floor: fsync of a small appended file + a loopback QoS 1 round trip."""

    def __init__(self, directory: Path, probe: aiomqtt.Client, arrivals: Arrivals) -> None:
        self.path = directory / "fsync-probe.bin"
        self.probe = probe
        self.arrivals = arrivals
        self.fsync: list[float] = []
        self.rtt: list[float] = []
        self.n = 0

    async def sample(self) -> bool:
        self.n += 1
        record = os.urandom(64).hex().encode() + b"\n"  # about a journal row
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            start = time.perf_counter()
            os.write(fd, record)
            os.fsync(fd)
            synced = time.perf_counter()
        finally:
            os.close(fd)
        probe_id = f"p{self.n}"
        sent = time.perf_counter()
        await self.probe.publish(PROBE_TOPIC, json.dumps({"id": probe_id}), qos=1)
        if not await self.arrivals.until(lambda: probe_id in self.arrivals.probes):
            return False
        self.fsync.append(synced - start)
        self.rtt.append(self.arrivals.probes[probe_id] - sent)
        return True


def _iso(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def slowest(journal: Path, rounds: list[Slow], disk: DiskMonitor) -> list[str]:
    """Where the slowest rounds spent their time: the daemon's journal rows of each (when each
    event's transaction began, ms resolution) relative to the stub's write, and the longest
    fsync of the disk monitor in the same window."""
    lines = []
    with contextlib.closing(sqlite3.connect(f"file:{journal}?mode=ro", uri=True)) as conn:
        for slow in rounds:
            row = conn.execute(
                "SELECT round_id FROM rounds WHERE json_extract(result, '$.shuffle_id') = ?",
                (slow.shuffle_id,),
            ).fetchone()
            if row is None:
                continue
            events = conn.execute(
                "SELECT at, kind FROM events WHERE round_id = ? AND kind IN "
                "('packet_dealt', 'stub_verified') ORDER BY id",
                (row[0],),
            ).fetchall()
            steps = ", ".join(
                f"{kind} {(_iso(at) - slow.stub_wall) * 1000:+.0f}" for at, kind in events[-2:]
            )
            worst = disk.worst_between(slow.stub_wall - 2.0, slow.stub_wall + slow.latency)
            lines.append(
                f"slow round {slow.shuffle_id}: {slow.latency * 1000:.0f} ms; journal txns "
                f"(ms from the stub's write) {steps}; MQTT arrival "
                f"+{slow.latency * 1000:.0f}; longest disk-monitor fsync around it "
                f"{worst * 1000:.0f} ms"
            )
    return lines


def describe(name: str, values: list[float], floor: list[float] | None = None) -> str:
    p50, p99 = percentile(values, 50), percentile(values, 99)
    text = f"{name:<34} p50 {p50 * 1000:7.2f} ms   p99 {p99 * 1000:7.2f} ms"
    text += f"   max {max(values) * 1000:7.2f} ms" if values else ""
    if floor:
        f50, f99 = percentile(floor, 50), percentile(floor, 99)
        text += f"   ({p50 / f50:.1f}× / {p99 / f99:.1f}× the floor)"
    return text


def commits_per_round(log: Path, rounds: int) -> dict[str, float]:
    """The daemon's journal commits a round, from its last ``daemon_stopped`` log line: a durable
    commit is one sync of the WAL (bench/fsyncs.py counts the syscalls themselves)."""
    for line in reversed(log.read_text(encoding="utf-8", errors="replace").splitlines()):
        if '"daemon_stopped"' in line:
            stopped = json.loads(line)
            return {
                "durable_commits_per_round": round(stopped["durable_commits"] / rounds, 2),
                "relaxed_commits_per_round": round(stopped["relaxed_commits"] / rounds, 2),
            }
    return {}


async def bench(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    broker = Broker(tmp / "broker")
    await broker.start()
    http_port = free_port()
    workdir = tmp / "table"
    workdir.mkdir()
    table = TableProcess(
        TABLE,
        workdir,
        extra=mqtt_section(broker.port) + display_section(http_port),
        log_level="INFO",  # its stop line counts the journal's commits
    )
    devices = Devices.make(workdir, seed=args.seed, interval=args.interval)
    arrivals = Arrivals()
    disk = DiskMonitor(tmp)
    tasks: list[asyncio.Task[None]] = []
    try:
        await devices.open()
        casino = ["mqtt", str(broker.port), topic_prefix(TABLE)]
        tasks.append(asyncio.create_task(observer(casino, arrivals), name="subscriber"))
        await asyncio.wait_for(arrivals.subscribed.wait(), WAIT)
        greeted = devices.greetings()
        ready = await table.start()
        print(f"daemon READY in {ready * 1000:.0f} ms (pid {table.pid})", flush=True)
        if not await devices.wait_greeted(greeted):
            raise RuntimeError("the daemon did not open the device ports")
        url = f"http://127.0.0.1:{http_port}/api/events"
        tasks.append(asyncio.create_task(observer(["page", url], arrivals), name="sse"))
        await asyncio.wait_for(arrivals.sse_connected.wait(), 30)
        if not await arrivals.until(lambda: "online" in arrivals.statuses, 30):
            raise RuntimeError("the table never said it is online over MQTT")
        probe = aiomqtt.Client("127.0.0.1", broker.port, identifier="bench-probe")
        async with probe, contextlib.AsyncExitStack() as stack:
            stack.enter_context(disk)
            floor = Floor(workdir, probe, arrivals)
            mqtt_lat: list[float] = []
            sse_lat: list[float] = []
            to_txn: list[float] = []
            txn_to_mqtt: list[float] = []
            end_gap: list[float] = []
            worst: list[Slow] = []
            missing = 0
            replayed = 0
            total = args.warmup + args.rounds
            for n in range(1, total + 1):
                await devices.rng.press()
                await asyncio.sleep(args.gap)  # the draw is journaled before the deal begins
                plan = await devices.shuffler.deal()
                stub = devices.port.stub_at
                end = devices.port.end_at
                assert stub is not None and end is not None
                sid = plan.shuffle_id
                got = await arrivals.until(
                    lambda sid=sid: sid in arrivals.mqtt and sid in arrivals.sse
                )
                if not got:
                    missing += 1
                    print(f"  round {n} ({sid}): no arrival within {WAIT:g} s", flush=True)
                    continue
                if not await floor.sample():
                    raise RuntimeError("a probe did not come back")
                if n <= args.warmup:
                    continue
                at, wall, txn_time, was_replayed = arrivals.mqtt[sid]
                replayed += was_replayed
                mqtt_lat.append(at - stub[0])
                worst.append(Slow(at - stub[0], sid, stub[1]))
                sse_lat.append(arrivals.sse[sid] - stub[0])
                end_gap.append(end[0] - stub[0])
                to_txn.append(_iso(txn_time) - stub[1])
                txn_to_mqtt.append(wall - _iso(txn_time))
                if (n - args.warmup) % 50 == 0:
                    print(
                        f"  {n - args.warmup}/{args.rounds} rounds: MQTT p99 "
                        f"{percentile(mqtt_lat, 99) * 1000:.2f} ms, display p99 "
                        f"{percentile(sse_lat, 99) * 1000:.2f} ms",
                        flush=True,
                    )
        code = await table.stop()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await table.stop()
        table.close()
        await devices.close()
        await broker.stop()
    for line in slowest(table.journal_path, sorted(worst, reverse=True)[:3], disk):
        print(line)
    floor_total = [a + b for a, b in zip(floor.fsync, floor.rtt, strict=True)][args.warmup :]
    fsyncs, rtts = floor.fsync[args.warmup :], floor.rtt[args.warmup :]
    print(f"machine: {machine()}")
    print(describe("round → MQTT subscriber", mqtt_lat, floor_total))
    print(describe("round → dealer page (SSE)", sse_lat, floor_total))
    print(describe("  of which: pty → journal txn start", to_txn))
    print(describe("  txn start → MQTT subscriber", txn_to_mqtt))
    print(describe("floor: fsync (small append)", fsyncs))
    print(describe("floor: MQTT QoS 1 round trip", rtts))
    print(describe("floor: fsync + round trip", floor_total))
    monitor = disk.durations()
    print(describe("disk monitor: fsync every 0.1 s", monitor))
    over = [w for w in worst if w.latency * 1000 > GOAL_MS]
    stalled = [
        w for w in over if disk.worst_between(w.stub_wall - 0.2, w.stub_wall + w.latency) >= STALL_S
    ]
    print(
        f"rounds over {GOAL_MS:g} ms: {len(over)} of {len(worst)}; the disk monitor saw an fsync "
        f"of {STALL_S * 1000:.0f} ms or more during {len(stalled)} of them (it samples every "
        f"0.1 s, so it misses short stalls)"
    )
    print(f"(DEAL_END followed the STUB by p50 {percentile(end_gap, 50) * 1e6:.0f} µs)")
    mqtt_p99, sse_p99 = percentile(mqtt_lat, 99), percentile(sse_lat, 99)
    for name, p99 in (("MQTT", mqtt_p99), ("dealer page", sse_p99)):
        verdict = "met" if p99 * 1000 <= GOAL_MS else "NOT met"
        print(f"goal p99 ≤ {GOAL_MS:g} ms for {name}: {verdict} ({p99 * 1000:.2f} ms)")
    floor_p50, floor_p99 = percentile(floor_total, 50), percentile(floor_total, 99)
    return {
        "rounds": len(mqtt_lat),
        "missing": missing,
        "replayed": replayed,
        "daemon_exit": code,
        **commits_per_round(table.workdir / "daemon.log", args.warmup + args.rounds),
        "mqtt_p50_ms": ms(percentile(mqtt_lat, 50)),
        "mqtt_p99_ms": ms(mqtt_p99),
        "display_p50_ms": ms(percentile(sse_lat, 50)),
        "display_p99_ms": ms(sse_p99),
        "pty_to_txn_p50_ms": ms(percentile(to_txn, 50)),
        "txn_to_mqtt_p50_ms": ms(percentile(txn_to_mqtt, 50)),
        "fsync_p50_ms": ms(percentile(fsyncs, 50)),
        "fsync_p99_ms": ms(percentile(fsyncs, 99)),
        "rtt_p50_ms": ms(percentile(rtts, 50)),
        "rtt_p99_ms": ms(percentile(rtts, 99)),
        "floor_p50_ms": ms(floor_p50),
        "floor_p99_ms": ms(floor_p99),
        "mqtt_over_floor_p50": round(percentile(mqtt_lat, 50) / floor_p50, 2),
        "mqtt_over_floor_p99": round(mqtt_p99 / floor_p99, 2),
        "display_over_floor_p50": round(percentile(sse_lat, 50) / floor_p50, 2),
        "display_over_floor_p99": round(sse_p99 / floor_p99, 2),
        "goal_ms": GOAL_MS,
        "goal_met": bool(mqtt_p99 * 1000 <= GOAL_MS and sse_p99 * 1000 <= GOAL_MS),
        "rounds_over_goal": len(over),
        "over_goal_with_disk_stall": len(stalled),
        "disk_fsync_p99_ms": ms(percentile(monitor, 99)),
        "disk_fsync_max_ms": ms(max(monitor, default=0.0)),
        "frame_interval_s": args.interval,
        "journal_synchronous": "FULL",
        **{f"machine_{k}": v for k, v in machine().items()},
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200, help="measured rounds")
    parser.add_argument("--warmup", type=int, default=10, help="rounds dealt before measuring")
    parser.add_argument("--gap", type=float, default=0.25, help="seconds between press and deal")
    parser.add_argument(
        "--interval",
        type=float,
        default=0.05,
        help="seconds between a deal's frames (a real shuffler takes about a second per packet; "
        "0 sends the whole deal at once, so the stub waits behind nine journal commits)",
    )
    parser.add_argument("--seed", type=int, default=8)
    parser.add_argument(
        "--keep", metavar="DIR", help="work in DIR (new) and keep it: journal, logs"
    )
    parser.add_argument(
        "--observe", nargs="+", metavar="ARG", help=argparse.SUPPRESS
    )  # this benchmark's own observers: `mqtt PORT PREFIX` or `page URL`
    args = parser.parse_args()
    if args.observe:
        kind, *rest = args.observe
        with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
            asyncio.run(
                observe_mqtt(int(rest[0]), rest[1]) if kind == "mqtt" else observe_page(rest[0])
            )
        return 0
    configure_logging("WARNING", "console")  # the simulators' debug lines are not figures
    if args.keep:
        Path(args.keep).mkdir(parents=True)
        figures = asyncio.run(bench(args, Path(args.keep)))
    else:
        with tempfile.TemporaryDirectory(prefix="paigow-latency-") as name:
            figures = asyncio.run(bench(args, Path(name)))
    last_line(figures)
    return 0 if figures["missing"] == 0 and figures["rounds"] == args.rounds else 1


if __name__ == "__main__":
    sys.exit(main())
