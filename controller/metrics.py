"""The table daemon's Prometheus metrics (docs/operations.md "Monitoring"), served by the display
server at ``/metrics`` behind the pages' access rules (loopback free; elsewhere the supervisor
token as ``Authorization: Bearer``), in the exposition format of Prometheus' own client.

Two kinds of figures. What happens is counted as it happens, from the effects the daemon
delivers after each commit (rounds by result, alarms, device drops and faults, commands by kind
and outcome), from the journal's commits (their time, durable or not) and from the publisher
(a message's commit to the broker's acknowledgement). What the table *is* (the outbox's depth
and age, devices up, latched alarms, game protection's distance to its thresholds, the
journal's size, the clock) is read when Prometheus asks, so it is never stale and costs nothing
between scrapes. Every label is bounded: a device or a test named in the config or the code, a
command kind the table knows ("other" for the rest), a result or a reason from a fixed list;
never a round, an alarm id or a source address.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric

from controller import clock_sync
from controller.journal.store import Commits
from controller.messages import COMMAND_KINDS, StatusPayload
from controller.table import (
    AlarmRaised,
    CommandReply,
    DeviceChanged,
    Effect,
    Refused,
    RoundClosed,
)

#: The exposition's content type (text format 0.0.4), as Prometheus asks for it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Seconds, from a fraction of a millisecond (an fsync, a publish on loopback) to a broker down.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.005,
    0.01,
    0.015,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)

_KINDS = frozenset(COMMAND_KINDS)


def command_kind(kind: str) -> str:
    """A command kind as a label: one the table knows, else ``other`` (a topic is anyone's)."""
    return kind if kind in _KINDS else "other"


class MetricsHost(Protocol):
    """What the metrics read: the daemon as every service sees it, and its journal."""

    @property
    def config(self) -> Any: ...

    @property
    def table(self) -> Any: ...

    @property
    def journal(self) -> Any: ...

    def subscribe(self, listener: Callable[[Effect], None]) -> None: ...

    def panel(self, name: str) -> dict[str, Any] | None: ...


class TableMetrics:
    """One daemon's registry (not the process-wide default: tests run several daemons in one
    process). :meth:`attach` once the daemon runs; :meth:`exposition` for each scrape."""

    def __init__(self, mqtt: Any = None) -> None:
        #: The publisher (``connected``), when the daemon publishes.
        self.mqtt = mqtt
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        self.info = Info(
            "paigow_table", "The table and its software (labels only)", registry=registry
        )
        self.rounds = Counter(
            "paigow_table_rounds",
            "Rounds closed, by result (settled, dead, misdeal, void)",
            ["result"],
            registry=registry,
        )
        self.alarms = Counter(
            "paigow_table_alarms",
            "Alarms raised, by code and severity (docs/alarms.md)",
            ["code", "severity"],
            registry=registry,
        )
        self.device_drops = Counter(
            "paigow_table_device_disconnects",
            "A device's link lost (it was connected), by device",
            ["device"],
            registry=registry,
        )
        self.device_connects = Counter(
            "paigow_table_device_connects",
            "A device's link made (the first, and each reconnect), by device",
            ["device"],
            registry=registry,
        )
        self.device_faults = Counter(
            "paigow_table_device_faults",
            "Alarms a device caused (noise, bad frames, a deck not whole…), by device",
            ["device"],
            registry=registry,
        )
        self.commands = Counter(
            "paigow_table_commands",
            "Commands by kind and outcome: ok, failed (the table refused what it asked), or the "
            "reason it was refused before the table (wrong_pin, locked_out, signature, "
            "rate_limited, round, …)",
            ["kind", "outcome"],
            registry=registry,
        )
        self.commit_seconds, self.round_commit_seconds, self.publish_seconds = _histograms(registry)
        self._state = _StateCollector()
        registry.register(self._state)
        self._host: MetricsHost | None = None

    # --- what happens ----------------------------------------------------------------------

    def attach(self, host: MetricsHost) -> None:
        """Hear the daemon's effects and its journal's commits (once: later calls are no-ops)."""
        if self._host is not None:
            return
        self._host = host
        config = host.config
        status = host.table.status()
        self.info.info(
            {
                "table_id": config.table.id,
                "version": status.software_version,
                "house_way": status.house_way,
            }
        )
        for name in _device_names(config):
            self.device_drops.labels(name)
            self.device_connects.labels(name)
            self.device_faults.labels(name)
        for result in ("settled", "dead", "misdeal", "void"):
            self.rounds.labels(result)
        host.subscribe(self.on_effect)
        commits: Commits = host.journal.commits
        commits.timed = self.on_commit

    def on_commit(self, durable: bool, seconds: float) -> None:
        self.commit_seconds.labels("durable" if durable else "relaxed").observe(seconds)

    def on_effect(self, effect: Effect) -> None:
        if isinstance(effect, RoundClosed):
            p = effect.payload
            self.rounds.labels(p.status).inc()
            if p.closed_at is not None:
                lag = (datetime.now(UTC) - p.closed_at).total_seconds()
                self.round_commit_seconds.observe(max(lag, 0.0))
        elif isinstance(effect, AlarmRaised):
            a = effect.payload
            self.alarms.labels(a.code, a.severity).inc()
            if a.device and a.device in self._state.devices_known:
                self.device_faults.labels(a.device).inc()
        elif isinstance(effect, DeviceChanged):
            d = effect.payload
            (self.device_connects if d.online else self.device_drops).labels(d.device).inc()
        elif isinstance(effect, CommandReply):
            outcome = "ok" if effect.ok else "failed"
            self.commands.labels(command_kind(effect.command), outcome).inc()
        elif isinstance(effect, Refused) and effect.refusal.reason != "round":
            # (A round-scoped refusal has its reply too: counted once, as failed.)
            r = effect.refusal
            self.commands.labels(command_kind(r.command), r.reason).inc(r.count)

    def published_since(self, committed_at: str) -> None:
        """A message the broker acknowledged now, committed at ``committed_at`` (its row's
        ``created_at``: the transaction's time)."""
        try:
            since = datetime.fromisoformat(committed_at)
        except ValueError:
            return
        seconds = (datetime.now(UTC) - since).total_seconds()
        self.publish_seconds.observe(max(seconds, 0.0))

    # --- what the table is, read at a scrape ----------------------------------------------

    async def exposition(self, host: MetricsHost) -> bytes:
        """The text Prometheus reads: the table's state read on the loop (it is the loop's),
        the journal's (a query, the file's size) in a worker thread, then everything written."""
        state = self._state
        state.table_state(host, self.mqtt)
        journal = host.journal
        return await asyncio.to_thread(self._render, journal)

    def _render(self, journal: Any) -> bytes:
        self._state.journal_state(journal)
        return generate_latest(self.registry)


def _histograms(registry: CollectorRegistry) -> tuple[Histogram, Histogram, Histogram]:
    """The journal's commit time, a round's last event to its commit, a commit to the broker's
    acknowledgement."""
    commit = Histogram(
        "paigow_table_journal_commit_seconds",
        "A journal COMMIT's time: durable ones wait for the disk (fsync), relaxed ones not",
        ["sync"],
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    round_commit = Histogram(
        "paigow_table_round_commit_seconds",
        "From the deal's last event being handled (the round's closed_at) to its journal commit",
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    publish = Histogram(
        "paigow_table_publish_seconds",
        "From a message's journal commit to the broker's acknowledgement (a backlog's messages "
        "wait here while the broker is away)",
        buckets=LATENCY_BUCKETS,
        registry=registry,
    )
    return commit, round_commit, publish


def _device_names(config: Any) -> list[str]:
    return [str(name) for name in getattr(config, "devices", {}) or {}]


class _StateCollector:
    """The gauges read at a scrape (``table_state`` on the loop, ``journal_state`` in the
    thread that renders), yielded as metric families when the registry collects."""

    def __init__(self) -> None:
        self.devices_known: set[str] = set()
        self._families: dict[str, list[tuple[tuple[str, ...], float]]] = {}
        self._journal: dict[str, float] = {}

    def describe(self) -> Iterable[Metric]:
        return []  # read at each scrape: the registry must not collect at registration

    def table_state(self, host: MetricsHost, mqtt: Any) -> None:
        status: StatusPayload = host.table.status()
        self.devices_known = set(status.devices) | set(_device_names(host.config))
        now = datetime.now(UTC)
        latched: dict[str, int] = {}
        oldest = 0.0
        for alarm in status.alarms_unacknowledged:
            latched[alarm.code] = latched.get(alarm.code, 0) + 1
            if alarm.raised_at is not None:
                oldest = max(oldest, (now - alarm.raised_at).total_seconds())
        tests = (host.panel("protection") or {}).get("tests", [])
        synced = status.clock_synchronized
        families: dict[str, list[tuple[tuple[str, ...], float]]] = {
            "device_up": [((d,), float(up)) for d, up in sorted(status.devices.items())],
            "open": [((), float(status.table_open))],
            "fault": [((), float(status.state == "fault"))],
            "latched": [((code,), float(n)) for code, n in sorted(latched.items())],
            "latched_total": [((), float(status.alarms_unacknowledged_total))],
            "latched_oldest": [((), oldest)],
            "protection": [
                ((t["name"],), t["statistic"] / t["threshold"] if t.get("threshold") else 0.0)
                for t in tests
            ],
            "clock_synced": [] if synced is None else [((), float(synced))],
            "mqtt_connected": [] if mqtt is None else [((), float(mqtt.connected.is_set()))],
        }
        error = clock_sync.estimated_error()
        families["clock_error"] = [] if error is None else [((), error)]
        self._families = families

    def journal_state(self, journal: Any) -> None:
        outbox = journal.outbox
        count, oldest = outbox.depth()
        path = str(journal.path)
        size = 0.0
        if path != ":memory:":
            for suffix in ("", "-wal"):
                with contextlib.suppress(OSError):
                    size += os.stat(path + suffix).st_size
        free = None
        if path != ":memory:":
            with contextlib.suppress(OSError):
                st = os.statvfs(os.path.dirname(os.path.abspath(path)))
                free = float(st.f_bavail * st.f_frsize)
        age = 0.0
        if oldest is not None:
            age = max((datetime.now(UTC) - datetime.fromisoformat(oldest)).total_seconds(), 0.0)
        self._journal = {"outbox": float(count), "outbox_age": age, "bytes": size}
        if free is not None:
            self._journal["disk_free"] = free

    def collect(self) -> Iterable[Metric]:
        yield from _gauges(self._families, self._journal)


#: The gauges read on the loop at a scrape: (key, name, help, labels).
TABLE_GAUGES: tuple[tuple[str, str, str, list[str]], ...] = (
    ("device_up", "paigow_table_device_up", "1 while the device is connected", ["device"]),
    ("open", "paigow_table_open", "1 while the table is open", []),
    ("fault", "paigow_table_fault", "1 while the journal cannot be written (tilt)", []),
    (
        "latched",
        "paigow_table_latched_alarms",
        "Critical alarms waiting for an acknowledgement, by code (the oldest listed)",
        ["code"],
    ),
    (
        "latched_total",
        "paigow_table_latched_alarms_waiting",
        "Critical alarms waiting for an acknowledgement, listed or not",
        [],
    ),
    (
        "latched_oldest",
        "paigow_table_latched_alarm_oldest_seconds",
        "Age of the oldest alarm waiting for an acknowledgement (0: none waits)",
        [],
    ),
    (
        "protection",
        "paigow_table_protection_threshold_ratio",
        "Game protection: each test's statistic over its alarm threshold (1 alarms)",
        ["test"],
    ),
    (
        "clock_synced",
        "paigow_table_clock_synchronized",
        "1 while a time service synchronises the clock (absent: cannot tell)",
        [],
    ),
    (
        "clock_error",
        "paigow_table_clock_estimated_error_seconds",
        "The kernel's estimated error of the clock (adjtimex; absent: cannot tell)",
        [],
    ),
    (
        "mqtt_connected",
        "paigow_table_mqtt_connected",
        "1 while the publisher holds a session with the broker",
        [],
    ),
)

#: The gauges read from the journal in the rendering thread: (key, name, help).
JOURNAL_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("outbox", "paigow_table_outbox_messages", "Messages waiting for the broker"),
    (
        "outbox_age",
        "paigow_table_outbox_oldest_age_seconds",
        "Age of the oldest message waiting for the broker (0: none waits)",
    ),
    ("bytes", "paigow_table_journal_bytes", "The journal's size on disk (with its WAL)"),
    (
        "disk_free",
        "paigow_table_journal_disk_free_bytes",
        "Space an unprivileged writer has on the journal's file system",
    ),
)


def _gauges(
    families: Mapping[str, list[tuple[tuple[str, ...], float]]],
    journal: Mapping[str, float],
) -> Iterable[Metric]:
    for key, name, help_text, labels in TABLE_GAUGES:
        samples = families.get(key)
        if not samples:
            continue
        family = GaugeMetricFamily(name, help_text, labels=labels)
        for values, value in samples:
            family.add_metric(list(values), value)
        yield family
    for key, name, help_text in JOURNAL_GAUGES:
        if key in journal:
            yield GaugeMetricFamily(name, help_text, value=journal[key])
