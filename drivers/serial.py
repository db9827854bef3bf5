"""Asyncio serial transport (pyserial + pyserial-asyncio-fast).

The port is a path opened afresh on every (re)connect, so it may be a udev symlink such as
``/dev/paigow-shuffler`` that moves to a new ttyUSB when the cable is plugged back in. The port
is opened in an executor thread (pyserial-asyncio-fast does that), never on the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Final

import serial  # type: ignore[import-untyped]
import serial_asyncio_fast

from drivers.stream import Link, ProtocolLink, QueueProtocol

BYTESIZES: Final = (5, 6, 7, 8)
PARITIES: Final = {
    "N": serial.PARITY_NONE,
    "E": serial.PARITY_EVEN,
    "O": serial.PARITY_ODD,
    "M": serial.PARITY_MARK,
    "S": serial.PARITY_SPACE,
}
STOPBITS: Final = (1, 1.5, 2)


class SerialTransport:
    """A serial port at ``port`` (a device path or a symlink to one), 38400 8N1 by default."""

    def __init__(
        self,
        port: str,
        *,
        baudrate: int = 38400,
        bytesize: int = 8,
        parity: str = "N",
        stopbits: float = 1,
    ) -> None:
        if not port:
            raise ValueError("port: expected a device path such as /dev/paigow-shuffler")
        if not isinstance(baudrate, int) or baudrate <= 0:
            raise ValueError(f"baudrate: expected a positive integer, got {baudrate!r}")
        if bytesize not in BYTESIZES:
            raise ValueError(f"bytesize: expected one of {BYTESIZES}, got {bytesize!r}")
        parity_key = parity.upper()[:1] if isinstance(parity, str) else ""
        if parity_key not in PARITIES:
            raise ValueError(f"parity: expected one of N E O M S, got {parity!r}")
        if stopbits not in STOPBITS:
            raise ValueError(f"stopbits: expected one of {STOPBITS}, got {stopbits!r}")
        self.port = port
        self.baudrate = baudrate
        self.bytesize = bytesize
        self.parity = parity_key
        self.stopbits = stopbits

    def describe(self) -> str:
        return f"serial {self.port} {self.baudrate} {self.bytesize}{self.parity}{self.stopbits:g}"

    async def open(self) -> Link:
        loop = asyncio.get_running_loop()
        protocol = QueueProtocol()
        transport, _ = await serial_asyncio_fast.create_serial_connection(
            loop,
            lambda: protocol,
            self.port,
            baudrate=self.baudrate,
            bytesize=self.bytesize,
            parity=PARITIES[self.parity],
            stopbits=self.stopbits,
            # One daemon per device: a second process opening the port is refused (flock), not
            # handed every other frame (docs/operations.md §4).
            exclusive=True,
        )
        return ProtocolLink(transport, protocol)
