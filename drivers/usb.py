"""USB transport on pyusb: find the device, claim its interface, read its IN endpoint, reconnect.

Every pyusb call blocks (libusb does synchronous transfers), so each one runs in a worker thread
through ``asyncio.to_thread``; the event loop never waits on USB. One lock serialises the calls on
a device, so closing it waits for the read in flight (at most ``read_timeout_ms``) instead of
pulling the handle from under it.

``backend`` is handed to ``usb.core.find``: None on a table (pyusb picks libusb), a simulated
``usb.backend.IBackend`` in tests and in ``python -m simulators dice``.
"""

from __future__ import annotations

import asyncio
import errno
import threading
from collections.abc import Callable, Iterable
from typing import Any

import structlog
import usb.backend  # type: ignore[import-untyped]
import usb.core  # type: ignore[import-untyped]
import usb.util  # type: ignore[import-untyped]

from drivers.base import Backoff, EventSink
from drivers.events import DeviceEvent, FrameError
from drivers.reconnect import Presence, keep_connected

ReportHandler = Callable[[bytes], Iterable[DeviceEvent]]

# a replugged reader is found again within about a second, however long it was away
DEFAULT_BACKOFF = Backoff(initial=0.1, factor=2.0, cap=1.0)

_log = structlog.get_logger(__name__)


class UsbUnavailable(Exception):
    """The device is not on the bus, or is not the device the config describes."""


class UsbTransport:
    """Reads one IN endpoint of the USB device ``vendor_id:product_id`` for ever.

    ``run`` connects, hands each transfer's bytes to ``on_report`` and puts the events it returns
    on the sink; when the device goes away (unplug: ``USBError``, or not found) it reports
    ``DeviceOffline`` once, retries with capped exponential backoff, and reports ``DeviceOnline``
    when it is back. Only ``CancelledError`` leaves ``run``.
    """

    def __init__(
        self,
        *,
        name: str,
        vendor_id: int,
        product_id: int,
        interface: int = 0,
        endpoint_in: int = 0x81,
        packet_size: int = 8,
        read_timeout_ms: int = 250,
        backoff: Backoff | None = None,
        backend: usb.backend.IBackend | None = None,
    ) -> None:
        if not 0 <= vendor_id <= 0xFFFF or not 0 <= product_id <= 0xFFFF:
            raise ValueError("vendor_id and product_id are 16-bit numbers")
        if not endpoint_in & 0x80:
            raise ValueError(f"endpoint_in 0x{endpoint_in:02x} is not an IN endpoint (bit 7 clear)")
        if packet_size < 1 or read_timeout_ms < 1:
            raise ValueError("packet_size and read_timeout_ms must be positive")
        self.name = name
        self.vendor_id = vendor_id
        self.product_id = product_id
        self.interface = interface
        self.endpoint_in = endpoint_in
        self.packet_size = packet_size
        self.read_timeout_ms = read_timeout_ms
        self.backoff = backoff or DEFAULT_BACKOFF
        self.backend = backend
        self._io_lock = threading.Lock()

    @property
    def usb_id(self) -> str:
        return f"{self.vendor_id:04x}:{self.product_id:04x}"

    async def run(self, sink: EventSink, on_report: ReportHandler) -> None:
        """Open the reader, pump its reports, reopen after a failure (drivers/reconnect.py): online
        once the device is opened, one offline report per outage."""
        presence = Presence(self.name, sink)

        async def session(dev: Any) -> str:
            presence.up(f"usb {self.usb_id} bus {dev.bus} address {dev.address}")
            return await self._pump(dev, sink, on_report)

        async def close(dev: Any) -> None:
            await asyncio.to_thread(self._close, dev)

        await keep_connected(
            presence,
            self.backoff,
            open_link=self._open_in_thread,
            session=session,
            close_link=close,
            cannot_open=_reason,
        )

    async def _open_in_thread(self) -> Any:
        opening = asyncio.ensure_future(asyncio.to_thread(self._open))
        try:
            return await asyncio.shield(opening)
        except asyncio.CancelledError:
            opening.add_done_callback(self._release_abandoned)  # the thread may still claim it
            raise

    def _release_abandoned(self, opening: asyncio.Future[Any]) -> None:
        if not opening.cancelled() and opening.exception() is None:
            threading.Thread(
                target=self._close, args=(opening.result(),), name=f"usb[{self.name}].release"
            ).start()

    async def _pump(self, dev: Any, sink: EventSink, on_report: ReportHandler) -> str:
        """Read until the device fails; return why."""
        while True:
            try:
                data = await asyncio.to_thread(self._read, dev)
            except usb.core.USBError as exc:
                if exc.errno == errno.EOVERFLOW:  # a report longer than the transfer: skip it
                    sink.put_nowait(
                        FrameError(
                            device=self.name,
                            error="oversize",
                            detail=f"report longer than {self.packet_size} bytes (USB overflow)",
                        )
                    )
                    continue
                return _reason(exc)
            except Exception as exc:  # a backend bug must not end the driver: reconnect instead
                _log.exception("usb_read_error", device=self.name)
                return _reason(exc)
            if data is not None:
                for event in on_report(data):
                    sink.put_nowait(event)

    def _open(self) -> Any:
        """Find, configure and claim the device (blocking: runs in a worker thread)."""
        with self._io_lock:
            dev = usb.core.find(
                idVendor=self.vendor_id, idProduct=self.product_id, backend=self.backend
            )
            if dev is None:
                raise UsbUnavailable(f"device {self.usb_id} not found")
            try:
                self._claim(dev)
            except BaseException:
                self._dispose(dev)
                raise
            return dev

    def _claim(self, dev: Any) -> None:
        try:
            if dev.is_kernel_driver_active(self.interface):
                dev.detach_kernel_driver(self.interface)  # usbhid binds HID devices on Linux
        except (NotImplementedError, usb.core.USBError):
            pass  # backends without kernel drivers, or nothing to detach
        dev.set_configuration()
        intf = usb.util.find_descriptor(
            dev.get_active_configuration(), bInterfaceNumber=self.interface
        )
        if intf is None:
            raise UsbUnavailable(f"device {self.usb_id} has no interface {self.interface}")
        ep = usb.util.find_descriptor(intf, bEndpointAddress=self.endpoint_in)
        if ep is None:
            where = f"interface {self.interface} of {self.usb_id}"
            raise UsbUnavailable(f"{where} has no endpoint 0x{self.endpoint_in:02x}")
        usb.util.claim_interface(dev, self.interface)

    def _read(self, dev: Any) -> bytes | None:
        """One transfer from the IN endpoint; None when nothing came within the read timeout."""
        with self._io_lock:
            try:
                data = dev.read(self.endpoint_in, self.packet_size, timeout=self.read_timeout_ms)
            except usb.core.USBTimeoutError:
                return None
            return bytes(data)

    def _close(self, dev: Any) -> None:
        with self._io_lock:
            self._dispose(dev)

    def _dispose(self, dev: Any) -> None:
        try:
            usb.util.dispose_resources(dev)
        except Exception:  # the device may already be gone; nothing more to release
            _log.debug("usb_dispose_failed", device=self.name, exc_info=True)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, usb.core.NoBackendError):
        return "no USB backend (is libusb installed?)"
    if isinstance(exc, usb.core.USBError) and exc.errno == errno.ENODEV:
        return f"unplugged: {exc.strerror}"
    return f"{type(exc).__name__}: {exc}"
