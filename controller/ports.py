"""What a service may use of the table, as narrow interfaces (the daemon provides them all).

A service (the MQTT publisher, the display server, the pole display, the demo's dealer) declares
the ports it needs; the daemon satisfies them structurally, and only the wiring module
(``controller/wiring.py``) knows the daemon. So no service imports the daemon, and the daemon
imports no service:

    EffectSource  hear every effect after it is journaled          (all services)
    CommandSink   hand a command to the table and wait for its reply (MQTT, display)
    OutboxStore   the journal: outbox, ids and sequence numbers, history queries
    TableView     the table's read-only state: settings, status, devices, seats, the round
    Lifecycle     the daemon is stopping (a stop must never be lost inside a library)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from controller.config import Config
    from controller.game_protection import ProtectionMonitor
    from controller.journal import Journal
    from controller.messages import Command
    from controller.table import CommandReply, Effect, Refusal, Table

Listener = Callable[["Effect"], None]


class EffectSource(Protocol):
    def subscribe(self, listener: Listener) -> None:
        """Hear every effect, after it is journaled. Listeners must not block."""
        ...


@dataclass(frozen=True, slots=True)
class Origin:
    """Who sent a command, journaled with it (docs/audit.md): the channel (``kiosk`` for the
    dealer page on the table computer, ``display`` from elsewhere, ``mqtt``, ``cli``) and an
    identity within it (the client's address, the command topic, …)."""

    channel: str
    identity: str = ""


class CommandSink(Protocol):
    async def submit(
        self, command: Command, timeout: float = 10.0, *, origin: Origin | None = None
    ) -> CommandReply:
        """Hand a command to the table and wait for its reply."""
        ...

    def refused(self, refusal: Refusal) -> None:
        """Journal a command refused before it reached the table (a wrong PIN, a bad
        signature, over the rate); the table alarms when one source keeps failing."""
        ...


class OutboxStore(Protocol):
    @property
    def journal(self) -> Journal:
        """The table's journal: the outbox to drain, message ids and seqs, round history."""
        ...

    @property
    def outbox_changed(self) -> asyncio.Event:
        """Set whenever a transaction queued a message."""
        ...


class TableView(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def table(self) -> Table:
        """Read only: settings, ``status()``, devices, occupied seats, the current round."""
        ...

    @property
    def protection(self) -> ProtectionMonitor | None:
        """Read only: game protection's watch (its ``panel()``), None when it is off."""
        ...

    @property
    def prefix(self) -> str:
        """The MQTT topic prefix, ending in ``/``."""
        ...

    def topic(self, name: str) -> str: ...

    def clock(self) -> datetime: ...


class Lifecycle(Protocol):
    @property
    def stopping(self) -> asyncio.Event:
        """Set when a stop was asked for, before the services are cancelled."""
        ...


class PublisherHost(EffectSource, CommandSink, OutboxStore, TableView, Lifecycle, Protocol):
    """What the MQTT publisher uses."""


class DisplayHost(EffectSource, CommandSink, OutboxStore, TableView, Protocol):
    """What the display server uses."""


class Host(EffectSource, CommandSink, OutboxStore, TableView, Lifecycle, Protocol):
    """Every port: what the daemon hands each service it runs."""


class Service(Protocol):
    """Something the daemon runs beside the devices (MQTT publisher, display server, pole)."""

    name: str

    async def run(self, host: Host) -> None: ...
