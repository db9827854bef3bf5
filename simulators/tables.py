"""Real table daemons for the pit's demo and tests: ``paigow-table run --config FILE`` as a child
process per table (READY=1 awaited on its own $NOTIFY_SOCKET, SIGTERM to stop, SIGKILL to
crash), its shuffler and RNG box simulated on ptys in this process, and a dealer that presses
the RNG box and deals a round every ``interval`` seconds."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from simulators.demo import DEMO_CONFIG
from simulators.mosquitto import with_parent
from simulators.notify import forget, notify_socket
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator

#: Deals faster than a real shuffler would count as a flood of device events.
FAST_LIMITS = "\n[limits]\ndevice_events_per_minute = 100000\n"


def table_mqtt_section(
    port: int,
    *,
    protocol: str = "3.1.1",
    checkpoint_key_file: Path | None = None,
    command_keys_file: Path | None = None,
    host: str = "127.0.0.1",
) -> str:
    lines = [
        "\n[mqtt]",
        "enabled = true",
        f'host = "{host}"',
        f"port = {port}",
        f'protocol = "{protocol}"',
        "keepalive = 10",
    ]
    if checkpoint_key_file is not None:
        lines.append(f'checkpoint_key_file = "{checkpoint_key_file}"')
    if command_keys_file is not None:
        lines.append(f'command_keys_file = "{command_keys_file}"')
    lines += ["[mqtt.reconnect]", "initial = 0.1", "cap = 1.0", ""]
    return "\n".join(lines)


@dataclass
class TableProcess:
    """``paigow-table run --config FILE`` for one table, as systemd would run it: its own
    $NOTIFY_SOCKET (READY=1 is awaited), SIGTERM to stop, SIGKILL to crash. Its stderr goes to
    ``workdir/daemon.log``. Start and stop it from the main thread (see ``with_parent``)."""

    table_id: str
    workdir: Path
    extra: str = ""
    log_level: str = "WARNING"  # the demo config's; INFO adds a line a round
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    stop_timeouts: int = 0
    ready_times: list[float] = field(default_factory=list)
    _sock: socket.socket | None = None

    @property
    def config_path(self) -> Path:
        return self.workdir / "table.toml"

    @property
    def journal_path(self) -> Path:
        return self.workdir / "journal.sqlite3"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def write_config(self) -> Path:
        self.workdir.mkdir(parents=True, exist_ok=True)
        text = DEMO_CONFIG.format(
            table=self.table_id,
            shuffler=self.workdir / "shuffler",
            rng=self.workdir / "rng",
            journal=self.journal_path,
        ).replace('level = "WARNING"', f'level = "{self.log_level}"')
        self.config_path.write_text(text + self.extra + FAST_LIMITS, encoding="utf-8")
        return self.config_path

    def _notify_socket(self) -> socket.socket:
        if self._sock is None:
            self._sock = notify_socket(self.workdir / "notify.sock")
        forget(self._sock)  # what an earlier run of the daemon said
        return self._sock

    def spawn(self) -> float:
        """Start the process; returns the perf_counter of the spawn."""
        if not self.config_path.exists():
            self.write_config()
        sock = self._notify_socket()
        env = {**os.environ, "NOTIFY_SOCKET": sock.getsockname()}
        log = open(self.workdir / "daemon.log", "ab")  # noqa: SIM115 (the child holds it)
        try:
            started = time.perf_counter()
            command = [sys.executable, "-m", "controller.cli", "run", "--config"]
            self.proc = subprocess.Popen(
                with_parent([*command, str(self.config_path)]),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        finally:
            log.close()
        self.starts += 1
        return started

    async def wait_ready(self, started: float, timeout: float = 60.0) -> float:
        """Wait for READY=1; returns seconds from ``started``. Raises if the process exits or
        stays silent past ``timeout``."""
        assert self._sock is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.table_id}: daemon exited with {self.proc.returncode} before READY "
                    f"(see {self.workdir / 'daemon.log'})"
                )
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError(f"{self.table_id}: no READY=1 within {timeout:g} s")
            try:
                data = await asyncio.wait_for(loop.sock_recv(self._sock, 4096), min(left, 0.5))
            except TimeoutError:
                continue
            if b"READY=1" in data:
                elapsed = time.perf_counter() - started
                self.ready_times.append(elapsed)
                return elapsed

    async def start(self, timeout: float = 60.0) -> float:
        return await self.wait_ready(self.spawn(), timeout)

    def terminate(self) -> None:
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(signal.SIGTERM)

    async def stop(self, timeout: float = 30.0, *, signalled: bool = False) -> int | None:
        """SIGTERM (unless ``signalled`` already) and wait; SIGKILL after ``timeout``. Returns
        the exit code: 0 for a clean stop, -9 when it had to be killed."""
        if not signalled:
            self.terminate()
        return await self._reap(timeout)

    async def kill(self) -> int | None:
        """kill -9, as a crash or the OOM killer would."""
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
        return await self._reap(10.0)

    async def _reap(self, timeout: float) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        deadline = time.monotonic() + timeout
        while proc.poll() is None:
            if time.monotonic() > deadline:
                self.stop_timeouts += 1
                proc.kill()
                deadline = time.monotonic() + 10.0
            await asyncio.sleep(0.02)
        return proc.returncode

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


@dataclass
class TableDaemon:
    """One table: the daemon as a process, its simulated devices, its dealer."""

    table_id: str
    workdir: Path
    extra: str = ""
    display_port: int | None = None
    seed: int = 1
    #: a biased simulated shuffler by name (simulators/biased.py), to see game protection work
    bias: str | None = None
    dealt: int = 0
    shuffler: ShufflerSimulator | None = None
    rng: RngSimulator | None = None
    process: TableProcess = field(init=False, repr=False)
    _dealer: asyncio.Task[None] | None = field(default=None, repr=False)

    @property
    def journal(self) -> Path:
        return self.workdir / "journal.sqlite3"

    @property
    def config_path(self) -> Path:
        return self.workdir / "table.toml"

    def __post_init__(self) -> None:
        #: the daemon's process, as systemd would run it (the benchmarks' own, too)
        self.process = TableProcess(self.table_id, self.workdir)

    @property
    def proc(self) -> subprocess.Popen[bytes] | None:
        return self.process.proc

    @property
    def alive(self) -> bool:
        return self.process.alive

    def write_config(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        text = DEMO_CONFIG.format(
            table=self.table_id,
            shuffler=self.workdir / "shuffler",
            rng=self.workdir / "rng",
            journal=self.journal,
        )
        display = (
            "\n[display]\nenabled = false\n"
            if self.display_port is None
            else f'\n[display]\nenabled = true\nhost = "127.0.0.1"\nport = {self.display_port}\n'
        )
        self.config_path.write_text(text + display + self.extra + FAST_LIMITS, encoding="utf-8")

    async def open_devices(self) -> None:
        self.shuffler = ShufflerSimulator(
            PtyPort(self.workdir / "shuffler"), seed=self.seed, interval=0.0, bias=self.bias
        )
        self.rng = RngSimulator(PtyPort(self.workdir / "rng"), seed=self.seed)
        await self.shuffler.port.open()
        await self.rng.port.open()

    async def start(self, timeout: float = 60.0) -> None:
        """Start the daemon and wait for READY=1 and its devices' greetings."""
        if not self.config_path.exists():
            self.write_config()
        if self.shuffler is None:
            await self.open_devices()
        assert self.shuffler is not None and self.rng is not None
        greeted = (self.shuffler.greetings, self.rng.greetings)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        await self.process.wait_ready(self.process.spawn(), timeout)
        while (self.shuffler.greetings, self.rng.greetings) <= greeted:
            if loop.time() > deadline:
                raise TimeoutError(f"{self.table_id}: the daemon did not open its devices")
            await asyncio.sleep(0.05)
        # Both greeted: the driver may still be reading its status; give it a moment.
        await asyncio.sleep(0.3)

    async def deal(self) -> None:
        assert self.shuffler is not None and self.rng is not None
        await self.rng.press()
        await self.shuffler.deal()
        self.dealt += 1

    def start_dealing(self, interval: float, rounds: int | None = None) -> None:
        async def loop() -> None:
            n = 0
            while rounds is None or n < rounds:
                if self.alive:
                    await self.deal()
                    n += 1
                await asyncio.sleep(interval)

        self._dealer = asyncio.create_task(loop(), name=f"dealer-{self.table_id}")

    async def stop_dealing(self) -> None:
        if self._dealer is not None:
            self._dealer.cancel()
            await asyncio.gather(self._dealer, return_exceptions=True)
            self._dealer = None

    async def stop(self, *, kill: bool = False, timeout: float = 30.0) -> int | None:
        return await (self.process.kill() if kill else self.process.stop(timeout))

    async def close(self) -> None:
        await self.stop_dealing()
        await self.stop()
        if self.shuffler is not None:
            await self.shuffler.close()
        if self.rng is not None:
            await self.rng.close()
        self.process.close()
