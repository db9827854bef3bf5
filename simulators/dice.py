"""The USB HID dice reader, device side: a simulated pyusb backend that reports dice rolls.

``DiceReaderSimulator`` speaks the report format of ``drivers.codecs.dice_hid`` through
``simulators.usb_backend.SimulatedHidBackend``; hand its ``backend`` to the driver
(``UsbDiceReader(backend=sim.backend)``) and the real pyusb code reads it. Rolls are seeded random
or given; faults: a repeated report, a misread, a hardware fault, raw bytes (bad checksum, short,
out-of-range die), unplug and replug.

``python -m simulators dice`` runs the real driver against it in this process and prints what the
driver reads: Enter rolls (or ``--interval``), ``a b c`` rolls those dice, ``u`` unplugs, ``p``
plugs back, ``q`` quits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import sys
from collections.abc import Sequence

from controller.logging import configure_logging
from drivers.base import Backoff
from drivers.codecs.dice_hid import (
    DEFAULT_PRODUCT_ID,
    DEFAULT_VENDOR_ID,
    ENDPOINT_IN,
    REPORT_DESCRIPTOR,
    REPORT_SIZE,
    STATUS_HW_FAULT,
    STATUS_IDLE,
    STATUS_MISREAD,
    encode_report,
    encode_roll,
)
from drivers.dice import UsbDiceReader
from drivers.events import DeviceEvent, PositionDrawn
from simulators.usb_backend import SimulatedHidBackend

Dice = tuple[int, int, int]


class DiceReaderSimulator:
    """A dice reader on a simulated USB bus. Thread-safe towards the host side (the backend)."""

    def __init__(
        self,
        *,
        seed: int | None = None,
        vendor_id: int = DEFAULT_VENDOR_ID,
        product_id: int = DEFAULT_PRODUCT_ID,
        endpoint_in: int = ENDPOINT_IN,
        max_packet_size: int = REPORT_SIZE,
    ) -> None:
        self.backend = SimulatedHidBackend(
            vendor_id=vendor_id,
            product_id=product_id,
            report_descriptor=REPORT_DESCRIPTOR,
            endpoint_in=endpoint_in,
            max_packet_size=max_packet_size,
            manufacturer="Paigow Table reference",
            product="Dice Reader (simulated)",
            serial_number="SIM-DICE-0001",
        )
        self._random = random.Random(seed)
        self.seq = 0
        self.last_report: bytes | None = None
        self._power_up()

    def _power_up(self) -> None:
        self.seq = 0
        self.backend.queue_report(encode_report(seq=0, status=STATUS_IDLE))

    def _next_seq(self) -> int:
        self.seq = self.seq % 255 + 1  # 1–255; 0 is the power-up status report's
        return self.seq

    def _send(self, report: bytes) -> bytes:
        self.last_report = report
        self.backend.queue_report(report)
        return report

    def roll(self, dice: Dice | None = None) -> Dice:
        """Roll three dice (random from the seed, or the given values) and report them."""
        if dice is None:
            a, b, c = (self._random.randint(1, 6) for _ in range(3))
            dice = (a, b, c)
        self._send(encode_roll(self._next_seq(), dice))
        return dice

    def repeat_last(self) -> None:
        """Send the last report again, as a device does after a glitch (same sequence number)."""
        if self.last_report is not None:
            self.backend.queue_report(self.last_report)

    def misread(self) -> None:
        self._send(encode_report(seq=self._next_seq(), status=STATUS_MISREAD))

    def hardware_fault(self, code: int = 0x01) -> None:
        self._send(encode_report(seq=self._next_seq(), status=STATUS_HW_FAULT, detail=code))

    def send_raw(self, report: bytes) -> None:
        """Queue any bytes as one report (a bad checksum, a short or long report, a bad die)."""
        self.backend.queue_report(report)

    def unplug(self) -> None:
        self.backend.unplug()

    def replug(self, *, power_cycle: bool = True) -> None:
        """Plug back in. A bus-powered reader lost power, so it starts again at sequence 0 and
        sends its power-up status report; ``power_cycle=False`` is a re-enumeration without
        power loss (hub reset) that keeps the sequence."""
        self.backend.plug()
        if power_cycle:
            self._power_up()


def _parse_dice(text: str) -> Dice | None:
    parts = text.replace(",", " ").split()
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    a, b, c = (int(p) for p in parts)
    return (a, b, c)


def _print_event(event: DeviceEvent) -> None:
    if isinstance(event, PositionDrawn) and event.dice is not None:
        a, b, c = event.dice
        line = f"read     dice {a} {b} {c}  sum {a + b + c:2d}  -> position {event.number}"
        print(line, flush=True)
    else:
        fields = event.model_dump(exclude={"device", "kind"})
        print(f"{event.kind:<16} {fields}", flush=True)


class _Console:
    """``python -m simulators dice``'s run: the simulator, the real driver reading it, and what
    the operator types (or the timer) driving it."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.sim = DiceReaderSimulator(seed=args.seed, vendor_id=args.vid, product_id=args.pid)
        self.reader = UsbDiceReader(
            name="dice",
            vendor_id=args.vid,
            product_id=args.pid,
            backend=self.sim.backend,
            backoff=Backoff(initial=0.1, cap=1.0),
        )
        self.events: asyncio.Queue[DeviceEvent] = asyncio.Queue()
        self.done = asyncio.Event()
        self.read = 0
        self.loop = asyncio.get_running_loop()
        self.stdin_fd = -1
        self.pending = b""

    def command(self, line: str) -> None:
        text = line.strip().lower()
        if text == "q":
            self.done.set()
        elif text == "u":
            self.sim.unplug()
            print("unplugged", flush=True)
        elif text == "p":
            self.sim.replug()
            print("plugged", flush=True)
        elif text and (dice := _parse_dice(text)) is not None:
            print(f"rolled   {self.sim.roll(dice)}", flush=True)
        elif not text:
            print(f"rolled   {self.sim.roll()}", flush=True)
        else:
            print(f"? {text!r}", flush=True)

    async def printer(self) -> None:
        while True:
            event = await self.events.get()
            _print_event(event)
            if isinstance(event, PositionDrawn):
                self.read += 1
                if self.args.count and self.read >= self.args.count:
                    self.done.set()

    async def timer(self) -> None:
        while True:
            await asyncio.sleep(self.args.interval)
            self.command("")

    def on_stdin(self) -> None:
        chunk = os.read(self.stdin_fd, 4096)
        if not chunk:
            self.loop.remove_reader(self.stdin_fd)
            if not self.args.interval:
                self.done.set()  # input closed and nothing else will roll
            return
        self.pending += chunk
        *lines, self.pending = self.pending.split(b"\n")
        for line in lines:
            self.command(line.decode(errors="replace"))

    def watch_stdin(self) -> bool:
        """Read commands from stdin when there is a usable one; True when watching it."""
        with contextlib.suppress(OSError, ValueError, AttributeError, NotImplementedError):
            self.stdin_fd = sys.stdin.fileno()  # no usable stdin (tests, daemons): rolls by timer
            self.loop.add_reader(self.stdin_fd, self.on_stdin)
            return True
        return False

    async def run_until_done(self) -> None:
        async with asyncio.TaskGroup() as tg:
            tasks = [
                tg.create_task(self.reader.run(self.events), name="dice.reader"),
                tg.create_task(self.printer(), name="dice.printer"),
            ]
            if self.args.interval:
                tasks.append(tg.create_task(self.timer(), name="dice.timer"))
            await self.done.wait()
            for task in tasks:
                task.cancel()


async def _run(args: argparse.Namespace) -> int:
    console = _Console(args)
    print(
        f"dice reader simulator {args.vid:04x}:{args.pid:04x}: Enter rolls, 'a b c' rolls those"
        " dice, u unplugs, p plugs back, q quits",
        flush=True,
    )
    watching_stdin = console.watch_stdin()
    try:
        await console.run_until_done()
    finally:
        if watching_stdin:
            console.loop.remove_reader(console.stdin_fd)
    return 0


def _int(text: str) -> int:
    return int(text, 0)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m simulators dice``: the driver reading a simulated dice reader; returns 0."""
    parser = argparse.ArgumentParser(
        prog="python -m simulators dice",
        description="A simulated USB dice reader read by the real driver.",
    )
    parser.add_argument("--seed", type=int, default=None, help="seed of the random rolls")
    parser.add_argument("--interval", type=float, default=0.0, help="roll every SECONDS too")
    parser.add_argument("--count", type=int, default=0, help="stop after COUNT positions read")
    parser.add_argument("--vid", type=_int, default=DEFAULT_VENDOR_ID, help="USB vendor id")
    parser.add_argument("--pid", type=_int, default=DEFAULT_PRODUCT_ID, help="USB product id")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the driver's log")
    args = parser.parse_args(argv)
    # The printed events say the rest; the driver's log goes to stderr (a whole configuration,
    # whatever was configured before in this process).
    configure_logging("DEBUG" if args.verbose else "WARNING", "console", stream=sys.stderr)
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
