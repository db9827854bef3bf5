"""What a service may use of the table, as narrow interfaces (the daemon provides them all).

A service (the MQTT publisher, the display server, the pole display, the demo's dealer) declares
the ports it needs; the daemon satisfies them structurally, and only the wiring module
(``controller/wiring.py``) knows the daemon. So no service imports the daemon, and the daemon
imports no service:

    EffectSource  hear every effect after it is journaled          (all services)
    CommandSink   hand a command to the table and wait for its reply (MQTT, display)
    EventSink     put an event on the table's queue (drivers; game protection's findings)
    OutboxStore   the journal's outbox (``Outbox``: ids, seqs, pending rows, acks) and its
                  history (``History``: rounds, stats, the file for read-only queries)
    TableView     the table's read-only state (``TableStatus``: settings, status, devices,
                  seats, the round), the config, topics, the clock
    StateStore    kept state written in a transaction of its own (game protection's watch)
    Lifecycle     the daemon is stopping (a stop must never be lost inside a library)

A service that keeps state in the journal is also a ``StateKeeper``: the daemon calls its
``keep(tx, effect)`` inside the transaction that journals each effect (controller/recorder.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from collections.abc import Mapping

    from controller.config import Config
    from controller.journal import Journal, Transaction
    from controller.journal.views import JournalView
    from controller.messages import Command, Payload, StatusPayload
    from controller.table import CommandReply, Effect, Refusal, TableEvent, TableSettings

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


class EventSink(Protocol):
    def put_nowait(self, event: TableEvent) -> None:
        """Queue an event for the table (it is journaled and handled in order)."""
        ...


class OutboxStore(Protocol):
    @property
    def journal(self) -> JournalView:
        """The table's journal as a service sees it: the ``Outbox`` the publisher drains and the
        ``History`` the pages read (controller/journal/views.py), never its write API."""
        ...

    @property
    def outbox_changed(self) -> asyncio.Event:
        """Set whenever a transaction queued a message."""
        ...


class TableStatus(Protocol):
    """The table's state as a service may read it (never change it)."""

    @property
    def settings(self) -> TableSettings: ...

    def status(self) -> StatusPayload: ...

    @property
    def devices(self) -> Mapping[str, bool]: ...

    @property
    def occupied(self) -> Mapping[str, bool | None]: ...

    @property
    def round(self) -> Any:
        """The current round (``round_id``, ``closed``), or None."""
        ...

    @property
    def fault(self) -> Any:
        """The journal fault the table is in, or None."""
        ...


class TableView(Protocol):
    @property
    def config(self) -> Config: ...

    @property
    def table(self) -> TableStatus:
        """Read only: settings, ``status()``, devices, occupied seats, the current round."""
        ...

    @property
    def prefix(self) -> str:
        """The MQTT topic prefix, ending in ``/``."""
        ...

    def topic(self, name: str) -> str: ...

    def clock(self) -> datetime: ...


class StateStore(Protocol):
    def save_state(self, save: Callable[[Transaction], None]) -> None:
        """Run ``save`` in a transaction of its own (not waiting for the disk); a failure is
        logged: the next journaled event finds the journal's fault."""
        ...


class EventRecorder(Protocol):
    def record_own(self, kind: str, payload: Payload) -> int | None:
        """Journal a service's own event (``kind``) with its message, durably, in a transaction
        of its own: the event's row, or None if the journal refused (logged; the next event
        finds the journal's fault)."""
        ...


@runtime_checkable
class StateKeeper(Protocol):
    """A service that keeps state in the journal, saved with the effect that changed it."""

    def keep(self, tx: Transaction, effect: Effect) -> None:
        """Called inside the transaction that journals ``effect``."""
        ...


class PanelSource(Protocol):
    def panel(self, name: str) -> dict[str, Any] | None:
        """The supervisor panel of the service ``name`` (e.g. ``protection``), None if it does
        not run."""
        ...


class Lifecycle(Protocol):
    @property
    def stopping(self) -> asyncio.Event:
        """Set when a stop was asked for, before the services are cancelled."""
        ...


class PublisherHost(EffectSource, CommandSink, OutboxStore, TableView, Lifecycle, Protocol):
    """What the MQTT publisher uses."""


class DisplayHost(EffectSource, CommandSink, OutboxStore, TableView, PanelSource, Protocol):
    """What the display server uses."""


class Host(
    EffectSource,
    CommandSink,
    EventSink,
    OutboxStore,
    TableView,
    StateStore,
    EventRecorder,
    PanelSource,
    Lifecycle,
    Protocol,
):
    """Every port: what the daemon hands each service it runs."""

    @property
    def journal(self) -> Journal:
        """The journal itself: the daemon's (retention, which archives, needs its write API)."""
        ...


class Service(Protocol):
    """Something the daemon runs beside the devices (MQTT publisher, display server, pole)."""

    name: str

    async def run(self, host: Host) -> None: ...


class PortInUse(OSError):
    """A listening port a service needs at start is taken (``paigow-table run`` exits 69)."""


@runtime_checkable
class PortClaimer(Protocol):
    """A service that listens: ``claim`` binds its port before the daemon starts (so a port in
    use stops the start with one line, never a daemon without its page), raising
    :class:`PortInUse`; ``run`` then serves on the socket it holds."""

    def claim(self, config: Config) -> None: ...
