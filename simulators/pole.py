"""A 2×20 ESC/POS pole display on a pty: decodes what the host writes and shows the two lines.

``PoleDisplaySimulator`` holds the device end of a pty (``simulators.pty.PtyPort``); the pole
driver opens ``sim.path``. Every byte goes through ``drivers.codecs.pole.PoleScreen``, so
``sim.lines`` is exactly what a display would show and ``sim.screen.errors`` counts bytes a
display would not understand. ``unplug``/``replug`` pull the cable (the display loses power
and comes back blank).

``python -m simulators pole [--pty] [--link PATH]`` prints the pty path on the first line, then
draws the screen each time it changes, until interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Sequence

from controller.logging import configure_logging
from drivers.codecs.pole import WIDTH, PoleScreen
from simulators.pty import PtyPort

Lines = tuple[str, str]


class PoleDisplaySimulator:
    """The display end of the line. Use as ``async with PoleDisplaySimulator() as sim``."""

    def __init__(self, *, link: str | os.PathLike[str] | None = None) -> None:
        self.port = PtyPort(link)
        self.screen = PoleScreen()
        self.received = bytearray()
        self.history: list[Lines] = []  # each distinct screen, in order
        self._updated = asyncio.Event()
        self._on_change: Callable[[Lines], None] | None = None
        self.port.set_receiver(self._from_host)

    async def __aenter__(self) -> PoleDisplaySimulator:
        await self.port.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.port.close()

    @property
    def path(self) -> str:
        return self.port.path

    @property
    def lines(self) -> Lines:
        return self.screen.lines

    def on_change(self, callback: Callable[[Lines], None]) -> None:
        self._on_change = callback

    def _from_host(self, data: bytes) -> None:
        before = self.screen.lines
        self.received += data
        self.screen.feed(data)
        if self.screen.lines != before:
            self.history.append(self.screen.lines)
            if self._on_change is not None:
                self._on_change(self.screen.lines)
        self._updated.set()

    async def wait_for(self, predicate: Callable[[Lines], bool], timeout: float = 2.0) -> Lines:
        """Wait until the screen satisfies ``predicate``; TimeoutError after ``timeout`` s."""
        async with asyncio.timeout(timeout):
            while not predicate(self.screen.lines):
                self._updated.clear()
                await self._updated.wait()
        return self.screen.lines

    async def wait_for_lines(self, lines: Sequence[str], timeout: float = 2.0) -> Lines:
        """Wait until the screen shows exactly ``lines`` (each padded to 20)."""
        want = (lines[0].ljust(WIDTH), lines[1].ljust(WIDTH))
        return await self.wait_for(lambda shown: shown == want, timeout)

    async def unplug(self) -> None:
        await self.port.unplug()

    async def replug(self) -> None:
        self.screen = PoleScreen()  # powered up again: blank
        await self.port.replug()


def render(lines: Lines) -> str:
    """The screen as a framed 2×20 box."""
    edge = "+" + "-" * WIDTH + "+"
    return "\n".join((edge, f"|{lines[0]}|", f"|{lines[1]}|", edge))


async def _serve(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signum, stop.set)
    async with PoleDisplaySimulator(link=args.link) as sim:
        print(sim.path, flush=True)
        print(f"pole display on {sim.port.describe()}", file=sys.stderr, flush=True)
        shown: list[asyncio.TimerHandle] = []

        def draw() -> None:
            shown.clear()
            print(render(sim.lines), flush=True)

        def changed(_: Lines) -> None:
            # a frame may arrive in pieces: draw once the bytes stop for a moment
            for handle in shown:
                handle.cancel()
            shown[:] = [loop.call_later(0.05, draw)]

        sim.on_change(changed)
        await stop.wait()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulators pole``: a pole display on a pty; prints its path, then screens."""
    parser = argparse.ArgumentParser(
        prog="python -m simulators pole",
        description="A 2x20 ESC/POS pole display on a pty, printing what it shows.",
    )
    parser.add_argument("--pty", action="store_true", help="open a pty (the default)")
    parser.add_argument("--link", metavar="PATH", help="keep a symlink to the pty at PATH")
    args = parser.parse_args(argv)
    configure_logging("INFO", "console", stream=sys.stderr)  # stdout: the screens
    try:
        return asyncio.run(_serve(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
