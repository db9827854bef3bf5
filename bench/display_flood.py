"""What a flood against the display costs the table (docs/display.md, "Limits and floods").

The daemon runs as a real process (`paigow-table run`, open files limited to 4,096 as the unit
does) with its shuffler and RNG box simulated on ptys in this process and its display on
0.0.0.0 with a supervisor token and a kiosk token. The kiosk is 127.0.0.1 with its credential,
got as the launcher gets it (a ticket for the kiosk token, spent for the kiosk's cookie): its
live stream (/api/events) and its /api/state. The flood comes, by default, from 127.0.0.1 too,
the kiosk's own address, without the credential (the outside audit's attack); `--from network`
floods from this machine's own non-loopback address instead, which the server treats as the
network (with the supervisor token).

quiet   the kiosk's time from the deal's last frame to the settled round on its stream, and
        /api/state's answer time, with nothing else connected (the baseline);
idle    1,100 connections that send nothing: the most the daemon held (its sockets, and the
        guard's own count), how many were closed to make room (evicted) or refused, how long
        until the server had closed every one, and the kiosk's figures;
streams 1,000 live streams without the kiosk's credential: how many were answered, held at the
        end, dropped (oldest first) and refused, and the kiosk's figures.

During each flood the kiosk asks /api/state over and over (every 20 ms, one at a time, each on a
new connection as after a reload) from the flood's first connection until 3 s after its last:
the time until each is answered, trying again at once when refused (p50, p99, max, and the
refused tries). Quiet, the same on a new connection each time (p50, p99 over 200).
Against a server without the kiosk's credential (an older version) the kiosk goes without it.

For each flood: the daemon's log bytes and CPU seconds. The last line is one JSON object.

Run: `.venv/bin/python bench/display_flood.py [--idle 1100] [--streams 1000]
[--request-timeout 10] [--from loopback|network]`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import math
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
from common import (
    Devices,
    SseEvent,
    cpu_seconds,
    machine,
    ms,
    percentile,
    print_figures,
    sse_events,
)

from simulators.mosquitto import free_port
from simulators.tables import TableProcess

TABLE = "PG-FLD"
TOKEN = "bench-flood-supervisor-token"
KIOSK_TOKEN = "bench-flood-kiosk-token-0123456789abcdef"
KIOSK_COOKIE = "paigow_kiosk"
NOFILE = 4096  # systemd/paigow-table.service: LimitNOFILE
CLOSED = ("settled", "dead", "misdeal", "void")


def non_loopback_address() -> str | None:
    """An IPv4 address of this machine that is not loopback (None if it has none)."""
    for probe in ("192.0.2.123", "198.51.100.1", "10.255.255.255"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((probe, 9))  # UDP: nothing is sent; the kernel picks a source
            except OSError:
                continue
            address = str(s.getsockname()[0])
            if not ipaddress.ip_address(address).is_loopback and address != "0.0.0.0":
                return address
    return None


def daemon_sockets(pid: int) -> int:
    """Sockets the daemon holds open (listening, devices' none: ptys are not sockets)."""
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("socket:")
    return count


class Sampler:
    """The most of ``measure()`` seen, sampled every ``every`` s in the background."""

    def __init__(self, measure: Callable[[], int], every: float = 0.02) -> None:
        self.measure = measure
        self.every = every
        self.most = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.most = max(self.most, self.measure())
            await asyncio.sleep(self.every)

    def __enter__(self) -> Sampler:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def kiosk_cookie(url: str) -> str | None:
    """The kiosk's credential, as the launcher and the kiosk page get it (None: this server
    has none to give, an older version)."""
    origin = {"Origin": url}
    async with aiohttp.ClientSession() as session:
        async with session.post(
            f"{url}/api/kiosk/ticket", json={"token": KIOSK_TOKEN}, headers=origin
        ) as response:
            if response.status != 200:
                return None
            ticket = (await response.json())["ticket"]
        async with session.post(f"{url}/api/kiosk", json={"ticket": ticket}, headers=origin) as r:
            return r.cookies[KIOSK_COOKIE].value if r.status == 200 else None


class Kiosk:
    """The dealer page from 127.0.0.1, with the kiosk's cookie when it has one: its live
    stream (every event, stamped on arrival) and its /api/state."""

    def __init__(self, url: str, cookie: str | None) -> None:
        self.url = url
        self.events: asyncio.Queue[SseEvent] = asyncio.Queue()
        headers = {"Cookie": f"{KIOSK_COOKIE}={cookie}"} if cookie else {}
        self.session = aiohttp.ClientSession(headers=headers)
        # /api/state on a new connection each time, as after a reload (a connection kept
        # alive from before the flood would hide what a newcomer meets).
        self.fresh = aiohttp.ClientSession(
            headers=headers, connector=aiohttp.TCPConnector(force_close=True)
        )
        self._task: asyncio.Task[None] | None = None

    async def _read(self) -> None:
        async for event in sse_events(self.session, f"{self.url}/api/events"):
            self.events.put_nowait(event)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._read())
        first = await asyncio.wait_for(self.events.get(), 30)
        assert first.event == "snapshot", first.event

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.session.close()
        await self.fresh.close()

    async def next_closed(self, timeout: float = 20.0) -> SseEvent:
        async with asyncio.timeout(timeout):
            while True:
                event = await self.events.get()
                if event.event == "round" and event.data.get("phase") in CLOSED:
                    return event

    async def state_times(self, count: int = 200) -> list[float]:
        """/api/state answered ``count`` times in a row, each on a new connection (seconds)."""
        times = []
        for _ in range(count):
            start = time.perf_counter()
            async with self.fresh.get(f"{self.url}/api/state") as response:
                assert response.status == 200, response.status
                await response.read()
            times.append(time.perf_counter() - start)
        return times

    async def overview(self) -> dict[str, Any]:
        async with self.session.get(f"{self.url}/api/overview") as response:
            limits: dict[str, Any] = (await response.json())["limits"]
            return limits


class Prober:
    """The kiosk's /api/state, asked every ``every`` s, one at a time, each on a new connection
    and tried again at once while refused: how long each took to be answered. Stopped, it lets
    the question in flight be answered (within ``timeout``), so a kiosk kept waiting by the
    flood is counted in full."""

    def __init__(self, kiosk: Kiosk, every: float = 0.02, timeout: float = 60.0) -> None:
        self.kiosk = kiosk
        self.every = every
        self.timeout = timeout
        self.times: list[float] = []
        self.refused = 0
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    async def _answered(self) -> float:
        start = time.perf_counter()
        while time.perf_counter() - start < self.timeout:
            # A refused or dropped try counts like an error answer: try again at once.
            with contextlib.suppress(aiohttp.ClientError, OSError, TimeoutError):
                async with self.kiosk.fresh.get(
                    f"{self.kiosk.url}/api/state", timeout=aiohttp.ClientTimeout(self.timeout)
                ) as response:
                    await response.read()
                    if response.status == 200:
                        break
            self.refused += 1
            await asyncio.sleep(0.005)
        return time.perf_counter() - start

    async def _run(self) -> None:
        while not self._stopping:
            self.times.append(await self._answered())
            await asyncio.sleep(self.every)

    async def __aenter__(self) -> Prober:
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._stopping = True
        await asyncio.wait_for(self._task, self.timeout + 5)

    def figures(self, prefix: str) -> dict[str, Any]:
        return {
            f"{prefix}_kiosk_state_during_n": len(self.times),
            f"{prefix}_kiosk_state_during_p50_ms": ms(percentile(self.times, 50)),
            f"{prefix}_kiosk_state_during_p99_ms": ms(percentile(self.times, 99)),
            f"{prefix}_kiosk_state_during_max_ms": ms(max(self.times, default=math.nan)),
            f"{prefix}_kiosk_state_refused_tries": self.refused,
        }


HOLD_S = 3.0  # the kiosk keeps asking this long after the flood's last connection


async def kiosk_round(kiosk: Kiosk, devices: Devices) -> float:
    """Deal one round; seconds from its last frame (the STUB) to the kiosk's settled round."""
    while not kiosk.events.empty():
        kiosk.events.get_nowait()
    await devices.rng.press()
    await devices.shuffler.deal()
    shown = await kiosk.next_closed()
    assert devices.port.stub_at is not None
    return shown.at - devices.port.stub_at[0]


Conn = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _connect(host: str, port: int, source: str) -> Conn | None:
    try:
        return await asyncio.open_connection(host, port, local_addr=(source, 0))
    except OSError:
        return None


async def _closed(reader: asyncio.StreamReader, timeout: float) -> float | None:
    """Seconds until the server closed this connection (None: still open after ``timeout``)."""
    start = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            while await reader.read(4096):
                continue  # drain until the server closes it
    except TimeoutError:
        return None
    except OSError:
        pass  # refused: the server aborted it
    return time.perf_counter() - start


async def idle_flood(
    table: TableProcess, kiosk: Kiosk, devices: Devices, target: tuple[str, int], args: Any
) -> dict[str, Any]:
    assert table.pid is not None
    host, port = target
    log = table.workdir / "daemon.log"
    log0, cpu0 = log.stat().st_size, cpu_seconds(table.pid)
    before = await kiosk.overview()
    with Sampler(lambda: daemon_sockets(table.pid or 0)) as sockets:
        async with Prober(kiosk) as probe:
            started = time.perf_counter()
            conns = [
                c for c in [await _connect(host, port, args.source) for _ in range(args.idle)] if c
            ]
            opened_s = time.perf_counter() - started
            await asyncio.sleep(HOLD_S)
        during = await kiosk.overview()
        round_s = await kiosk_round(kiosk, devices)
        closes = await asyncio.gather(*(_closed(r, args.request_timeout + 15) for r, _ in conns))
        all_closed_s = time.perf_counter() - started
        after = await kiosk.overview()
    for _, writer in conns:
        writer.close()
    return {
        "idle_connections": args.idle,
        "idle_connected": len(conns),
        "idle_opened_s": round(opened_s, 3),
        "idle_daemon_sockets_max": sockets.most,
        "idle_guard_connections": during["connections"],
        "idle_evicted": during.get("connection_evicted", 0) - before.get("connection_evicted", 0),
        "idle_refused_at_once": during.get("connection_refused", 0)
        - before.get("connection_refused", 0),
        "idle_timed_out": after.get("request_timeout", 0) - before.get("request_timeout", 0),
        "idle_all_closed_s": round(all_closed_s, 3),
        "idle_left_open": sum(c is None for c in closes),
        "idle_kiosk_round_ms": ms(round_s),
        **probe.figures("idle"),
        "idle_log_bytes": log.stat().st_size - log0,
        "idle_daemon_cpu_s": round(cpu_seconds(table.pid) - cpu0, 2),
    }


async def _open_stream(host: str, port: int, source: str) -> tuple[Conn | None, bool]:
    """A live stream with the supervisor token, without the kiosk's credential, and whether it
    was answered 200. One refused (503) keeps its connection open, as an attacker's would."""
    conn = await _connect(host, port, source)
    if conn is None:
        return None, False
    reader, writer = conn
    try:
        writer.write(
            f"GET /api/events HTTP/1.1\r\nHost: {host}:{port}\r\n"
            f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 10)
    except (OSError, TimeoutError):
        status = b""
    return conn, status.startswith(b"HTTP/1.1 200")


async def stream_flood(
    table: TableProcess, kiosk: Kiosk, devices: Devices, target: tuple[str, int], args: Any
) -> dict[str, Any]:
    assert table.pid is not None
    host, port = target
    log = table.workdir / "daemon.log"
    log0, cpu0 = log.stat().st_size, cpu_seconds(table.pid)
    before = await kiosk.overview()
    with Sampler(lambda: daemon_sockets(table.pid or 0)) as sockets:
        async with Prober(kiosk) as probe:
            started = time.perf_counter()
            streams = [await _open_stream(host, port, args.source) for _ in range(args.streams)]
            opened_s = time.perf_counter() - started
            await asyncio.sleep(HOLD_S)
        during = await kiosk.overview()
        round_s = await kiosk_round(kiosk, devices)
    answered = [conn for conn, ok in streams if ok]
    for conn, _ in streams:
        if conn is not None:
            conn[1].close()

    def delta(key: str) -> int:
        return int(during.get(key, 0)) - int(before.get(key, 0))

    return {
        "streams": args.streams,
        "streams_answered": len(answered),
        "streams_opened_s": round(opened_s, 3),
        "streams_held": during["streams"],
        "streams_dropped": delta("stream_dropped"),
        "streams_refused_503": delta("stream_refused"),
        "streams_refused_at_connect": delta("connection_refused"),
        "streams_daemon_sockets_max": sockets.most,
        "streams_kiosk_round_ms": ms(round_s),
        **probe.figures("streams"),
        "streams_log_bytes": log.stat().st_size - log0,
        "streams_daemon_cpu_s": round(cpu_seconds(table.pid) - cpu0, 2),
    }


def display_section(port: int, token: Path, kiosk: Path | None, request_timeout: float) -> str:
    return (
        f'\n[display]\nenabled = true\nhost = "0.0.0.0"\nport = {port}\n'
        f'supervisor_token_file = "{token}"\nrequest_timeout = {request_timeout}\n'
        + (f'kiosk_token_file = "{kiosk}"\n' if kiosk is not None else "")
    )


def knows_kiosk_tokens() -> bool:
    """Whether the daemon this bench runs (``python -m controller.cli`` from here, as
    TableProcess runs it) has the kiosk's credential: an older version has no such key."""
    probe = "from controller.config.models import DisplayConfig as D\n"
    probe += "print('kiosk_token_file' in D.model_fields)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return done.stdout.strip() == "True"


async def bench(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    port = free_port()
    token = workdir / "supervisor.token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    token.chmod(0o600)
    kiosk_token = workdir / "kiosk.token" if knows_kiosk_tokens() else None
    if kiosk_token is not None:
        kiosk_token.write_text(KIOSK_TOKEN + "\n", encoding="utf-8")
        kiosk_token.chmod(0o600)
    extra = display_section(port, token, kiosk_token, args.request_timeout)
    table = TableProcess(TABLE, workdir, extra=extra)
    remote = non_loopback_address() if args.flood_from == "network" else None
    if args.flood_from == "network" and remote is None:
        raise SystemExit("--from network: this machine has no non-loopback address")
    args.source = remote or "127.0.0.1"
    target = (remote or "127.0.0.1", port)
    figures: dict[str, Any] = {
        "machine": machine(),
        "flood_from": "network" if remote else "127.0.0.1 (the kiosk's own address)",
        "max_connections": 256,
        "max_streams": 64,
        "request_timeout_s": args.request_timeout,
    }
    devices = Devices.make(workdir, seed=83)
    await devices.open()
    url = f"http://127.0.0.1:{port}"
    kiosk: Kiosk | None = None
    try:
        await table.start()
        await devices.wait_greeted((0, 0))
        cookie = await kiosk_cookie(url)
        figures["kiosk_credential"] = cookie is not None
        kiosk = Kiosk(url, cookie)
        await kiosk.start()
        await kiosk_round(kiosk, devices)  # warm-up
        quiet = [await kiosk_round(kiosk, devices) for _ in range(3)]
        state = await kiosk.state_times()
        figures["quiet_kiosk_round_ms"] = ms(percentile(quiet, 50))
        figures["quiet_kiosk_state_p50_ms"] = ms(percentile(state, 50))
        figures["quiet_kiosk_state_p99_ms"] = ms(percentile(state, 99))
        print("idle connections …", file=sys.stderr, flush=True)
        figures.update(await idle_flood(table, kiosk, devices, target, args))
        print("live streams …", file=sys.stderr, flush=True)
        figures.update(await stream_flood(table, kiosk, devices, target, args))
        figures["daemon_alive"] = table.alive
    finally:
        if kiosk is not None:
            await kiosk.close()
        await table.stop()
        table.close()
        await devices.close()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", type=int, default=1100, help="idle connections to open")
    parser.add_argument("--streams", type=int, default=1000, help="live streams to open")
    parser.add_argument(
        "--request-timeout", type=float, default=10.0, help="[display] request_timeout (s)"
    )
    parser.add_argument(
        "--from",
        dest="flood_from",
        choices=["loopback", "network"],
        default="loopback",
        help="flood from 127.0.0.1, the kiosk's own address (default), or from this machine's "
        "non-loopback address",
    )
    parser.add_argument("--keep", help="work in this directory and keep it")
    args = parser.parse_args()
    # The daemon inherits this process's limit: as the unit sets it. The flood's own sockets fit.
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(NOFILE, hard), hard))
    if args.keep:
        Path(args.keep).mkdir(parents=True, exist_ok=True)
        figures = asyncio.run(bench(args, Path(args.keep)))
    else:
        with tempfile.TemporaryDirectory(prefix="bench-display-flood-") as name:
            figures = asyncio.run(bench(args, Path(name)))
    print_figures(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
