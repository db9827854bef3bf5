"""What the benchmarks share: a Mosquitto of their own, table daemons as real processes with a
real $NOTIFY_SOCKET, simulated devices on ptys that note when a deal's last frame was written,
and the figures (percentiles).

Nothing here touches the system's broker on 1883: every broker listens on a free port of
127.0.0.1 with its config, log and persistence file in the benchmark's own directory. Every
child gets PR_SET_PDEATHSIG (``with_parent``): a benchmark that is killed leaves nothing behind.
Import it from a script in bench/ (``python bench/latency.py`` puts bench/ on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from drivers.framing import STX, MsgType
from simulators.mosquitto import MOSQUITTO, Mosquitto, with_parent
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator

SITE = "demo"  # DEMO_CONFIG's site
MB = 1024 * 1024


# --- figures ---------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (``q`` in 0–100) of ``values``; NaN when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def ms(seconds: float) -> float:
    """Seconds as milliseconds, rounded for a JSON figure."""
    return round(seconds * 1000, 2) if not math.isnan(seconds) else math.nan


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    mem = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    return {
        "cpus": os.cpu_count(),
        "mem_gb": round(mem / 1024**3, 1),
        "python": sys.version.split()[0],
        "load1": round(os.getloadavg()[0], 2),
    }


def last_line(figures: dict[str, Any]) -> None:
    """The benchmark's last line: one JSON object with its figures."""
    print(json.dumps(figures, separators=(", ", ": ")), flush=True)


def print_figures(figures: dict[str, Any], width: int = 32) -> None:
    """Each figure on a line of its own (the machine only in the JSON), then the JSON line."""
    for key, value in figures.items():
        if key != "machine":
            print(f"{key:{width}} {value}")
    last_line(figures)


class DiskMonitor:
    """fsyncs a small appended file every ``every`` s in a thread and keeps (wall time at the
    start, seconds it took): the disk's own stalls, to set the daemons' outliers against."""

    def __init__(self, directory: Path, every: float = 0.1) -> None:
        self.path = directory / "disk-monitor.bin"
        self.every = every
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="disk-monitor", daemon=True)

    def __enter__(self) -> DiskMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            while not self._stop.wait(self.every):
                wall, start = time.time(), time.perf_counter()
                os.write(fd, b"x" * 128)
                os.fsync(fd)
                self.samples.append((wall, time.perf_counter() - start))
        finally:
            os.close(fd)

    def durations(self) -> list[float]:
        return [d for _, d in self.samples]

    def worst_between(self, start: float, end: float) -> float:
        """The longest fsync that overlapped wall times ``start``–``end`` (0 if none)."""
        return max((d for w, d in self.samples if w <= end and w + d >= start), default=0.0)

    def stalls(self, threshold: float = 0.1) -> int:
        return sum(d >= threshold for d in self.durations())


# --- processes -------------------------------------------------------------------------------


def raise_fd_limit() -> int:
    """Lift the soft limit of open files to the hard one (200 ptys are 400 descriptors)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class Broker(Mosquitto):
    """A Mosquitto of the benchmark's own on a free port of 127.0.0.1 (simulators.mosquitto's,
    which the tests use too). ``persistence``: sessions and queued QoS 1 messages survive a
    ``stop`` then ``start`` (a restart); ``kill`` is a crash. A clean stop may take a while to
    save a large queue: the benchmarks give it 30 s."""

    def __init__(
        self,
        workdir: Path,
        port: int = 0,
        *,
        persistence: bool = False,
        autosave: int = 30,
        options: Iterable[str] = (),
    ) -> None:
        super().__init__(workdir, port, options=options, persistence=persistence, autosave=autosave)

    async def stop(self, timeout: float = 30.0) -> None:
        await super().stop(timeout)


@contextlib.contextmanager
def broker_process(workdir: Path) -> Iterator[int]:
    """A Mosquitto (persistence off) for code without an event loop; yields its port once it
    accepts connections, stops it (SIGTERM) at the end."""
    broker = Broker(workdir)
    broker.write_config()
    with open(workdir / "mosquitto.log", "ab") as log:
        proc = subprocess.Popen(
            with_parent([MOSQUITTO, "-c", str(broker.conf)]),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", broker.port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"mosquitto did not start (see {workdir}/mosquitto.log)"
                    ) from None
                time.sleep(0.05)
        yield broker.port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- simulated devices -----------------------------------------------------------------------


class TimedPtyPort(PtyPort):
    """A pty that notes when the frame completing a deal (the STUB: seven packets and the stub
    settle the round) and the DEAL_END after it were written: ``perf_counter`` and wall time
    right after the last byte went to the pty (no await lies between the write and the note)."""

    def __init__(self, link: str | os.PathLike[str] | None = None) -> None:
        super().__init__(link)
        self.stub_at: tuple[float, float] | None = None
        self.end_at: tuple[float, float] | None = None

    async def write(self, data: bytes) -> bool:
        ok = await super().write(data)
        if ok and len(data) > 3 and data[0] == STX:
            if data[3] == MsgType.STUB:
                self.stub_at = (time.perf_counter(), time.time())
            elif data[3] == MsgType.DEAL_END:
                self.end_at = (time.perf_counter(), time.time())
        return ok


@dataclass
class Devices:
    """A table's shuffler and RNG box on ptys linked at ``workdir/shuffler`` and ``workdir/rng``."""

    shuffler: ShufflerSimulator
    rng: RngSimulator
    port: TimedPtyPort

    @classmethod
    def make(cls, workdir: Path, seed: int, interval: float = 0.0) -> Devices:
        port = TimedPtyPort(workdir / "shuffler")
        return cls(
            ShufflerSimulator(port, seed=seed, interval=interval),
            RngSimulator(TimedPtyPort(workdir / "rng"), seed=seed),
            port,
        )

    async def open(self) -> None:
        await self.shuffler.port.open()
        await self.rng.port.open()

    async def close(self) -> None:
        await self.shuffler.close()
        await self.rng.close()

    def greetings(self) -> tuple[int, int]:
        return self.shuffler.greetings, self.rng.greetings

    async def wait_greeted(self, before: tuple[int, int], timeout: float = 30.0) -> bool:
        """Wait until the daemon opened both ports again (its driver greets with a
        STATUS_REQUEST on every connect), so a deal is heard."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            now = self.greetings()
            if now[0] > before[0] and now[1] > before[1]:
                return True
            await asyncio.sleep(0.05)
        return False


# --- the daemon as a process -----------------------------------------------------------------


def mqtt_section(port: int, *, keepalive: int = 30, initial: float = 0.5, cap: float = 30.0) -> str:
    """``[mqtt]`` to a broker on 127.0.0.1:``port`` (the production reconnect defaults)."""
    return (
        f'\n[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {port}\nkeepalive = {keepalive}\n'
        f"[mqtt.reconnect]\ninitial = {initial}\ncap = {cap}\n"
    )


#: Benchmarks deal many times faster than a real shuffler (a round a minute, ten frames a round):
#: the per-device limit of 600 events a minute would count their deals as a flood.


def display_section(port: int | None) -> str:
    """``[display]`` on 127.0.0.1:``port``, or switched off (None)."""
    if port is None:
        return "\n[display]\nenabled = false\n"
    return f'\n[display]\nenabled = true\nhost = "127.0.0.1"\nport = {port}\n'


def topic_prefix(table_id: str) -> str:
    return f"casino/{SITE}/paigow/{table_id}/"


def cpu_seconds(pid: int | str, stat: Path | None = None) -> float:
    """User + system CPU time of a live process so far (/proc/PID/stat), or of the task whose
    ``stat`` file is given (/proc/PID/task/TID/stat)."""
    text = (stat or Path(f"/proc/{pid}/stat")).read_text()
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


# --- the dealer page's live stream -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SseEvent:
    event: str
    data: Any
    at: float  # perf_counter when the event's blank line arrived


async def sse_events(
    session: aiohttp.ClientSession, url: str, *, connect_timeout: float = 30.0
) -> AsyncIterator[SseEvent]:
    """The events of a Server-Sent Events stream (``/api/events``), each stamped on arrival.

    Retries the connection until the server listens (up to ``connect_timeout``)."""
    deadline = time.monotonic() + connect_timeout
    while True:
        try:
            response = await session.get(url, timeout=aiohttp.ClientTimeout(total=None))
            break
        except aiohttp.ClientConnectionError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)
    async with response:
        response.raise_for_status()
        event, data = "message", ""
        async for raw in response.content:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line:
                if data:
                    yield SseEvent(event, json.loads(data), time.perf_counter())
                event, data = "message", ""
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
