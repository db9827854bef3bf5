"""The drivers a config names, built (not yet running): the only place config meets drivers.

``drivers/registry.py`` knows every driver name; this module turns one ``[devices.NAME]`` section
into the driver object, so ``check-config`` and ``run`` build (and refuse) devices the same way.
"""

from __future__ import annotations

from typing import Any

from controller.config import AnyDevice, Config, ConfigError, ConfigIssue, SerialDevice
from drivers.base import Backoff, Device, DisplaySink
from drivers.pole import SerialPoleDisplay
from drivers.registry import ESC_POS_POLE, HID_DICE, driver_roles, open_device


def _with_backoff(settings: dict[str, Any]) -> dict[str, Any]:
    """Drivers that take a Backoff object get one from the config's backoff_* options."""
    initial = settings.pop("backoff_initial", None)
    cap = settings.pop("backoff_cap", None)
    if initial is not None or cap is not None:
        default = Backoff()
        settings["backoff"] = Backoff(
            initial=float(initial if initial is not None else default.initial),
            cap=float(cap if cap is not None else default.cap),
        )
    return settings


def known_drivers() -> dict[str, frozenset[str]]:
    """Driver name → the roles it serves, from the registry (for the config's own checks)."""
    return driver_roles()


def build_device(name: str, dev: AnyDevice) -> tuple[Device, DisplaySink | None]:
    """The driver for one device section, and the same object as a display sink for a pole.
    Raises ValueError or TypeError (naming the setting) when the driver refuses the section."""
    if dev.driver == ESC_POS_POLE:
        if not isinstance(dev, SerialDevice):
            raise ValueError('a pole display is a serial device (transport = "serial")')
        pole = SerialPoleDisplay(name=name, **_with_backoff(dev.settings()))
        return pole, pole  # its run loop keeps the port open and writes the latest text
    if dev.driver == HID_DICE:
        # pyusb only for a table with a USB dice reader: 0.7 MB resident at import (issue 42).
        from drivers.dice import UsbDiceReader

        return UsbDiceReader(name=name, **_with_backoff(dev.settings())), None
    return open_device(name, dev.driver, dev.transport, **dev.settings()), None


def build_devices(config: Config, file: str = "<config>") -> tuple[list[Device], list[DisplaySink]]:
    """The drivers the config names (card and position sources, the pole display, each run by
    the daemon) and the display sinks among them. A device its driver refuses is a ConfigError
    naming the device's key, so the daemon never starts half-configured."""
    devices: list[Device] = []
    sinks: list[DisplaySink] = []
    issues: list[ConfigIssue] = []
    for name, dev in config.devices.items():
        try:
            device, sink = build_device(name, dev)
        except (TypeError, ValueError) as exc:
            issues.append(ConfigIssue(file, f"devices.{name}", str(exc)))
            continue
        devices.append(device)
        if sink is not None:
            sinks.append(sink)
    if issues:
        raise ConfigError(issues)
    return devices, sinks
