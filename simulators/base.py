"""What the reference-protocol simulators share: the port they write to, framing with sequence
numbers, answering the host's STATUS_REQUEST, playing line faults, and the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import random
import sys
from collections.abc import Awaitable, Callable
from typing import Protocol, Self

import structlog

from controller.logging import configure_logging
from drivers.framing import (
    DeviceState,
    FaultCode,
    FrameDecoder,
    FrameEncoder,
    Message,
    MsgType,
    msg_fault,
    msg_status,
)
from simulators.faults import FAULTS, Fault, corrupt, line_noise, parse_faults
from simulators.pty import PtyPort
from simulators.tcp import TcpServerPort

_log = structlog.get_logger(__name__)

HOST_WAIT = 5.0


class Port(Protocol):
    """The device's end of the line: a pty or a TCP server."""

    @property
    def path(self) -> str: ...

    def describe(self) -> str: ...

    def set_receiver(self, receiver: Callable[[bytes], None]) -> None: ...

    async def open(self) -> None: ...

    async def write(self, data: bytes) -> bool: ...

    async def unplug(self) -> None: ...

    async def replug(self) -> None: ...

    async def close(self) -> None: ...


class DeviceSimulator:
    """The device side of the reference protocol over ``port`` (a new pty if none is given).

    ``seed`` makes the shuffles (and the line noise) repeatable. ``interval`` is the pause
    between frames of a deal, as a real device paces them (0 in tests). Use it as an async
    context manager, which opens and closes the port.
    """

    def __init__(
        self, port: Port | None = None, *, seed: int | None = None, interval: float = 0.0
    ) -> None:
        self.port: Port = port if port is not None else PtyPort()
        self.seed = seed
        self.rng = random.Random(seed)
        self.interval = interval
        self.encoder = FrameEncoder()
        self.state = DeviceState.IDLE
        self.faults: frozenset[FaultCode] = frozenset()
        self.greetings = 0
        self._decoder = FrameDecoder()
        self._greeted = asyncio.Event()
        self._tasks: set[asyncio.Task[bool]] = set()
        self.port.set_receiver(self._from_host)

    async def __aenter__(self) -> Self:
        await self.port.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.port.close()

    def _from_host(self, data: bytes) -> None:
        for item in self._decoder.feed(data):
            if getattr(item, "type", None) == MsgType.STATUS_REQUEST:
                self.greetings += 1
                self._greeted.set()
                task = asyncio.get_running_loop().create_task(
                    self.send(msg_status(self.state, self.faults))
                )
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def wait_for_host(self, timeout: float = HOST_WAIT) -> bool:
        """Wait until the host greets (a STATUS_REQUEST arrives); False after ``timeout``."""
        try:
            async with asyncio.timeout(timeout):
                await self._greeted.wait()
        except TimeoutError:
            return False
        finally:
            self._greeted.clear()
        return True

    async def send(self, message: Message) -> bool:
        """Frame and write one message; False if nothing is connected to hear it."""
        return await self.port.write(self.encoder.encode(*message))

    async def fault(self, code: FaultCode, detail: str = "") -> None:
        """Report a fault (FAULT), and keep it in STATUS until ``clear_faults``."""
        self.faults = self.faults | {code}
        await self.send(msg_fault(code, detail))

    def clear_faults(self) -> None:
        self.faults = frozenset()

    async def play(self, messages: list[Message], fault_at: int, faults: frozenset[Fault]) -> bool:
        """Send ``messages`` with the line faults applied at message ``fault_at``.

        Returns False when the play stopped early (silence_mid_deal). With unplug_replug the
        messages from ``fault_at`` on go nowhere, then the port comes back and this waits (up
        to HOST_WAIT s) for the host to reconnect.
        """
        unplugged = False
        for i, message in enumerate(messages):
            if i == fault_at:
                if Fault.SILENCE_MID_DEAL in faults:
                    return False
                if Fault.UNPLUG_REPLUG in faults:
                    await self.port.unplug()
                    unplugged = True
                if Fault.GARBLED_BYTES in faults and not unplugged:
                    await self.port.write(line_noise(self.rng))
            frame = self.encoder.encode(*message)
            if i == fault_at and Fault.CHECKSUM_ERROR in faults:
                frame = corrupt(frame)
            if not unplugged:
                await self.port.write(frame)
            if self.interval:
                await asyncio.sleep(self.interval)
        if unplugged:
            self._greeted.clear()
            await self.port.replug()
            await self.wait_for_host()
        return True


SimAction = Callable[[DeviceSimulator, frozenset[Fault]], Awaitable[object]]


def cli(
    prog: str,
    argv: list[str],
    make: Callable[[Port, int | None, float], DeviceSimulator],
    action: SimAction,
    what: str,
) -> int:
    """The command line every simulator shares (``python -m simulators <device> --help``)."""
    parser = argparse.ArgumentParser(
        prog=f"python -m simulators {prog}",
        description=f"Reference {prog} simulator: {what} on a pty or a TCP port.",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--pty", action="store_true", help="open a pty (the default)")
    where.add_argument("--tcp", metavar="[HOST:]PORT", help="listen on TCP, like ser2net")
    parser.add_argument("--link", metavar="PATH", help="keep a symlink to the pty at PATH")
    parser.add_argument("--seed", type=int, help="seed the shuffles")
    parser.add_argument(
        "--every", type=float, metavar="SECONDS", help="act on a timer (default: on Enter)"
    )
    parser.add_argument("--interval", type=float, default=0.2, help="pause between frames")
    parser.add_argument("--faults", default="", help=f"comma-separated: {', '.join(FAULTS)}")
    args = parser.parse_args(argv)
    # stdout carries only the path to point the daemon at
    configure_logging("INFO", "console", stream=sys.stderr)
    try:
        faults = parse_faults(args.faults)
    except ValueError as exc:
        parser.error(str(exc))
    port: Port
    if args.tcp:
        host, _, port_text = args.tcp.rpartition(":")
        port = TcpServerPort(host or "127.0.0.1", int(port_text))
    else:
        port = PtyPort(args.link)
    sim = make(port, args.seed, args.interval)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(sim, action, faults, args.every))
    return 0


async def _serve(
    sim: DeviceSimulator, action: SimAction, faults: frozenset[Fault], every: float | None
) -> None:
    async with sim:
        print(sim.port.path, flush=True)
        how = f"every {every:g} s" if every else "on Enter (or type fault names, q to quit)"
        print(f"{sim.port.describe()}: acting {how}", file=sys.stderr, flush=True)
        lines: asyncio.Queue[str | None] = asyncio.Queue()
        loop = asyncio.get_running_loop()

        def readable() -> None:
            line = sys.stdin.readline()
            if not line:
                loop.remove_reader(sys.stdin.fileno())
            lines.put_nowait(line or None)

        if not every:
            loop.add_reader(sys.stdin.fileno(), readable)
        while True:
            chosen = faults
            if every:
                await asyncio.sleep(every)
            else:
                line = await lines.get()
                if line is None:
                    await asyncio.Event().wait()
                    return
                text = line.strip()
                if text in ("q", "quit", "exit"):
                    return
                try:
                    chosen = parse_faults(text) if text else faults
                except ValueError as exc:
                    print(exc, file=sys.stderr, flush=True)
                    continue
            try:
                result = await action(sim, chosen)
            except Exception:
                _log.exception("simulator_action_failed")
                continue
            print(f"{result}", file=sys.stderr, flush=True)
