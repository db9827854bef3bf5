"""The serial pole (customer) display: a ``DisplaySink`` that keeps showing the latest two lines.

``show`` never waits for the port: it records the text and wakes the writer. ``run`` (the
``Device`` side) opens the port with pyserial-asyncio-fast, initialises the display, writes the
latest text whenever it changes, and reopens the port with backoff when it goes away (then
redraws the latest text). Text that changes while a frame is still being written replaces the
waiting text, so a slow or stuck display gets the newest screen, never a backlog.

A display sends nothing back. Whatever does arrive on its line (noise, a wrong baud rate, the
wrong device on the port) is counted, not kept, and reported as ``FrameError(error="garbled")``
with the count in ``discarded``: one event per run of input (a pause of ``INPUT_QUIET`` s or
``INPUT_REPORT`` bytes ends a run), so no fault is silent and none costs memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Final

import serial  # type: ignore[import-untyped]
from serial_asyncio_fast import open_serial_connection

from drivers.base import Backoff, EventSink
from drivers.codecs.pole import INIT, PoleResult, display_lines, encode_frame, format_pole
from drivers.events import FrameError
from drivers.reconnect import Presence, keep_connected

__all__ = ["PoleResult", "SerialPoleDisplay", "format_pole"]


# reopening a missing port costs nothing: look for it again at least every two seconds
DEFAULT_BACKOFF = Backoff(initial=0.1, factor=2.0, cap=2.0)
INPUT_QUIET: Final = 0.25  # seconds without a byte from the display that end a run of input
INPUT_REPORT: Final = 4096  # bytes of input reported at once while it keeps coming
RAW_HEX_LIMIT: Final = 64  # bytes of input kept for the report

_PARITIES = {
    "N": serial.PARITY_NONE,
    "E": serial.PARITY_EVEN,
    "O": serial.PARITY_ODD,
    "M": serial.PARITY_MARK,
    "S": serial.PARITY_SPACE,
}


class SerialPoleDisplay:
    """A 2×20 ESC/POS pole display on a serial port. ``port`` is a device path or udev symlink,
    or any pyserial URL: ``socket://10.20.0.51:4001`` reaches a display behind a serial-device
    server over TCP.

    ``baudrate``/``bytesize``/``parity``/``stopbits`` are the display's line settings (9600 8N1
    is the usual factory setting); ``write_timeout`` is how long one frame may take to leave
    before the port is considered stuck and reopened; ``backoff`` spaces the reopen attempts.
    """

    def __init__(
        self,
        *,
        name: str = "pole",
        port: str,
        baudrate: int = 9600,
        bytesize: int = 8,
        parity: str = "N",
        stopbits: float = 1,
        write_timeout: float = 2.0,
        backoff: Backoff | None = None,
    ) -> None:
        if not port:
            raise ValueError("port: expected a device path such as /dev/paigow-pole")
        if parity not in _PARITIES:
            raise ValueError(f"parity: expected one of N E O M S, got {parity!r}")
        self.name = name
        self.port = port
        self.baudrate = baudrate
        self.bytesize = bytesize
        self.parity = parity
        self.stopbits = stopbits
        self.write_timeout = write_timeout
        self.backoff = backoff or DEFAULT_BACKOFF
        self._wanted: tuple[str, str] | None = None  # nothing to show yet: leave the screen clear
        self._changed = asyncio.Event()

    @property
    def lines(self) -> tuple[str, str] | None:
        """The two lines the display shows (or will, once the port is up)."""
        return self._wanted

    async def show(self, lines: Sequence[str]) -> None:
        """Show ``lines`` (two are used; each padded or cut to 20, non-ASCII substituted)."""
        wanted = display_lines(lines)
        if wanted != self._wanted:
            self._wanted = wanted
            self._changed.set()

    def describe(self) -> str:
        return f"serial {self.port} {self.baudrate} {self.bytesize}{self.parity}{self.stopbits:g}"

    async def run(self, sink: EventSink) -> None:
        """Keep the display showing the latest text until cancelled (drivers/reconnect.py): online
        once the display took a write, one offline report per outage."""
        presence = Presence(self.name, sink)

        async def open_port() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            return await open_serial_connection(
                url=self.port,
                baudrate=self.baudrate,
                bytesize=self.bytesize,
                parity=_PARITIES[self.parity],
                stopbits=self.stopbits,
                exclusive=True,  # one daemon per device, as drivers/serial.py
            )

        def noise(count: int, head: bytes) -> None:
            sink.put_nowait(
                FrameError(
                    device=self.name,
                    error="garbled",
                    detail=f"{count} bytes from the display, which sends nothing",
                    raw_hex=head.hex(),
                    discarded=count,
                )
            )

        async def session(link: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> str:
            return await self._serve(
                *link, proven=lambda: presence.up(self.describe()), noise=noise
            )

        async def close(link: tuple[asyncio.StreamReader, asyncio.StreamWriter]) -> None:
            writer = link[1]
            writer.transport.abort()  # close() would first wait for a stuck port to drain
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), self.write_timeout)

        await keep_connected(
            presence,
            self.backoff,
            open_link=open_port,
            session=session,
            close_link=close,
            # SerialException (OSError inside): absent, busy, refused
            cannot_open=lambda exc: f"{type(exc).__name__}: {exc}",
        )

    async def _serve(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        proven: Callable[[], None],
        noise: Callable[[int, bytes], None] = lambda count, head: None,
    ) -> str:
        """Write frames until the port fails; return why. ``proven`` is called after each write
        the display took; ``noise`` with what the display sent (module doc)."""
        lost = asyncio.create_task(_until_lost(reader, noise), name=f"pole[{self.name}].input")
        try:
            self._changed.clear()
            frame = INIT + (encode_frame(self._wanted) if self._wanted is not None else b"")
            while True:
                writer.write(frame)
                try:
                    await asyncio.wait_for(writer.drain(), self.write_timeout)
                except TimeoutError:
                    return f"display not taking data for {self.write_timeout:g} s"
                except Exception as exc:
                    return f"{type(exc).__name__}: {exc}"
                proven()
                changed = asyncio.create_task(self._changed.wait())
                try:
                    await asyncio.wait({changed, lost}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    await _cancelled(changed)
                if lost.done():
                    return lost.result()
                self._changed.clear()
                frame = encode_frame(self._wanted) if self._wanted is not None else b""
        finally:
            await _cancelled(lost)


async def _cancelled(task: asyncio.Task[object]) -> None:
    """Cancel ``task`` (if it still runs) and let it finish."""
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise  # we are being cancelled ourselves: do not swallow it


async def _until_lost(reader: asyncio.StreamReader, noise: Callable[[int, bytes], None]) -> str:
    """Read whatever the display sends until the port closes; say why it closed. What arrives
    is counted and handed to ``noise`` once per run of input (module doc), never kept."""
    count = 0
    head = bytearray()

    def report() -> None:
        nonlocal count
        if count:
            noise(count, bytes(head))
            count = 0
            head.clear()

    try:
        while True:
            quiet = asyncio.timeout(INPUT_QUIET if count else None)
            try:
                async with quiet:
                    data = await reader.read(256)
            except TimeoutError:
                if not quiet.expired():
                    raise  # the port's own (ETIMEDOUT): the link is gone
                report()  # the run of input is over
                continue
            if not data:
                return "port closed"
            count += len(data)
            head += data[: RAW_HEX_LIMIT - len(head)]
            if count >= INPUT_REPORT:
                report()
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        report()  # also when the port went or the driver stops: no byte goes unreported
