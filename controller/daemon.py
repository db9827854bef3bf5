"""The table daemon: devices → one event queue → the Table → the journal → listeners.

Everything runs in one asyncio TaskGroup. Drivers put device events on ``Daemon.queue``; the
display and MQTT put commands there through ``submit`` (which waits for the reply). One
consumer takes them in order, asks the pure ``Table`` what to do, and writes the event and
every effect's rows and outbox messages to the journal in ONE transaction before any listener
(display, MQTT publisher, pole display, the demo's printer) hears of it. Cancellation reaches
the consumer only between events, so a stop never interrupts a write.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from controller.clock import utc_now
from controller.config import Config
from controller.fault_record import DiskWatch, FaultRecord
from controller.journal import Journal, OutboxMessage, Transaction, VoidedRound
from controller.journal.reserve import Reserve
from controller.messages import Command, Payload
from controller.ports import Origin, Service, StateKeeper
from controller.recorder import Recorder, durable, log_effect, restart_void
from controller.systemd import ready, stopping, watchdog_loop
from controller.table import (
    CommandReply,
    Effect,
    Refusal,
    RoundOpened,
    Table,
    TableEvent,
    Tick,
)
from controller.table.limits import DeviceLimiter
from controller.tilt import CommandItem, Tilt, describe_failure
from drivers.base import Device
from drivers.events import DeviceEventBase, DeviceOffline
from drivers.rng import SoftwareRng

log = structlog.get_logger(__name__)

Listener = Callable[[Effect], None]

__all__ = ["Daemon", "describe_failure", "wait_for"]


class _Shutdown(Exception):
    """Raised inside the TaskGroup to stop it (a signal or a caller's stop event)."""


@dataclass
class Daemon:
    """One table. ``run`` until ``stop`` is set or SIGTERM/SIGINT arrives; it returns normally.
    The wiring (controller/wiring.py) builds the ``Table`` from the config and the kept state,
    and the services; services that keep state in the journal (``StateKeeper``) save it in the
    transaction of the effect that changed it."""

    config: Config
    journal: Journal
    table: Table
    devices: list[Device] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    clock: Callable[[], datetime] = utc_now
    tick_interval: float = 1.0
    #: How often the journal's free space is looked at (seconds, at a tick).
    disk_check_interval: float = 5.0

    def __post_init__(self) -> None:
        self.queue: asyncio.Queue[TableEvent | CommandItem] = asyncio.Queue()
        self.listeners: list[Listener] = []
        self.outbox_changed = asyncio.Event()
        self.ready = asyncio.Event()
        self.stopping = asyncio.Event()  # set when a stop is asked for, before tasks are cancelled
        self.prefix = self.config.mqtt.topic_prefix
        self.recorder = Recorder(
            table_id=self.config.table.id,
            prefix=self.prefix,
            publishing=self.config.mqtt.enabled,  # an MQTT-off table queues nothing
            keepers=[s for s in self.services if isinstance(s, StateKeeper)],
        )
        limits = self.config.limits
        self.limiter = DeviceLimiter(
            interval=limits.alarm_interval, events_per_minute=limits.device_events_per_minute
        )
        # Space released to record a full disk (docs/faults.md); made again once there is room.
        reserve = (
            None
            if self.journal.path == ":memory:"
            else Reserve(self.config.journal.reserve_path, self.config.journal.reserve_mb * 2**20)
        )
        self.fault_record = FaultRecord(self.journal, reserve, self.clock)
        self.disk = DiskWatch(self.fault_record, self.config.journal.min_free_mb)
        self.tilt = Tilt(
            self.table,
            self.recorder,
            self.fault_record,
            self.disk,
            self.clock,
            self.outbox_changed,
            self._deliver,
        )
        self._healthy = True
        self._draw = _SoftwareDraw(self.table, self.devices)
        self.fault_record.resume(self.table)  # a fault a kill or a power cut left unfinished

    # --- what other parts call (controller/ports.py) ------------------------------------

    def put_nowait(self, event: TableEvent) -> None:
        """The EventSink drivers and services are given."""
        self.queue.put_nowait(event)

    def subscribe(self, listener: Listener) -> None:
        """Hear every effect, after it is journaled. Listeners must not block."""
        self.listeners.append(listener)

    async def submit(
        self, command: Command, timeout: float = 10.0, *, origin: Origin | None = None
    ) -> CommandReply:
        """Hand a command to the table and wait for its reply; ``origin`` is journaled with it."""
        future: asyncio.Future[CommandReply] = asyncio.get_running_loop().create_future()
        await self.queue.put(CommandItem(command, future, origin))
        return await asyncio.wait_for(future, timeout)

    def refused(self, refusal: Refusal) -> None:
        """A command refused before the table: journaled, and alarmed after a few."""
        self.queue.put_nowait(refusal)

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def save_state(self, save: Callable[[Transaction], None]) -> None:
        try:
            with self.journal.transaction(durable=False) as tx:
                save(tx)
        except Exception as exc:  # the next journaled event finds the journal's fault
            log.error("state_save_failed", error=describe_failure(exc))

    def record_own(self, kind: str, payload: Payload) -> int | None:
        try:
            with self.journal.transaction() as tx:
                row = tx.record_event(kind, payload)
                queued = self.recorder.enqueue(tx, payload)
        except Exception as exc:  # the next event finds the journal's fault; no tilt from here
            log.error(f"{kind}_failed", error=describe_failure(exc))
            return None
        if queued:
            self.outbox_changed.set()
        return row

    def panel(self, name: str) -> dict[str, Any] | None:
        """The supervisor panel of the service ``name`` (game protection's), if it runs."""
        for service in self.services:
            panel = getattr(service, "panel", None)
            if service.name == name and callable(panel):
                result: dict[str, Any] = panel()
                return result
        return None

    # --- running ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event | None = None, *, handle_signals: bool = False) -> None:
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        recovered = self.journal.rounds.recover("restart", on_void=self._restart_messages)
        for round_id in recovered:
            log.warning("round_voided_on_restart", table_id=self.config.table.id, round_id=round_id)
        if recovered:
            self.outbox_changed.set()
        try:
            async with asyncio.TaskGroup() as tg:
                self._start_tasks(tg, stop)
                ready(f"table {self.config.table.id} ready")
                self.ready.set()
                log.info("daemon_ready", table_id=self.config.table.id, devices=len(self.devices))
        except* _Shutdown:
            self.stopping.set()  # a stop that was asked for: the TaskGroup ends, run returns
        finally:
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)
                    # Stopping already: a second signal must not kill the process mid-close.
                    signal.signal(sig, signal.SIG_IGN)
            stopping()
            log.info(
                "daemon_stopped",
                table_id=self.config.table.id,
                durable_commits=self.journal.commits.durable,
                relaxed_commits=self.journal.commits.relaxed,
            )

    def _start_tasks(self, tg: asyncio.TaskGroup, stop: asyncio.Event) -> None:
        table_id = self.config.table.id
        tg.create_task(self._consume(), name=f"daemon[{table_id}].consume")
        tg.create_task(self._ticker(), name=f"daemon[{table_id}].tick")
        tg.create_task(watchdog_loop(healthy=lambda: self.healthy), name="watchdog")
        for device in self.devices:
            tg.create_task(self._device(device), name=f"device[{device.name}]")
        for service in self.services:
            tg.create_task(service.run(self), name=f"service[{service.name}]")
        tg.create_task(self._until(stop), name="stop")

    async def _until(self, stop: asyncio.Event) -> None:
        await stop.wait()
        self.stopping.set()
        raise _Shutdown

    async def _device(self, device: Device) -> None:
        """A driver's run loop; one that fails is reported and restarted, never fatal."""
        attempt = 0
        while True:
            try:
                await device.run(self)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a driver bug must not stop the table
                log.exception("device_crashed", device=device.name)
                self.put_nowait(DeviceOffline(device=device.name, reason=f"driver error: {exc}"))
                attempt += 1
                await asyncio.sleep(min(5.0, 0.2 * 2**attempt))

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self.tick_interval)
            self.put_nowait(Tick(self.clock()))

    @property
    def healthy(self) -> bool:
        """False while the consumer fails on a bug: the watchdog is withheld. A table in fault
        (the journal refuses writes) is alive and says so on every path: a restart would only
        find the same disk (docs/faults.md)."""
        return self._healthy

    async def _consume(self) -> None:
        while True:
            item = await self.queue.get()
            try:
                self._handle(item)
            except Exception:
                # A bug (the journal's failures are handled in _handle): report it, go on.
                self._healthy = False
                log.exception("event_failed", item=type(item).__name__)
                if isinstance(item, CommandItem):
                    item.refuse("internal error")
            else:
                self._healthy = True
            if self.queue.empty() and self.table.fault is None:  # nothing waits: the next
                self.table.prepare_snapshot()  # event's rollback point, off its path (issue 42)

    def _handle(self, item: TableEvent | CommandItem) -> None:
        event = item.command if isinstance(item, CommandItem) else item
        now = self.clock()
        if isinstance(event, DeviceEventBase) and not self.limiter.admit(event, now):
            return  # counted; one summary per device and interval (controller/table/limits.py)
        if self.table.fault is not None:
            self.tilt.handle(item, event, now, self._apply)
        else:
            self._apply(item, event)
        if isinstance(event, Tick):
            for summary in self.limiter.flush(now):
                self._handle(summary)
            change = self.disk.check(now, self.disk_check_interval)
            if change is not None:
                self._handle(change)

    def _apply(self, item: TableEvent | CommandItem, event: TableEvent) -> bool:
        """Apply one event: the table's effects are journaled in one transaction, then heard.
        If the journal refuses, the table is rolled back to before the event and goes into its
        fault state (tilt): nothing of the event is shown or sent. True if it was journaled."""
        before = self.table.round_ids()
        snapshot = self.table.snapshot()
        origin = item.origin if isinstance(item, CommandItem) else None
        effects = self.table.handle(
            event, (origin.channel, origin.identity) if origin else ("", "")
        )
        if isinstance(event, Tick) and not effects:
            return True
        try:
            # The event and all it caused, in one transaction (journal before send).
            with self.journal.transaction(durable=durable(event, effects)) as tx:
                queued = self.recorder.record(tx, event, effects, before, origin)
        except Exception as exc:
            self.table.restore(snapshot)
            self.tilt.enter(exc, item, event)
            return False
        if queued:
            self.outbox_changed.set()
        self._deliver(item, effects)
        return True

    # --- after the commit ---------------------------------------------------------------

    def _deliver(self, item: TableEvent | CommandItem | None, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(item, CommandItem) and isinstance(effect, CommandReply):
                item.answer(effect)
            log_effect(self.config.table.id, effect)
            for listener in list(self.listeners):
                try:
                    listener(effect)
                except Exception:
                    log.exception("listener_failed", listener=repr(listener))
            if isinstance(effect, RoundOpened):
                self._draw()

    def _restart_messages(self, voided: VoidedRound) -> list[OutboxMessage]:
        """The message announcing a round voided because the daemon restarted mid-round."""
        message = self.recorder.message(restart_void(voided, self.table.settings))
        return [message] if message is not None else []


class _SoftwareDraw:
    """A table without an RNG box draws the first position in software when a deal opens."""

    def __init__(self, table: Table, devices: list[Device]) -> None:
        self.table = table
        self.rngs = [d for d in devices if isinstance(d, SoftwareRng)]
        self.tasks: set[asyncio.Task[Any]] = set()  # held until done (the loop keeps weak refs)

    def __call__(self) -> None:
        r = self.table.round
        if self.rngs and r is not None and r.draw is None:
            self.tasks.add(task := asyncio.get_running_loop().create_task(self.rngs[0].draw()))
            task.add_done_callback(self.tasks.discard)


def wait_for(condition: Callable[[], bool], event: asyncio.Event) -> Awaitable[None]:
    """Wait until ``condition()`` holds, re-checking whenever ``event`` is set."""

    async def waiter() -> None:
        while not condition():
            event.clear()
            if condition():
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout=0.5)

    return waiter()
