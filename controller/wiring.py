"""The one module that builds the daemon and its services from a config (and so knows both).

Services get the table only through the ports of ``controller/ports.py``; the daemon runs
whatever services it is given. Services are imported here only when the config enables them, so
a table without MQTT does not load paho, and without a display does not load aiohttp.
"""

from __future__ import annotations

import errno
import hashlib
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import structlog

from controller import __version__
from controller.clock import utc_now
from controller.config import EXIT_CONFIG_ERROR, Config, ConfigError, ConfigIssue
from controller.config_check import load_checked
from controller.daemon import Daemon, describe_failure
from controller.devices import build_devices
from controller.game.paytables import chan_chu_paytable, envy_paytable, jacks_beat_paytable
from controller.game.way import load_way
from controller.journal import Journal, JournalError
from controller.journal.lock import JournalInUse, JournalLock
from controller.journal.maintenance import check_journal
from controller.journal.reserve import Reserve
from controller.kept_state import KeptState, load_kept, record_house_way
from controller.logging import bind_table, configure_logging
from controller.messages import DeviceIdentity
from controller.ports import PortClaimer, PortInUse, Service
from controller.services.pole import PoleService
from controller.software import SoftwareCheck, check_software
from controller.table import Table, TableSettings
from drivers.base import Device, DisplaySink

log = structlog.get_logger(__name__)

#: ``run`` exit statuses the unit does not restart on (RestartPreventExitStatus=): a restart
#: cannot mend them, a person must (docs/faults.md).
EXIT_JOURNAL_DAMAGED = 65  # EX_DATAERR: not a journal, a corrupt page, a newer schema
EXIT_JOURNAL_UNWRITABLE = 73  # EX_CANTCREAT: a full disk, an I/O error, no permission
EXIT_SOFTWARE_CHANGED = 70  # EX_SOFTWARE: an installed file differs from the package
#: ``run`` exits 69 (EX_UNAVAILABLE) when its journal is held by another ``run`` (its lock,
#: controller/journal/lock.py) or its dealer page's port is taken: restarted, so the table
#: starts once the other one stops.
EXIT_IN_USE = 69

#: Less free space than this on the journal's disk at start is a full disk (status 73).
START_MIN_FREE = 4 * 2**20

_DAMAGED_CODES = {"SQLITE_CORRUPT", "SQLITE_NOTADB", "SQLITE_FORMAT", "SQLITE_SCHEMA"}


def journal_failure(exc: BaseException) -> int | None:
    """The exit status for a journal that cannot be used at start, or None if ``exc`` is not
    such a failure. Damage (corrupt, not a database, a newer schema) is 65; anything that stops
    writing (full, I/O error, read-only, cannot open) is 73."""
    if isinstance(exc, JournalError):
        return EXIT_JOURNAL_DAMAGED
    if isinstance(exc, sqlite3.Error):
        name = str(getattr(exc, "sqlite_errorname", "") or "")  # e.g. SQLITE_CORRUPT_INDEX
        if "_".join(name.split("_")[:2]) in _DAMAGED_CODES:
            return EXIT_JOURNAL_DAMAGED
        if isinstance(exc, sqlite3.DatabaseError) and not isinstance(exc, sqlite3.OperationalError):
            return EXIT_JOURNAL_DAMAGED
        return EXIT_JOURNAL_UNWRITABLE
    return None


def _free_bytes(journal_path: str) -> int | None:
    """Free bytes on the journal's filesystem (its directory's, if the file is not there yet)."""
    path = Path(journal_path)
    for candidate in (path, *path.parents):
        if candidate.exists():
            try:
                return shutil.disk_usage(candidate).free
            except OSError:
                return None
    return None


def _journal_refusal(path: str, exc: BaseException, status: int) -> str:
    what = "is damaged" if status == EXIT_JOURNAL_DAMAGED else "cannot be written"
    hint = (
        f"check it with: paigow-table journal check --journal {path}"
        if status == EXIT_JOURNAL_DAMAGED
        else "free space on its disk or fix its permissions, then start again"
    )
    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
        detail = "no space left on the device"
    else:
        detail = str(exc) or type(exc).__name__
    return f"journal {path} {what}: {detail}; the table will not start ({hint})"


def default_services(config: Config, sinks: Sequence[DisplaySink]) -> list[Service]:
    """The services a config asks for: a pole display per sink, MQTT, the pages."""
    services: list[Service] = [PoleService(sink) for sink in sinks]
    mqtt = None
    if config.mqtt.enabled:
        from controller.mqtt.publisher import MqttService

        services.append(mqtt := MqttService())
    if config.display.enabled:
        from controller.display import DisplayService
        from controller.metrics import TableMetrics

        # The metrics are served by the display, and hear the publisher's acknowledgements.
        metrics = TableMetrics(mqtt=mqtt)
        if mqtt is not None:
            mqtt.metrics = metrics
        services.append(DisplayService(metrics=metrics))
    if config.journal.retention_days > 0 and str(config.journal.path) != ":memory:":
        from controller.services.retention import RetentionService

        services.append(RetentionService())
    return services


def feature_services(config: Config, kept: KeptState) -> list[Service]:
    """What every daemon runs beside its config's services: the House Way's table read at
    start; and the services that keep state in the journal or need the start's kept state:
    signed checkpoints, game protection, the clock's watch."""
    from controller.services.house_way import HouseWayWarmup

    services: list[Service] = [HouseWayWarmup()]
    key_file = config.mqtt.checkpoint_key_file
    if key_file is not None and config.mqtt.enabled:
        from controller.journal.checkpoints import read_hex_key
        from controller.services.checkpoints import CheckpointService

        try:
            key = read_hex_key(key_file)
        except (OSError, ValueError) as exc:
            # A file the check read was changed before the start read it: the same refusal.
            issue = ConfigIssue(str(key_file), "mqtt.checkpoint_key_file", str(exc))
            raise ConfigError([issue]) from None
        services.append(
            CheckpointService(key, key_file.name, interval=config.mqtt.checkpoint_interval)
        )
    if config.protection.enabled:
        from controller.services.protection import ProtectionService

        services.append(ProtectionService(config.protection, kept.protection))
    if config.table.time_sync:
        from controller.services.clock import ClockSyncService

        services.append(ClockSyncService())
    return services


def table_settings(config: Config) -> TableSettings:
    p = config.paytables
    limits = config.limits
    return TableSettings(
        table_id=config.table.id,
        seats=dict(config.table.seats),
        rules=config.rules.to_rules(),
        chan_chu=chan_chu_paytable(p.chan_chu),
        jacks_beat=jacks_beat_paytable(p.jacks_beat),
        envy=envy_paytable(p.chan_chu) if p.envy else None,
        refusals_before_alarm=limits.refusals_before_alarm,
        corrections_per_round=limits.corrections_per_round,
        corrections_per_hour=limits.corrections_per_hour,
        way=load_way(config.rules.house_way),
        identities={
            name: DeviceIdentity(**device.identity.model_dump(), role=device.role)
            for name, device in config.devices.items()
            if device.identity is not None
        },
    )


def build_table(
    config: Config,
    journal: Journal,
    kept: KeptState,
    *,
    config_digest: str = "",
    software: SoftwareCheck | None = None,
) -> Table:
    """The table, with what it kept across a restart (never written into it afterwards)."""
    return Table(
        table_settings(config),
        new_round_id=journal.new_round_id,
        clock=utc_now,
        next_round_seq=journal.rounds.next_seq(),
        software_version=__version__,
        config_digest=config_digest,
        recent_deals=journal.history.recent_deals(),
        software_digest=software.digest if software else "",
        software_verified=software.verified if software else None,
        new_alarm_id=lambda: f"alarm-{journal.new_round_id()}",
        kept=kept.table,
    )


def build_daemon(
    config: Config,
    journal: Journal,
    devices: Sequence[Device],
    services: Iterable[Service] = (),
    *,
    config_digest: str = "",
    software: SoftwareCheck | None = None,
) -> Daemon:
    """A daemon for ``config`` that runs ``devices``, ``services`` and the feature services."""
    kept = load_kept(journal, utc_now, describe_failure)
    table = build_table(config, journal, kept, config_digest=config_digest, software=software)
    way = table.settings.way
    if way is not None:
        record_house_way(journal, way.name, way.digest)
    return Daemon(
        config,
        journal,
        table,
        devices=list(devices),
        services=[*services, *feature_services(config, kept)],
    )


def config_digest(path: str | Path) -> str:
    """The first 16 hex digits of the config file's SHA-256 (in the status and every round)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def _journal_refusal_at_start(config: Config, journal_path: str) -> int | None:
    """A full disk (after the reserve is released) or a damaged journal: the exit status, with
    one plain line on stderr; None when the journal can be opened."""
    free = _free_bytes(journal_path)
    if free is not None and free < START_MIN_FREE:
        # A full disk at start: the space kept for this records it (docs/faults.md).
        released = Reserve(config.journal.reserve_path, 0).release()
        if released:
            log.warning("journal_reserve_released", at="start", freed=released)
            free = _free_bytes(journal_path)
    if free is not None and free < START_MIN_FREE:
        print(
            f"journal {journal_path} cannot be written: its disk is full ({free // 1024} KB "
            "free); the table will not start (free space on its disk, then start again)",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_JOURNAL_UNWRITABLE
    checked = check_journal(journal_path)
    if not checked.ok and not checked.missing:
        print(checked.summary(), file=sys.stderr, flush=True)
        return EXIT_JOURNAL_UNWRITABLE if checked.unreadable else EXIT_JOURNAL_DAMAGED
    return None


def _open_journal(config: Config, journal_path: str) -> Journal:
    """The journal, written once now (not at the first deal: a journal that cannot take a write
    stops the start with status 73 instead of starting only to tilt), and the space kept to
    record the next full disk, while the disk has room for it."""
    try:
        journal = Journal.open(
            config.journal.path, config.table.id, synchronous=config.journal.synchronous
        )
    except OSError as exc:  # its directory cannot be made
        raise sqlite3.OperationalError(str(exc)) from exc
    try:
        with journal.transaction() as tx:
            tx.remember("started_at", tx.now)
    except BaseException:
        journal.close()
        raise
    reserve = Reserve(config.journal.reserve_path, config.journal.reserve_mb * 2**20)
    room = _free_bytes(journal_path)
    if room is not None and room - max(0, reserve.size - reserve.held) >= START_MIN_FREE:
        reserve.ensure()
    return journal


def _configured(path: str) -> Config | None:
    """The config (None after printing its errors), with logging set up by its [logging]
    before anything logs (the drivers) and its warnings logged."""
    try:
        config, warnings = load_checked(path)
    except ConfigError as exc:
        for issue in exc.errors:
            print(issue, file=sys.stderr, flush=True)
        return None
    configure_logging(config.logging.level, config.logging.format)
    bind_table(config.table.id)
    for warning in warnings:
        log.warning("config_warning", file=warning.file, key=warning.key, detail=warning.message)
    return config


def _software_ok(software: SoftwareCheck) -> bool:
    """False (said on stderr) when an installed file differs from the package; a development
    install (editable) runs, with a warning."""
    if not software.ok:
        print(software.summary(), file=sys.stderr, flush=True)
        return False
    if software.editable:
        log.warning("software_unverified", detail=software.summary())
    return True


async def run_from_config(
    path: str, *, extra_services: Callable[[Config], Iterable[Service]] | None = None
) -> int:
    """`paigow-table run --config FILE`: 0 after a clean stop, 78 on a config error."""
    config = _configured(path)
    if config is None:
        return EXIT_CONFIG_ERROR
    software = check_software()
    if not _software_ok(software):
        return EXIT_SOFTWARE_CHANGED
    journal_path = str(config.journal.path)
    lock = JournalLock(journal_path)
    try:
        if journal_path != ":memory:":
            lock.acquire()
        return await _run_locked(path, config, software, extra_services)
    except (JournalInUse, PortInUse) as exc:
        print(exc, file=sys.stderr, flush=True)
        return EXIT_IN_USE
    finally:
        lock.release()


async def _run_locked(
    path: str,
    config: Config,
    software: SoftwareCheck,
    extra_services: Callable[[Config], Iterable[Service]] | None,
) -> int:
    """The daemon's run, the journal's lock held (``run_from_config``)."""
    devices, sinks = build_devices(config, path)
    services = [
        *default_services(config, sinks),
        *(extra_services(config) if extra_services else ()),
    ]
    for service in services:
        if isinstance(service, PortClaimer):
            service.claim(config)  # a port in use stops the start before a write (69)
    journal_path = str(config.journal.path)
    refusal = _journal_refusal_at_start(config, journal_path)
    if refusal is not None:
        return refusal
    journal: Journal | None = None
    try:
        journal = _open_journal(config, journal_path)
        daemon = build_daemon(
            config,
            journal,
            devices,
            services,
            config_digest=config_digest(path),
            software=software,
        )
        await daemon.run(handle_signals=True)
    except ConfigError as exc:
        # A file the check read was changed before the daemon read it (the checkpoint key):
        # the same refusal as the check's, never a traceback and exit 1 restarted every 2 s.
        for issue in exc.errors:
            print(issue, file=sys.stderr, flush=True)
        return EXIT_CONFIG_ERROR
    except (sqlite3.Error, JournalError) as exc:
        # Opening the journal, reading its state, voiding the rounds a crash left open: the
        # daemon's own writes during the run never raise (they tilt the table instead).
        status = journal_failure(exc)
        if status is None:
            raise
        # One plain line (systemd's journal shows it as the reason the unit stopped).
        print(_journal_refusal(journal_path, exc, status), file=sys.stderr, flush=True)
        return status
    finally:
        if journal is not None:
            journal.close()
    return 0
