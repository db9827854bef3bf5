"""The journal fault, as the daemon lives it (tilt; docs/faults.md): the moment the journal
refuses a write, each event while it refuses, and the tick that finds it working again.

The daemon hands an event here instead of to the table once the table is in fault. What the
fault keeps from the table is counted (and a deal seen on the line goes on file through the
``FaultRecord``), a command is refused with the reason, a status request is still answered, and
the count of lost events is re-announced now and then. Nothing here writes a round: the table
settles nothing until a ``JournalRecovered`` is journaled.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

import structlog

from controller.fault_record import DiskWatch, FaultRecord
from controller.journal import Transaction
from controller.kept_state import save_latched
from controller.messages import Command, StatusRequest
from controller.ports import Origin
from controller.recorder import Recorder
from controller.table import (
    AlarmRaised,
    CommandReply,
    Effect,
    JournalRecovered,
    StatusChanged,
    Table,
    TableEvent,
    Tick,
)

log = structlog.get_logger(__name__)

#: While in fault, how often a changed count of lost events is re-announced (status, page).
FAULT_STATUS_S = 5.0


def describe_failure(exc: BaseException) -> str:
    """A journal failure in a few words for the dealer, the status and the log."""
    if isinstance(exc, sqlite3.Error | OSError):
        return str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {exc}"


@dataclass
class CommandItem:
    """A command on the daemon's queue, with the future its caller waits on for the reply."""

    command: Command
    reply: asyncio.Future[CommandReply]
    origin: Origin | None = None

    def answer(self, reply: CommandReply) -> None:
        if not self.reply.done():
            self.reply.set_result(reply)

    def refuse(self, why: str) -> None:
        self.answer(CommandReply(self.command.request_id, self.command.kind, False, why))


Item = TableEvent | CommandItem
#: After the journal's commit: the effects to the command's caller and every listener.
Deliver = Callable[[Item | None, list[Effect]], None]
#: One event applied and journaled (the daemon's path); True if it was journaled.
Apply = Callable[[Item, TableEvent], bool]


@dataclass
class Tilt:
    """Entering the fault, living in it, and leaving it. ``changed`` is set when a message was
    queued in the outbox (the fault's alarm); ``deliver`` is the daemon's, after a commit."""

    table: Table
    recorder: Recorder
    record: FaultRecord
    disk: DiskWatch
    clock: Callable[[], datetime]
    changed: asyncio.Event
    deliver: Deliver
    #: When the lost events' count last went out, and that count (None: not in fault).
    announced: tuple[datetime, int] | None = None

    def enter(self, exc: Exception, item: Item, event: TableEvent) -> None:
        """The journal refused ``event``'s transaction (the table is already rolled back)."""
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
            self.announced = (self.clock(), 0)
            self._on_file(detail, effects)
        self._lost(event)
        _refuse(item, detail)
        self.deliver(item, effects)

    def handle(self, item: Item, event: TableEvent, now: datetime, apply: Apply) -> None:
        """An event while in fault: a tick tries to recover (through ``apply``), a status
        request is answered, anything else is lost (counted) and a command refused."""
        if isinstance(event, Tick):
            if self.record.room_to_recover() and apply(item, JournalRecovered(now)):
                log.warning("journal_recovered", table_id=self.recorder.table_id)
                self.announced = None
                self.record.on_file = False
            else:
                self._announce(now)
            return
        if isinstance(event, StatusRequest):
            status = self.table.status().model_dump(mode="json")
            self.deliver(item, [CommandReply(event.request_id, event.kind, True, data=status)])
            return
        self._lost(event)
        fault = self.table.fault
        _refuse(item, fault.detail if fault is not None else "")

    def _on_file(self, detail: str, effects: list[Effect]) -> None:
        """The fault on file at once, whatever happens next (a kill, a power cut, a restart on
        a disk still full): with the reserve's space, the fault, its latched alarm and the
        disk's state (docs/faults.md)."""
        alarms = [e.payload for e in effects if isinstance(e, AlarmRaised)]

        def also(tx: Transaction, free_mb: int | None) -> None:
            for alarm in alarms:
                tx.record_event("alarm", alarm, alarm.round_id)
                self.recorder.enqueue(tx, alarm)
            save_latched(tx, self.table.latched)
            self.disk.record_low(tx, free_mb)

        fault = self.table.fault
        if self.record.began(detail, fault.since if fault else self.clock(), also):
            self.changed.set()

    def _lost(self, event: TableEvent) -> None:
        """An event the fault kept from the table; a deal seen on the line goes on file."""
        fault = self.table.fault
        before = len(fault.deals) if fault is not None else 0
        self.table.lost(event)
        if fault is not None and len(fault.deals) > before:
            self.record.deal_seen(fault.deals[-1])

    def _announce(self, now: datetime) -> None:
        """While in fault, a changed count of lost events goes out now and then (not per event)."""
        fault = self.table.fault
        if fault is None:
            return
        last_at, last_count = self.announced or (now, -1)
        if fault.events_lost != last_count and (
            last_count < 0 or (now - last_at).total_seconds() >= FAULT_STATUS_S
        ):
            self.announced = (now, fault.events_lost)
            self.deliver(None, [StatusChanged(self.table.status())])


def _refuse(item: Item | None, detail: str) -> None:
    if isinstance(item, CommandItem):
        item.refuse(f"table fault: the journal cannot be written ({detail}); nothing was changed")
