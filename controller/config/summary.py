"""A config in a few lines for a person (``check-config``), with no secrets."""

from __future__ import annotations

import os

from controller.config.models import AnyDevice, Config, SerialDevice, TcpDevice, UsbDevice


def _device_summary(name: str, device: AnyDevice) -> str:
    where: str
    if isinstance(device, SerialDevice):
        line = f"{device.bytesize}{device.parity}{device.stopbits:g}"
        where = f"{device.port} {device.baudrate} {line}"
    elif isinstance(device, TcpDevice):
        where = f"tcp {device.host}:{device.port}"
    elif isinstance(device, UsbDevice):
        where = f"usb {device.vendor_id:04x}:{device.product_id:04x}"
    else:
        where = "software"
    return f"{name} ({device.role}, {device.driver}, {where})"


def summary(config: Config) -> list[str]:
    """Short human summary of a valid config (no secrets)."""
    t = config.table
    seats = ", ".join(f"{p}→{label}" for p, label in sorted(t.seats.items()))
    lines = [
        f"table {t.id} ({t.name}) at site {t.site}; seats {seats}",
        f"rules: wheel {config.rules.wheel_rank}, ace-high pushes pai gow "
        f"{'on' if config.rules.ace_high_pushes_pai_gow else 'off'}; paytables: Chan Chu "
        f"{config.paytables.chan_chu}{' with envy' if config.paytables.envy else ''}, "
        f"Jacks Beat {config.paytables.jacks_beat}",
        "devices: " + "; ".join(_device_summary(n, d) for n, d in config.devices.items()),
    ]
    m = config.mqtt
    if m.enabled:
        auth = f" as {m.username}" if m.username else ""
        lines.append(
            f"mqtt: {'mqtts' if m.tls else 'mqtt'}://{m.host}:{m.port} (MQTT {m.protocol}){auth}, "
            f"client {m.client_id}, topics {m.topic_prefix}…"
        )
        if m.password_credential and not os.environ.get("CREDENTIALS_DIRECTORY"):
            lines.append(
                f"note: systemd credential {m.password_credential!r} not checked "
                "($CREDENTIALS_DIRECTORY is not set outside the service)"
            )
    else:
        lines.append("mqtt: off")
    d = config.display
    supervisors = (
        "supervisors by badge"
        if d.supervisors_file
        else "supervisors by the shared void PIN and a typed name"
        if d.void_pin_file
        else "no void, acknowledgement or correction at the display"
    )
    lines.append(
        f"display: http://{d.host}:{d.port}/ "
        + ("(supervisor token set" if d.supervisor_token_file else "(no supervisor token")
        + f"; {supervisors})"
        if d.enabled
        else "display: off"
    )
    limits = config.limits
    lines.append(
        f"corrections of players' settings: at most {limits.corrections_per_round} a round and "
        f"{limits.corrections_per_hour} an hour"
    )
    lines.append(f"journal: {config.journal.path} (synchronous {config.journal.synchronous})")
    return lines
