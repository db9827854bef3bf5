"""Driver names from the config → codec and device class; ``open_device`` builds a Device.

A vendor's protocol is one codec module in ``drivers/codecs/`` plus one entry here, e.g.
``"acme_shuffler": DriverSpec(AcmeShufflerCodec, ShufflerDevice)``; the config then says
``driver = "acme_shuffler"`` (docs/protocols.md "Adding a vendor's protocol").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from drivers.base import Backoff, Device
from drivers.codecs.rng import ReferenceRngCodec
from drivers.codecs.shoe import ReferenceShoeCodec
from drivers.codecs.shuffler import ReferenceShufflerCodec
from drivers.framing import Codec
from drivers.rng import RngBoxDevice, SoftwareRng
from drivers.serial import SerialTransport
from drivers.shoe import ShoeDevice
from drivers.shuffler import ShufflerDevice
from drivers.stream import DEFAULT_BACKOFF, StreamDevice, Transport
from drivers.tcp import TcpTransport


@dataclass(frozen=True, slots=True)
class DriverSpec:
    """A codec (called with the device's config name) and the device class that runs it."""

    codec: Callable[[str], Codec]
    device: type[ShufflerDevice] | type[ShoeDevice] | type[RngBoxDevice]


DRIVERS: Final[dict[str, DriverSpec]] = {
    "reference_shuffler": DriverSpec(ReferenceShufflerCodec, ShufflerDevice),
    "reference_shoe": DriverSpec(ReferenceShoeCodec, ShoeDevice),
    "reference_rng": DriverSpec(ReferenceRngCodec, RngBoxDevice),
}
"""Byte-stream drivers by name."""

SOFTWARE_RNG: Final = "software_rng"
TRANSPORTS: Final = ("serial", "tcp")
_TRANSPORT_KEYS: Final[dict[str, frozenset[str]]] = {
    "serial": frozenset({"port", "baudrate", "bytesize", "parity", "stopbits"}),
    "tcp": frozenset({"host", "port", "connect_timeout"}),
}
_DEVICE_KEYS: Final = frozenset({"frame_timeout", "backoff_initial", "backoff_cap"})
_CARD_SOURCE_KEYS: Final = frozenset({"silence_timeout"})


def register(name: str, spec: DriverSpec) -> None:
    """Add a driver name (a vendor's codec); a name already taken is an error."""
    if name in DRIVERS or name == SOFTWARE_RNG:
        raise ValueError(f"driver {name!r} is already registered")
    DRIVERS[name] = spec


def codec_for(driver: str) -> Callable[[str], Codec]:
    """The codec class of a byte-stream driver name; ValueError names an unknown one."""
    spec = DRIVERS.get(driver)
    if spec is None:
        raise ValueError(f"driver: expected one of {sorted(DRIVERS)}, got {driver!r}")
    return spec.codec


def driver_names() -> list[str]:
    return sorted(driver_roles())


HID_DICE: Final = "hid_dice"
"""The USB HID dice reader (drivers/dice.py)."""
ESC_POS_POLE: Final = "esc_pos_pole"
"""The 2×20 ESC/POS pole display (drivers/pole.py)."""


def driver_roles() -> dict[str, frozenset[str]]:
    """Every driver name the config may use → the roles it serves ("cards", "position", "pole"):
    the one list both ``check-config`` and ``run`` ask."""
    roles = {name: frozenset({spec.device.role}) for name, spec in DRIVERS.items()}
    roles[SOFTWARE_RNG] = frozenset({SoftwareRng.role})
    roles[HID_DICE] = frozenset({"position"})
    roles[ESC_POS_POLE] = frozenset({"pole"})
    return roles


def make_transport(transport: str, settings: Mapping[str, Any]) -> Transport:
    """A serial or TCP transport from config settings; ValueError names a bad key."""
    if transport == "serial":
        if "port" not in settings:
            raise ValueError("serial transport: missing key 'port' (a device path)")
        return SerialTransport(
            str(settings["port"]),
            baudrate=settings.get("baudrate", 38400),
            bytesize=settings.get("bytesize", 8),
            parity=settings.get("parity", "N"),
            stopbits=settings.get("stopbits", 1),
        )
    if transport == "tcp":
        for key in ("host", "port"):
            if key not in settings:
                raise ValueError(f"tcp transport: missing key {key!r}")
        return TcpTransport(
            str(settings["host"]),
            settings["port"],
            connect_timeout=float(settings.get("connect_timeout", 5.0)),
        )
    raise ValueError(f"transport: expected one of {', '.join(TRANSPORTS)}, got {transport!r}")


def open_device(name: str, driver: str, transport: str = "serial", **settings: Any) -> Device:
    """The Device the config describes (not yet running: the daemon awaits its ``run``).

    ``driver`` is a registry name or ``"software_rng"`` (which takes no transport or settings).
    Settings: the transport's (serial: port, baudrate, bytesize, parity, stopbits; tcp: host,
    port, connect_timeout), and frame_timeout, backoff_initial, backoff_cap, plus
    silence_timeout for a shuffler or shoe. An unknown driver, transport or key is a ValueError
    that names it.
    """
    if driver == SOFTWARE_RNG:
        if settings:
            raise ValueError(
                f"device {name!r}: software_rng takes no settings, got {sorted(settings)}"
            )
        return SoftwareRng(name)
    spec = DRIVERS.get(driver)
    if spec is None:
        raise ValueError(
            f"device {name!r}: driver: expected one of {driver_names()}, got {driver!r}"
        )
    allowed = _TRANSPORT_KEYS.get(transport, frozenset()) | _DEVICE_KEYS
    if issubclass(spec.device, ShufflerDevice | ShoeDevice):
        allowed |= _CARD_SOURCE_KEYS
    unknown = sorted(set(settings) - allowed)
    if unknown:
        raise ValueError(
            f"device {name!r}: unknown setting(s) {unknown}; expected some of {sorted(allowed)}"
        )
    link = make_transport(transport, settings)
    backoff = Backoff(
        initial=float(settings.get("backoff_initial", DEFAULT_BACKOFF.initial)),
        cap=float(settings.get("backoff_cap", DEFAULT_BACKOFF.cap)),
    )
    options: dict[str, Any] = {
        "backoff": backoff,
        "frame_timeout": float(settings.get("frame_timeout", 0.25)),
    }
    if "silence_timeout" in settings:
        options["silence_timeout"] = float(settings["silence_timeout"])
    device: StreamDevice = spec.device(name, link, spec.codec(name), **options)
    return device
