"""The one module that builds the daemon and its services from a config (and so knows both).

Services get the table only through the ports of ``controller/ports.py``; the daemon runs
whatever services it is given. Services are imported here only when the config enables them, so
a table without MQTT or a monitor does not load aiomqtt or aiohttp.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import structlog

from controller.config import EXIT_CONFIG_ERROR, Config, ConfigError
from controller.config.check import load_checked
from controller.daemon import Daemon
from controller.devices import build_devices
from controller.journal import Journal
from controller.logging import bind_table, configure_logging
from controller.ports import Service
from controller.services import PoleService
from drivers.base import Device, DisplaySink

log = structlog.get_logger(__name__)


def default_services(config: Config, sinks: Sequence[DisplaySink]) -> list[Service]:
    """The services a config asks for: a pole display per sink, MQTT, the pages."""
    services: list[Service] = [PoleService(sink) for sink in sinks]
    if config.mqtt.enabled:
        from controller.mqtt.publisher import MqttService

        services.append(MqttService())
    if config.display.enabled:
        from controller.display import DisplayService

        services.append(DisplayService())
    return services


def build_daemon(
    config: Config,
    journal: Journal,
    devices: Sequence[Device],
    services: Iterable[Service] = (),
    *,
    config_digest: str = "",
) -> Daemon:
    """A daemon for ``config`` that runs ``devices`` and ``services``."""
    return Daemon(
        config, journal, devices=list(devices), services=list(services), config_digest=config_digest
    )


def config_digest(path: str | Path) -> str:
    """The first 16 hex digits of the config file's SHA-256 (in the status and every round)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


async def run_from_config(
    path: str, *, extra_services: Callable[[Config], Iterable[Service]] | None = None
) -> int:
    """`paigow-table run --config FILE`: 0 after a clean stop, 78 on a config error."""
    try:
        config, warnings = load_checked(path)
    except ConfigError as exc:
        for issue in exc.errors:
            print(issue, file=sys.stderr, flush=True)
        return EXIT_CONFIG_ERROR
    # Before anything that logs (the drivers): every line of `run` follows [logging].
    configure_logging(config.logging.level, config.logging.format)
    bind_table(config.table.id)
    for warning in warnings:
        log.warning("config_warning", file=warning.file, key=warning.key, detail=warning.message)
    devices, sinks = build_devices(config, path)
    journal = Journal.open(
        config.journal.path, config.table.id, synchronous=config.journal.synchronous
    )
    try:
        services = [
            *default_services(config, sinks),
            *(extra_services(config) if extra_services else ()),
        ]
        daemon = build_daemon(config, journal, devices, services, config_digest=config_digest(path))
        await daemon.run(handle_signals=True)
    finally:
        journal.close()
    return 0
