"""controller/systemd.py against a real Unix datagram socket standing in for $NOTIFY_SOCKET."""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import systemd


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def notify_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    path = tmp_path / "notify"
    assert len(str(path)) < 100, "AF_UNIX paths are limited to 108 bytes"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield sock
    sock.close()


def received(sock: socket.socket) -> str:
    return sock.recv(4096).decode()


def test_no_socket_is_a_no_op() -> None:
    assert systemd.notify("READY=1") is False
    assert systemd.ready() is False
    assert systemd.watchdog_ping() is False
    assert systemd.stopping() is False
    assert systemd.watchdog_interval() is None


def test_ready_status_watchdog_stopping(notify_socket: socket.socket) -> None:
    assert systemd.ready("table PG-07 open")
    assert received(notify_socket) == "READY=1\nSTATUS=table PG-07 open"
    assert systemd.status("two lines\nbecome one")
    assert received(notify_socket) == "STATUS=two lines become one"
    assert systemd.watchdog_ping()
    assert received(notify_socket) == "WATCHDOG=1"
    assert systemd.stopping()
    assert received(notify_socket) == "STOPPING=1"


def test_abstract_socket() -> None:
    name = f"paigow-test-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(5)
        assert systemd.ready(env={"NOTIFY_SOCKET": f"@{name}"})
        assert received(sock) == "READY=1"


def test_unusable_socket_returns_false(tmp_path: Path) -> None:
    assert systemd.notify("READY=1", env={"NOTIFY_SOCKET": str(tmp_path / "gone")}) is False
    assert systemd.notify("READY=1", env={"NOTIFY_SOCKET": "relative/path"}) is False


def test_watchdog_interval_is_half_of_watchdog_usec() -> None:
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "10000000"}) == 5.0
    pid = str(os.getpid())
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": pid}) == 5.0
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "10000000", "WATCHDOG_PID": "1"}) is None
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "0"}) is None
    assert systemd.watchdog_interval({"WATCHDOG_USEC": "soon"}) is None
    assert systemd.watchdog_interval({}) is None


async def test_watchdog_loop_pings_at_half_the_timeout(
    notify_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "400000")  # 0.4 s: a ping every 0.2 s
    notify_socket.setblocking(False)
    loop = asyncio.get_running_loop()
    task = asyncio.create_task(systemd.watchdog_loop(), name="watchdog")
    try:
        arrivals = []
        for _ in range(4):
            data = await asyncio.wait_for(loop.sock_recv(notify_socket, 4096), timeout=5)
            assert data == b"WATCHDOG=1"
            arrivals.append(time.monotonic())
    finally:
        task.cancel()
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert min(gaps) >= 0.19, gaps
    # Well inside the timeout; a loaded machine may run the loop a little late.
    assert sum(gaps) / len(gaps) < 0.35, gaps


async def test_watchdog_loop_withholds_pings_while_unhealthy(notify_socket: socket.socket) -> None:
    notify_socket.setblocking(False)
    loop = asyncio.get_running_loop()
    healthy = asyncio.Event()
    pinged_unhealthy = 0

    def is_healthy() -> bool:
        nonlocal pinged_unhealthy
        if not healthy.is_set():
            pinged_unhealthy += 1
            if pinged_unhealthy == 3:
                healthy.set()
        return healthy.is_set()

    task = asyncio.create_task(systemd.watchdog_loop(0.01, healthy=is_healthy))
    try:
        data = await asyncio.wait_for(loop.sock_recv(notify_socket, 4096), timeout=5)
    finally:
        task.cancel()
    assert data == b"WATCHDOG=1"
    assert pinged_unhealthy == 3, "no ping was sent before the check passed"


async def test_watchdog_loop_returns_when_off() -> None:
    await asyncio.wait_for(systemd.watchdog_loop(), timeout=1)
