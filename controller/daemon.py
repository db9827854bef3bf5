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
import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from controller import __version__
from controller.clock import iso, utc_now
from controller.clock_sync import clock_synchronized
from controller.config import Config, ConfigError, ConfigIssue
from controller.fault_record import FaultRecord
from controller.game.paytables import chan_chu_paytable, envy_paytable, jacks_beat_paytable
from controller.journal import Journal, OutboxMessage, Transaction, VoidedRound
from controller.journal.checkpoints import read_hex_key, sign_checkpoint
from controller.journal.reserve import Reserve
from controller.kept_state import (
    DEALER_KEY,
    LATCHED_KEY,
    PROTECTION_KEY,
    SEATS_KEY,
    latched_at_start,
)
from controller.logging import bind_round, unbind_round
from controller.messages import (
    CheckpointPayload,
    Command,
    EnterDice,
    Payload,
    Problem,
    RoundPayload,
    StatusRequest,
    envelope,
)
from controller.ports import Origin, Service
from controller.software import SoftwareCheck
from controller.systemd import ready, stopping, watchdog_loop
from controller.table import (
    AlarmAcknowledged,
    AlarmRaised,
    ClockSync,
    CommandReply,
    DealRecorded,
    DeviceChanged,
    DiskSpace,
    Effect,
    FaultCleared,
    JournalRecovered,
    NoiseSummary,
    PlayerSettled,
    ProtectionAlarmed,
    ProtectionFinding,
    Refusal,
    RoundClosed,
    RoundOpened,
    RoundProgress,
    StatusChanged,
    Table,
    TableEvent,
    TableSettings,
    Tick,
)
from controller.table.limits import DeviceLimiter
from drivers.base import Device
from drivers.events import DeviceEventBase, DeviceOffline, PositionDrawn
from drivers.rng import SoftwareRng

if TYPE_CHECKING:
    from controller.game_protection import ProtectionMonitor

log = structlog.get_logger(__name__)

Listener = Callable[[Effect], None]
#: Rounds between two saves of game protection's state (every alarm and reset saves it too):
#: after a crash, the rounds since are observed again from the journal.
PROTECTION_SAVE_EVERY = 25
#: While in fault, how often a changed count of lost events is re-announced (status, page).
FAULT_STATUS_S = 5.0


def describe_failure(exc: BaseException) -> str:
    """A journal failure in a few words for the dealer, the status and the log."""
    if isinstance(exc, sqlite3.Error | OSError):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


@dataclass
class _CommandItem:
    command: Command
    reply: asyncio.Future[CommandReply]
    origin: Origin | None = None


class _Shutdown(Exception):
    """Raised inside the TaskGroup to stop it (a signal or a caller's stop event)."""


def table_settings(config: Config) -> TableSettings:
    p = config.paytables
    return TableSettings(
        table_id=config.table.id,
        seats=dict(config.table.seats),
        rules=config.rules.to_rules(),
        chan_chu=chan_chu_paytable(p.chan_chu),
        jacks_beat=jacks_beat_paytable(p.jacks_beat),
        envy=envy_paytable(p.chan_chu) if p.envy else None,
    )


@dataclass
class Daemon:
    """One table. ``run`` until ``stop`` is set or SIGTERM/SIGINT arrives; it returns normally."""

    config: Config
    journal: Journal
    devices: list[Device] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)
    clock: Callable[[], datetime] = utc_now
    tick_interval: float = 1.0
    config_digest: str = ""
    software: SoftwareCheck | None = None  # the start's check of the installed files
    #: How often the journal's free space is looked at (seconds, at a tick).
    disk_check_interval: float = 5.0
    #: Whether a time service synchronises the clock (controller/clock_sync.py); tests inject.
    clock_probe: Callable[[], bool | None] = clock_synchronized

    def __post_init__(self) -> None:
        self.table = Table(
            table_settings(self.config),
            new_round_id=self.journal.new_round_id,
            clock=self.clock,
            next_round_seq=self.journal.next_round_seq(),
            software_version=__version__,
            config_digest=self.config_digest,
            recent_deals=self.journal.recent_deals(),
            software_digest=self.software.digest if self.software else "",
            software_verified=self.software.verified if self.software else None,
            new_alarm_id=lambda: f"alarm-{self.journal.new_round_id()}",
        )
        self.table.refusals_before_alarm = self.config.limits.refusals_before_alarm
        # Unacknowledged critical alarms and the dealer signed in survive a restart.
        self.table.restore_latched(latched_at_start(self.journal, self.clock, describe_failure))
        dealer = self.journal.remembered(DEALER_KEY)
        self.table.dealer_id = dealer if isinstance(dealer, str) and dealer else None
        self.queue: asyncio.Queue[TableEvent | _CommandItem] = asyncio.Queue()
        self.listeners: list[Listener] = []
        self.outbox_changed = asyncio.Event()
        self.ready = asyncio.Event()
        self.stopping = asyncio.Event()  # set when a stop is asked for, before tasks are cancelled
        self.prefix = self.config.mqtt.topic_prefix
        # An MQTT-off table queues nothing: nobody would ever drain the outbox.
        self.publishing = self.config.mqtt.enabled
        limits = self.config.limits
        self.limiter = DeviceLimiter(
            interval=limits.alarm_interval, events_per_minute=limits.device_events_per_minute
        )
        self._disk_checked: datetime | None = None
        self._disk_low = False
        self._clock_checked: datetime | None = None
        self._fault_announced: tuple[datetime, int] | None = None
        # Space released to record a full disk (docs/faults.md); made again once there is room.
        reserve = (
            None
            if self.journal.path == ":memory:"
            else Reserve(self.config.journal.reserve_path, self.config.journal.reserve_mb * 2**20)
        )
        self.fault_record = FaultRecord(self.journal, reserve, self.clock)
        self._healthy = True
        self._software_rngs = [d for d in self.devices if isinstance(d, SoftwareRng)]
        # The dealer's occupied seats survive a restart (an empty seat must not be paid again).
        occupied = self.journal.remembered(SEATS_KEY)
        if isinstance(occupied, dict):
            self.table.occupied.update(
                {k: v for k, v in occupied.items() if k in self.table.occupied}
            )
        self._draw_tasks: set[asyncio.Task[Any]] = set()
        self.protection: ProtectionMonitor | None = None
        if self.config.protection.enabled:
            from controller.game_protection import ProtectionMonitor

            self.protection = ProtectionMonitor(
                self.config.protection, self.journal.remembered(PROTECTION_KEY)
            )
        self._checkpoint_key: bytes | None = None
        self._checkpointed: tuple[datetime, int] | None = None  # when, and the checkpoint's row
        key_file = self.config.mqtt.checkpoint_key_file
        if key_file is not None and self.publishing:
            try:
                self._checkpoint_key = read_hex_key(key_file)
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    [ConfigIssue(str(key_file), "mqtt.checkpoint_key_file", str(exc))]
                ) from None
        self._resume_fault()

    def _resume_fault(self) -> None:
        """A fault the journal recorded but never saw end (a kill or a power cut during it):
        the table starts in it, with the deals seen meanwhile, and ends it as any fault, voiding
        them (its alarm is among the latched ones already)."""
        unfinished = self.fault_record.unfinished()
        if unfinished is None:
            return
        since, detail, deals = unfinished
        effects = self.table.enter_fault(f"{detail} (before the restart)", since)
        for effect in effects:  # its alarm was journaled when it began
            if isinstance(effect, AlarmRaised):
                self.table.latched.pop(effect.payload.alarm_id, None)
        fault = self.table.fault
        if fault is not None:
            fault.deals.extend(deals)
            fault.events_lost += len(deals)
            fault.by_kind["deal_seen_in_fault"] += len(deals)
        log.warning("journal_fault_resumed", since=iso(since), deals=len(deals))

    # --- what other parts call ----------------------------------------------------------

    def put_nowait(self, event: TableEvent) -> None:
        """The EventSink drivers are given."""
        self.queue.put_nowait(event)

    def subscribe(self, listener: Listener) -> None:
        """Hear every effect, after it is journaled. Listeners must not block."""
        self.listeners.append(listener)

    async def submit(
        self, command: Command, timeout: float = 10.0, *, origin: Origin | None = None
    ) -> CommandReply:
        """Hand a command to the table and wait for its reply; ``origin`` is journaled with it."""
        future: asyncio.Future[CommandReply] = asyncio.get_running_loop().create_future()
        await self.queue.put(_CommandItem(command, future, origin))
        return await asyncio.wait_for(future, timeout)

    def refused(self, refusal: Refusal) -> None:
        """A command refused before the table: journaled, and alarmed after a few."""
        self.queue.put_nowait(refusal)

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"

    # --- running ------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event | None = None, *, handle_signals: bool = False) -> None:
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
        recovered = self.journal.recover("restart", on_void=self._restart_messages)
        for round_id in recovered:
            log.warning("round_voided_on_restart", table_id=self.config.table.id, round_id=round_id)
        if recovered:
            self.outbox_changed.set()
        if self.protection is not None:
            for finding in self.protection.replay(self.journal, self.clock()):
                self.queue.put_nowait(finding)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._consume(), name=f"daemon[{self.config.table.id}].consume")
                tg.create_task(self._ticker(), name=f"daemon[{self.config.table.id}].tick")
                tg.create_task(watchdog_loop(healthy=lambda: self.healthy), name="watchdog")
                for device in self.devices:
                    tg.create_task(self._device(device), name=f"device[{device.name}]")
                for service in self.services:
                    tg.create_task(service.run(self), name=f"service[{service.name}]")
                tg.create_task(self._until(stop), name="stop")
                ready(f"table {self.config.table.id} ready")
                self.ready.set()
                log.info("daemon_ready", table_id=self.config.table.id, devices=len(self.devices))
        except* _Shutdown:
            pass
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
                durable_commits=self.journal.durable_commits,
                relaxed_commits=self.journal.relaxed_commits,
            )

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
                if isinstance(item, _CommandItem) and not item.reply.done():
                    item.reply.set_result(
                        CommandReply(
                            item.command.request_id, item.command.kind, False, "internal error"
                        )
                    )
            else:
                self._healthy = True

    def _handle(self, item: TableEvent | _CommandItem) -> None:
        event = item.command if isinstance(item, _CommandItem) else item
        now = self.clock()
        if isinstance(event, DeviceEventBase) and not self.limiter.admit(event, now):
            return  # counted; one summary per device and interval (controller/table/limits.py)
        if self.table.fault is not None:
            self._handle_in_fault(item, event, now)
        else:
            self._apply(item, event)
        if isinstance(event, Tick):
            for summary in self.limiter.flush(now):
                self._handle(summary)
            self._check_disk(now)
            self._check_clock(now)
            self._checkpoint(now)

    def _apply(self, item: TableEvent | _CommandItem, event: TableEvent) -> bool:
        """Apply one event: the table's effects are journaled in one transaction, then heard.
        If the journal refuses, the table is rolled back to before the event and goes into its
        fault state (tilt): nothing of the event is shown or sent. True if it was journaled."""
        before = self.table.round
        open_before = before.round_id if before is not None and not before.closed else None
        snapshot = self.table.snapshot()
        origin = item.origin if isinstance(item, _CommandItem) else None
        effects = self.table.handle(
            event, (origin.channel, origin.identity) if origin else ("", "")
        )
        if isinstance(event, Tick) and not effects:
            return True
        try:
            self._journal(event, effects, open_before, origin)
        except Exception as exc:
            self.table.restore(snapshot)
            self._enter_fault(exc, item, event)
            return False
        self._deliver(item, effects)
        return True

    def _enter_fault(
        self, exc: Exception, item: TableEvent | _CommandItem, event: TableEvent
    ) -> None:
        detail = describe_failure(exc)
        first = self.table.fault is None
        effects = self.table.enter_fault(detail, self.clock())
        if isinstance(event, JournalRecovered):
            return  # a failed probe: still in fault, nothing new to say
        if first:
            log.critical(
                "journal_write_failed",
                error=detail,
                during=getattr(event, "kind", type(event).__name__),
                hint="the table shows TABLE FAULT and settles nothing until the journal works",
            )
            self._fault_announced = (self.clock(), 0)
            self._record_fault(detail, effects)
        self._lost(event)
        self._refuse(item, detail)
        self._deliver(item, effects)

    def _record_fault(self, detail: str, effects: list[Effect]) -> None:
        """The fault on file at once, whatever happens next (a kill, a power cut, a restart on
        a disk still full): with the reserve's space, the fault, its latched alarm and the
        disk's state (docs/faults.md)."""
        alarms = [e.payload for e in effects if isinstance(e, AlarmRaised)]

        def also(tx: Transaction, free_mb: int | None) -> None:
            for alarm in alarms:
                tx.record_event("alarm", alarm, alarm.round_id)
                if self.publishing:
                    tx.enqueue(self.topic(alarm.TOPIC), self._builder(alarm))
            tx.remember(
                LATCHED_KEY, [a.model_dump(mode="json") for a in self.table.latched.values()]
            )
            threshold = self.config.journal.min_free_mb
            if free_mb is not None and free_mb < threshold and not self._disk_low:
                self._disk_low = True  # disk_space_ok is said when the space is back
                tx.record_event(
                    "disk_space", {"free_mb": free_mb, "threshold_mb": threshold, "low": True}
                )

        fault = self.table.fault
        if self.fault_record.began(detail, fault.since if fault else self.clock(), also):
            self.outbox_changed.set()

    def _lost(self, event: TableEvent) -> None:
        """An event the fault kept from the table; a deal seen on the line goes on file."""
        fault = self.table.fault
        before = len(fault.deals) if fault is not None else 0
        self.table.lost(event)
        if fault is not None and len(fault.deals) > before:
            self.fault_record.deal_seen(fault.deals[-1])

    def _handle_in_fault(
        self, item: TableEvent | _CommandItem, event: TableEvent, now: datetime
    ) -> None:
        if isinstance(event, Tick):
            if self.fault_record.room_to_recover() and self._apply(item, JournalRecovered(now)):
                log.warning("journal_recovered", table_id=self.config.table.id)
                self._fault_announced = None
                self.fault_record.on_file = False
            else:
                self._announce_fault(now)
            return
        if isinstance(event, StatusRequest):
            self._deliver(
                item,
                [
                    CommandReply(
                        event.request_id,
                        event.kind,
                        True,
                        data=self.table.status().model_dump(mode="json"),
                    )
                ],
            )
            return
        self._lost(event)
        fault = self.table.fault
        self._refuse(item, fault.detail if fault is not None else "")

    def _announce_fault(self, now: datetime) -> None:
        """While in fault, a changed count of lost events goes out now and then (not per event)."""
        fault = self.table.fault
        if fault is None:
            return
        last_at, last_count = self._fault_announced or (now, -1)
        if fault.events_lost != last_count and (
            last_count < 0 or (now - last_at).total_seconds() >= FAULT_STATUS_S
        ):
            self._fault_announced = (now, fault.events_lost)
            self._deliver(None, [StatusChanged(self.table.status())])

    def _refuse(self, item: TableEvent | _CommandItem | None, detail: str) -> None:
        if isinstance(item, _CommandItem) and not item.reply.done():
            item.reply.set_result(
                CommandReply(
                    item.command.request_id,
                    item.command.kind,
                    False,
                    f"table fault: the journal cannot be written ({detail}); nothing was changed",
                )
            )

    def _deliver(self, item: TableEvent | _CommandItem | None, effects: list[Effect]) -> None:
        for effect in effects:
            if (
                isinstance(item, _CommandItem)
                and isinstance(effect, CommandReply)
                and not item.reply.done()
            ):
                item.reply.set_result(effect)
            self._log(effect)
            for listener in list(self.listeners):
                try:
                    listener(effect)
                except Exception:
                    log.exception("listener_failed", listener=repr(listener))
            if isinstance(effect, RoundOpened):
                self._draw_if_needed()
            elif isinstance(effect, RoundClosed):
                # Every close anchored outside the table: the casino's copy proves the tail.
                self._checkpoint(self.clock(), every_round=True)
                if self.protection is not None:
                    self._protect(effect.payload)

    def _check_clock(self, now: datetime) -> None:
        """Every minute: is a time service synchronising the clock? A change is an event (an
        alarm when it stops; docs/operations.md, Time)."""
        if not self.config.table.time_sync:
            return
        if self._clock_checked is not None and (now - self._clock_checked).total_seconds() < 60:
            return
        self._clock_checked = now
        state = self.clock_probe()
        if state is not None and state != self.table.clock_synchronized:
            self._handle(ClockSync(synchronized=state))

    def _check_disk(self, now: datetime) -> None:
        """Alarm when the journal's filesystem runs low, long before SQLite reports it full."""
        if self.journal.path == ":memory:":
            return
        if self._disk_checked is not None and (
            (now - self._disk_checked).total_seconds() < self.disk_check_interval
        ):
            return
        self._disk_checked = now
        free_mb = self.fault_record.free_mb()
        if free_mb is None:
            log.warning("disk_space_unknown", path=self.journal.path)
            return
        threshold = self.config.journal.min_free_mb
        # Hysteresis: back to normal only 10 % above the threshold, so it does not flap.
        low = free_mb < threshold if not self._disk_low else free_mb < threshold * 1.1
        if low != self._disk_low:
            self._disk_low = low
            self._handle(DiskSpace(free_mb=int(free_mb), threshold_mb=threshold, low=low))

    def _protect(self, payload: RoundPayload) -> None:
        """Game protection sees the settled round once it is journaled; its findings come back
        as events, after the round's own (docs/protection.md)."""
        monitor = self.protection
        if monitor is None or payload.status != "settled":
            return
        try:
            findings = monitor.observe(payload, self.clock())
        except Exception:  # a bug in the watch must not stop the table: say so, deal on
            log.exception("protection_failed", round_id=payload.round_id)
            return
        for finding in findings:
            self.queue.put_nowait(finding)
        if not findings and monitor.unsaved >= PROTECTION_SAVE_EVERY:
            try:
                with self.journal.transaction(durable=False) as tx:
                    tx.remember(PROTECTION_KEY, monitor.state())
            except Exception as exc:  # the next journaled event finds the journal's fault
                log.error("protection_save_failed", error=describe_failure(exc))

    def _checkpoint(self, now: datetime, *, every_round: bool = False) -> None:
        """A signed checkpoint of the hash chain on MQTT (docs/audit.md) at every round's close
        and now and then between: the casino keeps anchors the table cannot rewrite, up to the
        last round closed. Only when events came since the last."""
        key = self._checkpoint_key
        if key is None or self.table.fault is not None:
            return
        last = self._checkpointed
        if (
            not every_round
            and last is not None
            and (now - last[0]).total_seconds() < self.config.mqtt.checkpoint_interval
        ):
            return
        position = self.journal.chain_position()
        if position is None or (last is not None and position[0] == last[1]):
            return
        body: dict[str, Any] = {
            "table_id": self.config.table.id,
            "event_id": position[0],
            "chain": position[1],
            "made_at": iso(now, "microseconds"),
        }
        key_file = self.config.mqtt.checkpoint_key_file
        payload = CheckpointPayload(
            **body,
            key_id=key_file.name if key_file is not None else "",
            hmac=sign_checkpoint(key, body),
        )
        try:
            with self.journal.transaction() as tx:
                row = tx.record_event("checkpoint", payload)
                tx.enqueue(self.topic(payload.TOPIC), self._builder(payload))
        except Exception as exc:  # the next event finds the journal's fault; no tilt from here
            log.error("checkpoint_failed", error=describe_failure(exc))
            return
        self._checkpointed = (now, row)  # its own row: nothing new until another event
        self.outbox_changed.set()

    def _draw_if_needed(self) -> None:
        """A table without an RNG box draws the first position in software when a deal opens."""
        r = self.table.round
        if self._software_rngs and r is not None and r.draw is None:
            rng = self._software_rngs[0]
            self._draw_tasks.add(task := asyncio.get_running_loop().create_task(rng.draw()))
            task.add_done_callback(self._draw_tasks.discard)

    # --- the journal --------------------------------------------------------------------

    def _builder(self, payload: Payload) -> Callable[[Any], dict[str, Any]]:
        table_id = self.config.table.id

        def build(stamp: Any) -> dict[str, Any]:
            return envelope(
                payload, msg_id=stamp.msg_id, table_id=table_id, seq=stamp.seq, time=stamp.time
            )

        return build

    def _journal(
        self,
        event: TableEvent,
        effects: Sequence[Effect],
        open_before: str | None,
        origin: Origin | None = None,
    ) -> None:
        """The event and all it caused, in one transaction (docs/architecture.md: journal before
        send). An MQTT-off table journals no outbox rows."""
        queued = False
        publishing = self.publishing
        # Durable before anything is shown or sent: what opens or closes a round, queues a
        # message, answers a command or raises an alarm. A device event that only moves the deal
        # on (a packet, a card, a draw held for the next deal) commits without waiting for the
        # disk: a restart voids an open round anyway, and the next durable commit syncs it too.
        durable = not isinstance(event, DeviceEventBase | Tick) or any(
            not isinstance(e, RoundProgress) for e in effects
        )
        with self.journal.transaction(durable=durable) as tx:
            for effect in effects:
                match effect:
                    case RoundOpened():
                        tx.open_round(effect.round_id, effect.round_seq)
                        if effect.draw is not None:  # drawn before the deal: now this round's
                            tx.record_event("position_assigned", effect.draw, effect.round_id)
                    case RoundClosed(payload=p):
                        messages = (
                            [OutboxMessage(self.topic(p.topic), self._builder(p))]
                            if publishing
                            else []
                        )
                        reason = "; ".join(r.code for r in p.reasons) or None
                        if effect.revises_settled:
                            tx.void_settled_round(p.round_id, reason or "void", p, messages)
                        else:
                            tx.close_round(p.round_id, p.status, reason, p, messages)
                        queued = publishing
                    case PlayerSettled(payload=p):
                        tx.record_event("player_settled", p, p.round_id)
                        if publishing:
                            tx.enqueue(self.topic(p.TOPIC), self._builder(p), round_id=p.round_id)
                            queued = True
                    case AlarmRaised(payload=p):
                        tx.record_event("alarm", p, p.round_id)  # the supervisor's alarm history
                        if publishing:
                            tx.enqueue(self.topic(p.TOPIC), self._builder(p))
                            queued = True
                    case CommandReply(ok=True, command="set_seats"):
                        tx.remember(SEATS_KEY, self.table.occupied)
                    case CommandReply(ok=True, command="sign_in" | "sign_out"):
                        tx.remember(DEALER_KEY, self.table.dealer_id or "")
                    case AlarmAcknowledged(payload=p):
                        tx.record_event("alarm_acknowledged", p, None)
                        if p.code == "game_protection" and self.protection is not None:
                            self.protection.acknowledged(p.alarm_id, p.acknowledged_at)
                            tx.remember(PROTECTION_KEY, self.protection.state())
                        if publishing:
                            tx.enqueue(self.topic(p.TOPIC), self._builder(p))
                            queued = True
                    case DeviceChanged(payload=p):
                        if publishing:
                            tx.enqueue(
                                self.topic(f"device/{p.device}"), self._builder(p), retain=True
                            )
                            queued = True
                    case ProtectionAlarmed(payload=p):
                        if self.protection is not None:
                            self.protection.alarmed(p.alarm_id, p.test)
                            tx.remember(PROTECTION_KEY, self.protection.state())
                        if publishing:
                            tx.enqueue(self.topic(p.TOPIC), self._builder(p))
                            queued = True
                    case DealRecorded():
                        tx.record_event(
                            "deal_seen",
                            {"shuffle_id": effect.shuffle_id, "fingerprint": effect.fingerprint},
                            effect.round_id,
                        )
                    case FaultCleared(record=record):
                        tx.record_event("journal_fault", record)
            if any(
                isinstance(e, AlarmAcknowledged)
                or (isinstance(e, AlarmRaised) and e.payload.ack_required)
                for e in effects
            ):
                tx.remember(
                    LATCHED_KEY, [a.model_dump(mode="json") for a in self.table.latched.values()]
                )
            r = self.table.round
            round_id = r.round_id if r is not None else None
            if isinstance(event, PositionDrawn | EnterDice):
                # A draw belongs to the deal it was made in; made between deals it is held for
                # the next one and journaled under it as position_assigned.
                round_id = open_before
            if isinstance(event, Tick):
                tx.record_event("tick", {"now": iso(event.now, "microseconds")}, round_id)
            elif isinstance(event, DeviceEventBase):
                tx.record_event(event.kind, event, round_id)
            elif isinstance(event, ProtectionFinding):
                tx.record_event(event.kind, event.finding, None)
            elif isinstance(event, NoiseSummary | DiskSpace | ClockSync | Refusal):
                tx.record_event(event.kind, event.record(), open_before)
            elif isinstance(event, JournalRecovered):
                pass  # journaled as its FaultCleared record
            else:
                tx.record_event(
                    f"command.{event.kind}", _command_record(event, effects, origin), round_id
                )
        if queued:
            self.outbox_changed.set()

    def _restart_messages(self, voided: VoidedRound) -> list[OutboxMessage]:
        """The message announcing a round voided because the daemon restarted mid-round."""
        opened = datetime.fromisoformat(voided.opened_at)
        closed = datetime.fromisoformat(voided.closed_at)
        payload = RoundPayload(
            round_id=voided.round_id,
            round_seq=voided.seq,
            status="void",
            reasons=[
                Problem(
                    code="restart", detail="the controller restarted mid-round; the round is void"
                )
            ],
            opened_at=opened,
            closed_at=closed,
            rules=table_settings(self.config).describe_rules(),
            paytables=table_settings(self.config).describe_paytables(),
        )
        if not self.publishing:
            return []
        return [OutboxMessage(self.topic(payload.topic), self._builder(payload))]

    def _log(self, effect: Effect) -> None:
        table_id = self.config.table.id
        match effect:
            case RoundOpened():
                bind_round(table_id, effect.round_id)
                log.info("round_opened", round_seq=effect.round_seq, shuffle_id=effect.shuffle_id)
            case RoundClosed(payload=p):
                setting = p.dealer.setting if p.dealer else None
                log.info(
                    "round_closed",
                    round_id=p.round_id,
                    status=p.status,
                    reasons=[r.code for r in p.reasons],
                    rule=setting.rule if setting else None,
                    two_jacks=p.dealer.two_jacks if p.dealer else None,
                )
                unbind_round()
            case AlarmRaised(payload=p):
                # A critical alarm is critical in the journal too (journalctl -p crit finds it).
                emit = log.critical if p.severity == "critical" else log.warning
                emit("alarm", code=p.code, severity=p.severity, detail=p.detail, device=p.device)
            case _:
                pass


def _command_record(
    command: Command, effects: Sequence[Effect], origin: Origin | None
) -> dict[str, Any]:
    """A command as journaled: its fields, who sent it and what came of it (docs/audit.md)."""
    reply = next((e for e in effects if isinstance(e, CommandReply)), None)
    return {
        **command.model_dump(mode="json"),
        "origin": {"channel": origin.channel, "identity": origin.identity} if origin else None,
        "outcome": {"ok": reply.ok, "error": reply.error} if reply else None,
    }


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
