"""A simulated pyusb backend: one full-speed HID device with an interrupt IN endpoint.

It subclasses ``usb.backend.IBackend``, so the real pyusb code runs against it unchanged:
``usb.core.find(idVendor=…, idProduct=…, backend=…)``, ``set_configuration``, interface claiming,
``Device.read`` on the endpoint, string and HID report descriptors over control transfers. The
device side queues input reports (``queue_report``); each interrupt read delivers one.

``unplug`` makes the device vanish as libusb would show it: ``find`` returns None, and every call
on a handle opened before raises ``USBError`` with errno 19 (ENODEV), including a read that is
waiting. ``plug`` brings it back at a new bus address; handles from before stay dead. All methods
are thread-safe (pyusb calls run in worker threads).
"""

from __future__ import annotations

import array
import errno
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import usb.backend  # type: ignore[import-untyped]
import usb.core  # type: ignore[import-untyped]

LIBUSB_ERROR_NOT_FOUND = -5
LIBUSB_ERROR_NO_DEVICE = -4
LIBUSB_ERROR_TIMEOUT = -7
LIBUSB_ERROR_OVERFLOW = -8
LIBUSB_ERROR_PIPE = -9
LIBUSB_ERROR_INVALID_PARAM = -2

HID_CLASS = 0x03
DESC_HID = 0x21
DESC_HID_REPORT = 0x22


@dataclass(frozen=True, slots=True)
class DeviceDescriptor:
    idVendor: int
    idProduct: int
    bcdDevice: int = 0x0100
    bLength: int = 18
    bDescriptorType: int = 0x01
    bcdUSB: int = 0x0200
    bDeviceClass: int = 0  # class given per interface (HID)
    bDeviceSubClass: int = 0
    bDeviceProtocol: int = 0
    bMaxPacketSize0: int = 8
    iManufacturer: int = 1
    iProduct: int = 2
    iSerialNumber: int = 3
    bNumConfigurations: int = 1
    bus: int = 1
    address: int = 1
    port_number: int = 1
    port_numbers: tuple[int, ...] = (1,)
    speed: int = 2  # usb.util.SPEED_FULL

    def to_bytes(self) -> bytes:
        return struct.pack(
            "<BBHBBBBHHHBBBB",
            self.bLength,
            self.bDescriptorType,
            self.bcdUSB,
            self.bDeviceClass,
            self.bDeviceSubClass,
            self.bDeviceProtocol,
            self.bMaxPacketSize0,
            self.idVendor,
            self.idProduct,
            self.bcdDevice,
            self.iManufacturer,
            self.iProduct,
            self.iSerialNumber,
            self.bNumConfigurations,
        )


@dataclass(frozen=True, slots=True)
class EndpointDescriptor:
    bEndpointAddress: int = 0x81
    bmAttributes: int = 0x03  # interrupt
    wMaxPacketSize: int = 8
    bInterval: int = 10  # ms at full speed
    bLength: int = 7
    bDescriptorType: int = 0x05
    bRefresh: int = 0
    bSynchAddress: int = 0
    extra_descriptors: bytes = b""

    def to_bytes(self) -> bytes:
        return struct.pack(
            "<BBBBHB",
            self.bLength,
            self.bDescriptorType,
            self.bEndpointAddress,
            self.bmAttributes,
            self.wMaxPacketSize,
            self.bInterval,
        )


@dataclass(frozen=True, slots=True)
class InterfaceDescriptor:
    extra_descriptors: bytes  # the HID class descriptor
    bInterfaceNumber: int = 0
    bAlternateSetting: int = 0
    bNumEndpoints: int = 1
    bInterfaceClass: int = HID_CLASS
    bInterfaceSubClass: int = 0  # no boot protocol
    bInterfaceProtocol: int = 0
    iInterface: int = 0
    bLength: int = 9
    bDescriptorType: int = 0x04

    def to_bytes(self) -> bytes:
        return (
            struct.pack(
                "<BBBBBBBBB",
                self.bLength,
                self.bDescriptorType,
                self.bInterfaceNumber,
                self.bAlternateSetting,
                self.bNumEndpoints,
                self.bInterfaceClass,
                self.bInterfaceSubClass,
                self.bInterfaceProtocol,
                self.iInterface,
            )
            + self.extra_descriptors
        )


@dataclass(frozen=True, slots=True)
class ConfigurationDescriptor:
    wTotalLength: int
    bConfigurationValue: int = 1
    bNumInterfaces: int = 1
    iConfiguration: int = 0
    bmAttributes: int = 0x80  # bus powered, no remote wake-up
    bMaxPower: int = 50  # 2 mA units: 100 mA
    bLength: int = 9
    bDescriptorType: int = 0x02
    extra_descriptors: bytes = b""

    def to_bytes(self) -> bytes:
        return struct.pack(
            "<BBHBBBBB",
            self.bLength,
            self.bDescriptorType,
            self.wTotalLength,
            self.bNumInterfaces,
            self.bConfigurationValue,
            self.iConfiguration,
            self.bmAttributes,
            self.bMaxPower,
        )


def hid_class_descriptor(report_descriptor_length: int) -> bytes:
    """The 9-byte HID descriptor: HID 1.11, no country, one report descriptor."""
    length = report_descriptor_length
    return struct.pack("<BBHBBBH", 9, DESC_HID, 0x0111, 0, 1, DESC_HID_REPORT, length)


@dataclass(frozen=True, slots=True)
class _DeviceId:
    generation: int


@dataclass(slots=True)
class _Handle:
    generation: int
    configuration: int = 0
    claimed: set[int] = field(default_factory=set)


def _no_device() -> usb.core.USBError:
    return usb.core.USBError(
        "No such device (it may have been disconnected)", LIBUSB_ERROR_NO_DEVICE, errno.ENODEV
    )


class SimulatedHidBackend(usb.backend.IBackend):  # type: ignore[misc]
    """One simulated HID device with a single configuration, interface 0 and one IN endpoint."""

    def __init__(
        self,
        *,
        vendor_id: int,
        product_id: int,
        report_descriptor: bytes,
        endpoint_in: int = 0x81,
        max_packet_size: int = 8,
        interval_ms: int = 10,
        manufacturer: str = "",
        product: str = "",
        serial_number: str = "",
        bcd_device: int = 0x0100,
    ) -> None:
        super().__init__()
        self.report_descriptor = report_descriptor
        self.endpoint = EndpointDescriptor(
            bEndpointAddress=endpoint_in, wMaxPacketSize=max_packet_size, bInterval=interval_ms
        )
        self.interface = InterfaceDescriptor(
            extra_descriptors=hid_class_descriptor(len(report_descriptor))
        )
        total = 9 + len(self.interface.to_bytes()) + len(self.endpoint.to_bytes())
        self.configuration = ConfigurationDescriptor(wTotalLength=total)
        self._device = DeviceDescriptor(
            idVendor=vendor_id, idProduct=product_id, bcdDevice=bcd_device
        )
        self._strings = {1: manufacturer, 2: product, 3: serial_number}
        self._cond = threading.Condition()
        self._reports: deque[bytes] = deque()
        self._plugged = True
        self._generation = 0
        self._waiting = 0
        self.reads = 0  # interrupt transfers that delivered a report (for tests and the demo)

    # -- the device side ------------------------------------------------------------------------

    @property
    def plugged(self) -> bool:
        with self._cond:
            return self._plugged

    def queue_report(self, report: bytes) -> None:
        """The device has an input report for the host (dropped while unplugged: no power)."""
        with self._cond:
            if self._plugged:
                self._reports.append(bytes(report))
                self._cond.notify_all()

    def wait_for_reader(self, timeout: float) -> bool:
        """Wait until a host read is waiting on the endpoint (tests: unplug during a read)."""
        with self._cond:
            return self._cond.wait_for(lambda: self._waiting > 0, timeout)

    def pending_reports(self) -> int:
        with self._cond:
            return len(self._reports)

    def unplug(self) -> None:
        """Pull the cable: the device vanishes, open handles die, queued reports are lost."""
        with self._cond:
            self._plugged = False
            self._generation += 1
            self._reports.clear()
            self._cond.notify_all()

    def plug(self) -> None:
        """Plug it back in; it enumerates at the next bus address."""
        with self._cond:
            if self._plugged:
                return
            self._plugged = True
            self._generation += 1
            self._cond.notify_all()

    def _descriptor_now(self) -> DeviceDescriptor:
        address = self._generation // 2 % 126 + 1
        return DeviceDescriptor(
            idVendor=self._device.idVendor,
            idProduct=self._device.idProduct,
            bcdDevice=self._device.bcdDevice,
            address=address,
        )

    def _check(self, generation: int) -> None:
        if not self._plugged or generation != self._generation:
            raise _no_device()

    def configuration_bytes(self) -> bytes:
        """The whole configuration descriptor as GET_DESCRIPTOR(CONFIGURATION) returns it."""
        return self.configuration.to_bytes() + self.interface.to_bytes() + self.endpoint.to_bytes()

    # -- usb.backend.IBackend -------------------------------------------------------------------

    def enumerate_devices(self) -> list[_DeviceId]:
        with self._cond:
            return [_DeviceId(self._generation)] if self._plugged else []

    def get_parent(self, dev: _DeviceId) -> None:
        return None

    def get_device_descriptor(self, dev: _DeviceId) -> DeviceDescriptor:
        with self._cond:
            return self._descriptor_now()

    def get_configuration_descriptor(self, dev: _DeviceId, config: int) -> ConfigurationDescriptor:
        if config != 0:
            raise IndexError("configuration index out of range")
        return self.configuration

    def get_interface_descriptor(
        self, dev: _DeviceId, intf: int, alt: int, config: int
    ) -> InterfaceDescriptor:
        if config != 0 or intf != 0 or alt != 0:
            raise IndexError("interface index out of range")
        return self.interface

    def get_endpoint_descriptor(
        self, dev: _DeviceId, ep: int, intf: int, alt: int, config: int
    ) -> EndpointDescriptor:
        if config != 0 or intf != 0 or alt != 0 or ep != 0:
            raise IndexError("endpoint index out of range")
        return self.endpoint

    def open_device(self, dev: _DeviceId) -> _Handle:
        with self._cond:
            self._check(dev.generation)
            return _Handle(dev.generation)

    def close_device(self, dev_handle: _Handle) -> None:
        dev_handle.claimed.clear()

    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:
        with self._cond:
            self._check(dev_handle.generation)
            if config_value not in (0, self.configuration.bConfigurationValue):
                raise usb.core.USBError("Entity not found", LIBUSB_ERROR_NOT_FOUND, errno.ENOENT)
            dev_handle.configuration = config_value

    def get_configuration(self, dev_handle: _Handle) -> int:
        with self._cond:
            self._check(dev_handle.generation)
            return dev_handle.configuration

    def set_interface_altsetting(self, dev_handle: _Handle, intf: int, altsetting: int) -> None:
        with self._cond:
            self._check(dev_handle.generation)
            if intf != 0 or altsetting != 0:
                raise usb.core.USBError("Entity not found", LIBUSB_ERROR_NOT_FOUND, errno.ENOENT)

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:
        with self._cond:
            self._check(dev_handle.generation)
            if intf != self.interface.bInterfaceNumber:
                raise usb.core.USBError("Entity not found", LIBUSB_ERROR_NOT_FOUND, errno.ENOENT)
            dev_handle.claimed.add(intf)

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:
        with self._cond:
            dev_handle.claimed.discard(intf)
            self._check(dev_handle.generation)

    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:
        return False

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        return None

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        return None

    def clear_halt(self, dev_handle: _Handle, ep: int) -> None:
        with self._cond:
            self._check(dev_handle.generation)

    def intr_read(
        self, dev_handle: _Handle, ep: int, intf: int, buff: array.array[int], timeout: int
    ) -> int:
        """Wait up to ``timeout`` ms (0: for ever) for the next report and copy it into ``buff``."""
        deadline = None if timeout == 0 else time.monotonic() + timeout / 1000
        with self._cond:
            while True:
                self._check(dev_handle.generation)
                if ep != self.endpoint.bEndpointAddress or intf not in dev_handle.claimed:
                    raise usb.core.USBError(
                        "Invalid parameter", LIBUSB_ERROR_INVALID_PARAM, errno.EINVAL
                    )
                if self._reports:
                    report = self._reports.popleft()
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise usb.core.USBTimeoutError(
                        "Operation timed out", LIBUSB_ERROR_TIMEOUT, errno.ETIMEDOUT
                    )
                self._waiting += 1
                self._cond.notify_all()  # for wait_for_reader
                try:
                    self._cond.wait(remaining)
                finally:
                    self._waiting -= 1
            self.reads += 1
        if len(report) > len(buff) * buff.itemsize:
            raise usb.core.USBError("Overflow", LIBUSB_ERROR_OVERFLOW, errno.EOVERFLOW)
        buff[: len(report)] = array.array("B", report)
        return len(report)

    def ctrl_transfer(
        self,
        dev_handle: _Handle,
        bmRequestType: int,
        bRequest: int,
        wValue: int,
        wIndex: int,
        data: array.array[int],
        timeout: int,
    ) -> int:
        with self._cond:
            self._check(dev_handle.generation)
            descriptor_now = self._descriptor_now()
        answer = self._control_answer(descriptor_now, bmRequestType, bRequest, wValue, wIndex)
        if bmRequestType & 0x80 == 0:
            return len(data) * data.itemsize  # OUT request accepted (SET_IDLE, SET_PROTOCOL)
        n = min(len(answer), len(data) * data.itemsize)
        data[:n] = array.array("B", answer[:n])
        return n

    def _control_answer(
        self, device: DeviceDescriptor, request_type: int, request: int, value: int, index: int
    ) -> bytes:
        kind, number = value >> 8, value & 0xFF
        if request_type == 0x80 and request == 0x06:  # GET_DESCRIPTOR, device recipient
            if kind == 0x01:
                return device.to_bytes()
            if kind == 0x02 and number == 0:
                return self.configuration_bytes()
            if kind == 0x03:
                return self._string_descriptor(number)
        if request_type == 0x81 and request == 0x06 and index == 0:  # interface recipient
            if kind == DESC_HID_REPORT:
                return self.report_descriptor
            if kind == DESC_HID:
                return self.interface.extra_descriptors
        if request_type == 0x21 and request in (0x0A, 0x0B):  # HID SET_IDLE, SET_PROTOCOL
            return b""
        raise usb.core.USBError("Pipe error", LIBUSB_ERROR_PIPE, errno.EPIPE)

    def _string_descriptor(self, index: int) -> bytes:
        if index == 0:
            return bytes((4, 0x03)) + struct.pack("<H", 0x0409)  # English (US)
        text = self._strings.get(index)
        if not text:
            raise usb.core.USBError("Pipe error", LIBUSB_ERROR_PIPE, errno.EPIPE)
        encoded = text.encode("utf-16-le")[:252]
        return bytes((len(encoded) + 2, 0x03)) + encoded
