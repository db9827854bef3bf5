"""The USB HID dice reader: the USB transport reading the dice report codec (docs/rules.md §6).

A roll becomes ``PositionDrawn(method="dice", dice=(a, b, c), number=position)``; the position
is ((a + b + c − 1) mod 7) + 1 so the consumer need not recompute it, though it may.
"""

from __future__ import annotations

import usb.backend  # type: ignore[import-untyped]

from drivers.base import Backoff, EventSink
from drivers.codecs.dice_hid import (
    DEFAULT_PRODUCT_ID,
    DEFAULT_VENDOR_ID,
    ENDPOINT_IN,
    REPORT_SIZE,
    DiceHidCodec,
)
from drivers.usb import UsbTransport


class UsbDiceReader:
    """A ``Device`` (drivers.base): reads rolls from the dice reader until cancelled.

    Keyword arguments are the config's: ``vendor_id``/``product_id`` of the reader, its HID
    ``interface`` number, interrupt ``endpoint_in`` address, ``packet_size`` (the endpoint's
    wMaxPacketSize, one report per transfer), ``read_timeout_ms`` (how long one read waits; also
    bounds how long shutdown waits for a read in flight), ``backoff`` between reconnects, and
    ``backend`` for ``usb.core.find`` (None on a table).
    """

    def __init__(
        self,
        *,
        name: str = "dice",
        vendor_id: int = DEFAULT_VENDOR_ID,
        product_id: int = DEFAULT_PRODUCT_ID,
        interface: int = 0,
        endpoint_in: int = ENDPOINT_IN,
        packet_size: int = REPORT_SIZE,
        read_timeout_ms: int = 250,
        backoff: Backoff | None = None,
        backend: usb.backend.IBackend | None = None,
    ) -> None:
        self.name = name
        self.codec = DiceHidCodec(name)
        self.transport = UsbTransport(
            name=name,
            vendor_id=vendor_id,
            product_id=product_id,
            interface=interface,
            endpoint_in=endpoint_in,
            packet_size=packet_size,
            read_timeout_ms=read_timeout_ms,
            backoff=backoff,
            backend=backend,
        )

    async def run(self, sink: EventSink) -> None:
        await self.transport.run(sink, self.codec.decode)
