"""What a flood against the display costs the table (docs/display.md, "Limits and floods").

The daemon runs as a real process (`paigow-table run`, open files limited to 4,096 as the unit
does) with its shuffler and RNG box simulated on ptys in this process and its display on
0.0.0.0 with a supervisor token. The kiosk is a live stream (/api/events) from 127.0.0.1; the
flood comes from this machine's own non-loopback address, so the server treats it as the network
(without one the flood comes from 127.0.0.2, which is loopback and eats the kiosk's reserve too).

quiet   the kiosk's time from the deal's last frame to the settled round on its stream, and
        /api/state's answer time, with nothing else connected (the baseline);
idle    1,100 connections that send nothing: the most the daemon held (its sockets, and the
        guard's own count), how many were refused at once, how long until the server had closed
        every one (request_timeout), and the kiosk's figures during the flood;
streams 1,000 live streams with the token: how many were answered, held at the end, dropped
        (oldest remote first) and refused at connect (the connection cap), and the kiosk's figures.

For each flood: the daemon's log bytes and CPU seconds. The last line is one JSON object.

Run: `.venv/bin/python bench/display_flood.py [--idle 1100] [--streams 1000] [--request-timeout 10]`
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import os
import resource
import socket
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
    TableProcess,
    cpu_seconds,
    machine,
    ms,
    percentile,
    print_figures,
    sse_events,
)

from simulators.mosquitto import free_port

TABLE = "PG-FLD"
TOKEN = "bench-flood-supervisor-token"
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


class Kiosk:
    """The dealer page's live stream from 127.0.0.1: every event, stamped on arrival."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.events: asyncio.Queue[SseEvent] = asyncio.Queue()
        self.session = aiohttp.ClientSession()
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

    async def next_closed(self, timeout: float = 20.0) -> SseEvent:
        async with asyncio.timeout(timeout):
            while True:
                event = await self.events.get()
                if event.event == "round" and event.data.get("phase") in CLOSED:
                    return event

    async def state_times(self, count: int = 20) -> list[float]:
        """/api/state answered ``count`` times in a row (seconds each)."""
        times = []
        for _ in range(count):
            start = time.perf_counter()
            async with self.session.get(f"{self.url}/api/state") as response:
                assert response.status == 200, response.status
                await response.read()
            times.append(time.perf_counter() - start)
        return times

    async def overview(self) -> dict[str, Any]:
        async with self.session.get(f"{self.url}/api/overview") as response:
            limits: dict[str, Any] = (await response.json())["limits"]
            return limits


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
        started = time.perf_counter()
        conns = [
            c for c in [await _connect(host, port, args.source) for _ in range(args.idle)] if c
        ]
        opened_s = time.perf_counter() - started
        during = await kiosk.overview()
        state = await kiosk.state_times()
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
        "idle_refused_at_once": during.get("connection_refused", 0)
        - before.get("connection_refused", 0),
        "idle_timed_out": after.get("request_timeout", 0) - before.get("request_timeout", 0),
        "idle_all_closed_s": round(all_closed_s, 3),
        "idle_left_open": sum(c is None for c in closes),
        "idle_kiosk_round_ms": ms(round_s),
        "idle_kiosk_state_p50_ms": ms(percentile(state, 50)),
        "idle_kiosk_state_max_ms": ms(max(state)),
        "idle_log_bytes": log.stat().st_size - log0,
        "idle_daemon_cpu_s": round(cpu_seconds(table.pid) - cpu0, 2),
    }


async def _open_stream(host: str, port: int, source: str) -> Conn | None:
    """A live stream with the token: None when the server refused it (closed at connect, or
    answered other than 200)."""
    conn = await _connect(host, port, source)
    if conn is None:
        return None
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
    if not status.startswith(b"HTTP/1.1 200"):
        writer.close()
        return None
    return reader, writer


async def stream_flood(
    table: TableProcess, kiosk: Kiosk, devices: Devices, target: tuple[str, int], args: Any
) -> dict[str, Any]:
    assert table.pid is not None
    host, port = target
    log = table.workdir / "daemon.log"
    log0, cpu0 = log.stat().st_size, cpu_seconds(table.pid)
    before = await kiosk.overview()
    with Sampler(lambda: daemon_sockets(table.pid or 0)) as sockets:
        started = time.perf_counter()
        streams = [await _open_stream(host, port, args.source) for _ in range(args.streams)]
        opened_s = time.perf_counter() - started
        during = await kiosk.overview()
        state = await kiosk.state_times()
        round_s = await kiosk_round(kiosk, devices)
    answered = [s for s in streams if s is not None]
    for _, writer in answered:
        writer.close()

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
        "streams_kiosk_state_p50_ms": ms(percentile(state, 50)),
        "streams_kiosk_state_max_ms": ms(max(state)),
        "streams_log_bytes": log.stat().st_size - log0,
        "streams_daemon_cpu_s": round(cpu_seconds(table.pid) - cpu0, 2),
    }


def display_section(port: int, token: Path, request_timeout: float) -> str:
    return (
        f'\n[display]\nenabled = true\nhost = "0.0.0.0"\nport = {port}\n'
        f'supervisor_token_file = "{token}"\nrequest_timeout = {request_timeout}\n'
    )


async def bench(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    port = free_port()
    token = workdir / "supervisor.token"
    token.write_text(TOKEN + "\n", encoding="utf-8")
    token.chmod(0o600)
    table = TableProcess(TABLE, workdir, extra=display_section(port, token, args.request_timeout))
    remote = non_loopback_address()
    args.source = remote or "127.0.0.2"
    target = (remote or "127.0.0.1", port)
    figures: dict[str, Any] = {
        "machine": machine(),
        "flood_from": "network" if remote else "127.0.0.2 (loopback: uses the kiosk's reserve)",
        "max_connections": 256,
        "max_streams": 64,
        "request_timeout_s": args.request_timeout,
    }
    devices = Devices.make(workdir, seed=83)
    await devices.open()
    kiosk = Kiosk(f"http://127.0.0.1:{port}")
    try:
        await table.start()
        await devices.wait_greeted((0, 0))
        await kiosk.start()
        await kiosk_round(kiosk, devices)  # warm-up
        quiet = [await kiosk_round(kiosk, devices) for _ in range(3)]
        state = await kiosk.state_times()
        figures["quiet_kiosk_round_ms"] = ms(percentile(quiet, 50))
        figures["quiet_kiosk_state_p50_ms"] = ms(percentile(state, 50))
        print("idle connections …", file=sys.stderr, flush=True)
        figures.update(await idle_flood(table, kiosk, devices, target, args))
        print("live streams …", file=sys.stderr, flush=True)
        figures.update(await stream_flood(table, kiosk, devices, target, args))
        figures["daemon_alive"] = table.alive
    finally:
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
