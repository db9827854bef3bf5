"""The round state machine of docs/rules.md §6: (state, event) → (state, [effects]). No I/O.

The daemon feeds it device events (drivers/events.py), commands (controller/messages.py) and
clock ticks, and carries out the effects it returns: journal writes, MQTT messages, the display.

``Table`` is the coordinator: it hands each event to the part that knows it (``rounds``,
``floor``, ``alarms``, ``health``), checks a round-scoped command's round once
(``scope``), reports the status, holds the journal fault (tilt) and snapshots its parts' state.
Every part's state is one dataclass in :class:`TableState`; ``snapshot`` is a copy of all of
it, so nothing a part keeps can be forgotten by a rollback. Parts never import the
coordinator."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from controller.clock import iso
from controller.game.cards import CardError
from controller.messages import (
    AcknowledgeAlarm,
    AlarmPayload,
    Authenticate,
    CloseTable,
    Command,
    EnterDice,
    OpenTable,
    PlayerSetting,
    Problem,
    SetSeats,
    SetWagers,
    SignIn,
    SignOut,
    StatusPayload,
    StatusRequest,
    VoidRound,
)
from controller.table.alarms import Alarms
from controller.table.effects import (
    ClockSync,
    CommandReply,
    DiskSpace,
    Effect,
    FaultCleared,
    JournalRecovered,
    NoiseSummary,
    ProtectionFinding,
    Refusal,
    RoundRefused,
    StatusChanged,
    TableEvent,
    Tick,
)
from controller.table.floor import Floor
from controller.table.health import Health
from controller.table.rounds import Rounds
from controller.table.scope import round_problem
from controller.table.state import (
    REFUSAL_WINDOW,
    STATUS_ALARMS,
    AlarmsState,
    Fault,
    FloorState,
    KeptTableState,
    Phase,
    RoundIds,
    TableEnv,
    TableSettings,
    TableState,
    clone,
    deal_fingerprint,
    status_of,
)
from drivers.events import (
    CardDealt,
    DealEnded,
    DealStarted,
    DeviceFault,
    DeviceOffline,
    DeviceOnline,
    FrameError,
    PacketDealt,
    PositionDrawn,
    StubVerified,
)

__all__ = [
    "REFUSAL_WINDOW",
    "STATUS_ALARMS",
    "KeptTableState",
    "Phase",
    "Table",
    "TableSettings",
    "TableState",
    "deal_fingerprint",
]

_V = TypeVar("_V")

#: A table that kept nothing across a restart (a first start).
_NOTHING_KEPT = KeptTableState()


class _Kept(Generic[_V]):
    """A table attribute that is a field of one part's state (``table.latched`` is
    ``table.state.alarms.latched``): read and written there, so the state stays the one place."""

    def __init__(self, part: str, name: str) -> None:
        self.part, self.name = part, name

    def __get__(self, table: Table | None, owner: type | None = None) -> _V:
        if table is None:
            return self  # type: ignore[return-value]  # on the class: the descriptor itself
        value: _V = getattr(getattr(table.state, self.part), self.name)
        return value

    def __set__(self, table: Table, value: _V) -> None:
        # A change: the copy prepare_snapshot made is not the table now (Table's own attribute:
        # this descriptor is part of the class, in its module).
        table._prepared = None  # noqa: SLF001
        setattr(getattr(table.state, self.part), self.name, value)


class Table:
    """One table's rounds. ``handle`` is the only entry point; it never raises on bad input."""

    round = _Kept[Any]("rounds", "round")
    pending_draw = _Kept[Any]("rounds", "pending_draw")
    table_open = _Kept[bool]("floor", "table_open")
    occupied = _Kept[dict[str, bool | None]]("floor", "occupied")
    wagers = _Kept[dict[str, Any]]("floor", "wagers")
    dealer_id = _Kept[str | None]("floor", "dealer_id")
    corrections_per_round = _Kept[int]("floor", "corrections_per_round")
    corrections_per_hour = _Kept[int]("floor", "corrections_per_hour")
    latched = _Kept[dict[str, AlarmPayload]]("alarms", "latched")
    refusals_before_alarm = _Kept[int]("alarms", "refusals_before_alarm")
    refusal_window = _Kept[Any]("alarms", "refusal_window")
    devices = _Kept[dict[str, bool]]("health", "devices")
    clock_synchronized = _Kept[bool | None]("health", "clock_synchronized")

    def __init__(
        self,
        settings: TableSettings,
        *,
        new_round_id: Callable[[], str],
        clock: Callable[[], datetime],
        next_round_seq: int = 1,
        software_version: str = "",
        config_digest: str = "",
        recent_deals: Iterable[tuple[int, str, str]] = (),
        software_digest: str = "",
        software_verified: bool | None = None,
        new_alarm_id: Callable[[], str] | None = None,
        kept: KeptTableState = _NOTHING_KEPT,
    ) -> None:
        """``recent_deals``: (round number, shuffle id, fingerprint) of earlier complete deals,
        oldest first (the journal's ``deal_seen`` events), so a replay is refused across
        restarts. ``kept``: the state kept across a restart (latched alarms, seats, dealer)."""
        self.settings = settings
        self._clock = clock
        self.env = TableEnv(
            settings,
            clock,
            new_round_id,
            new_alarm_id or (lambda: f"alarm-{uuid.uuid4().hex}"),
            software_version,
            config_digest,
            software_digest,
            software_verified,
        )
        occupied: dict[str, bool | None] = dict.fromkeys(sorted(set(settings.seats.values())))
        occupied.update({k: v for k, v in kept.occupied.items() if k in occupied})
        self.state = TableState(
            floor=FloorState(occupied=occupied, dealer_id=kept.dealer_id or None),
            alarms=AlarmsState(
                latched={a.alarm_id: a for a in kept.latched if a.alarm_id},
                refusals_before_alarm=settings.refusals_before_alarm,
            ),
        )
        self.state.rounds.next_seq = next_round_seq
        self.state.rounds.deals.load(recent_deals)
        self._prepared: TableState | None = None  # prepare_snapshot's copy
        self.alarms = Alarms(self.state, self.env)
        self.health = Health(self.state, self.env, self.alarms)
        self.rounds = Rounds(self.state, self.env, self.alarms)
        self.floor = Floor(self.state, self.env, self.alarms)
        self.floor.limit_corrections(settings.corrections_per_round, settings.corrections_per_hour)

    # --- state the daemon may roll back --------------------------------------------------

    @property
    def fault(self) -> Fault | None:
        return self.state.fault

    def snapshot(self) -> TableState:
        """Everything ``handle`` may change (all of :class:`TableState`, by construction):
        restore it if the journal refuses the event's writes, so the table never runs ahead of
        its journal. Cheap: what cannot change is shared, not copied; and the copy
        :meth:`prepare_snapshot` made, if nothing changed the table since."""
        prepared, self._prepared = self._prepared, None
        return prepared if prepared is not None else clone(self.state)

    def prepare_snapshot(self) -> None:
        """Copy the state now, while the daemon waits for its next event, so that event's
        :meth:`snapshot` is off its path (issue 42: a tenth of a millisecond of the stub's).
        Every method of the table that changes it drops the copy, and so does an assignment to
        one of its attributes (``table.occupied = …``). A change made inside a container the
        table hands out (``table.latched.pop(…)``) is not seen: nothing does that between the
        daemon's events (only the start, in a fault, when no copy is prepared)."""
        self._prepared = clone(self.state)

    def restore(self, snapshot: TableState) -> None:
        """The state as ``snapshot`` took it (the snapshot itself stays unchanged)."""
        self._prepared = None
        restored = clone(snapshot)
        for name in TableState.__dataclass_fields__:
            setattr(self.state, name, getattr(restored, name))

    def round_ids(self) -> RoundIds:
        """The round being dealt and the newest round, as they stand (see ``RoundIds``)."""
        r = self.state.rounds.round
        open_round = self.state.open_round()
        return RoundIds(
            open_round.round_id if open_round is not None else None,
            r.round_id if r is not None else None,
        )

    def limit_corrections(self, per_round: int, per_hour: int) -> None:
        self._prepared = None
        self.floor.limit_corrections(per_round, per_hour)

    def restore_latched(self, alarms: Iterable[AlarmPayload]) -> None:
        """The latched alarms the journal kept across a restart."""
        self._prepared = None
        self.alarms.restore_latched(alarms)

    def status(self) -> StatusPayload:
        return status_of(self.state, self.env)

    # --- the entry point ----------------------------------------------------------------

    def handle(self, event: TableEvent, source: tuple[str, str] = ("", "")) -> list[Effect]:
        """Apply one event; return what must be done, in order. ``source``: the channel and
        identity a command came from (an acknowledgement names them)."""
        self._prepared = None
        latched = self.alarms.latched_ids()
        return self.alarms.changed_since(latched, self._dispatch(event, source))

    def _dispatch(self, event: TableEvent, source: tuple[str, str]) -> list[Effect]:
        handler = _EVENTS.get(type(event)) or self._OWN_EVENTS.get(type(event))
        if handler is None:
            return self._command(event, source)  # type: ignore[arg-type]  # the rest: commands
        return handler(self, event)

    def _command(self, command: Command, source: tuple[str, str]) -> list[Effect]:
        kind = command.kind
        handler = _COMMANDS.get(type(command)) or self._OWN_COMMANDS.get(type(command))
        if handler is None:
            return [CommandReply(command.request_id, kind, False, f"unknown command {kind}")]
        problem = round_problem(command, self.state.rounds)
        if problem is not None:
            return self._round_refused(command, source, problem)
        try:
            return handler(self, command, source)
        except (ValueError, CardError) as exc:
            return [CommandReply(command.request_id, kind, False, str(exc))]

    def _round_refused(
        self, command: Command, source: tuple[str, str], problem: str
    ) -> list[Effect]:
        """A command for a round it would not act on: refused, journaled as a refusal and
        counted against its source like every refusal before the table."""
        refusal = Refusal(source[0], source[1], command.kind, "round", problem[:300])
        return [
            CommandReply(command.request_id, command.kind, False, problem),
            RoundRefused(refusal),
            *self.alarms.refused(refusal),
        ]

    def _status_request(self, command: StatusRequest, _source: tuple[str, str]) -> list[Effect]:
        status = self.status()
        data = status.model_dump(mode="json")
        return [
            CommandReply(command.request_id, command.kind, True, data=data),
            StatusChanged(status),
        ]

    def _authenticate(self, command: Authenticate, _source: tuple[str, str]) -> list[Effect]:
        # The table records who asked; the MQTT service hashes the files.
        env, way = self.env, self.settings.way
        data = {
            "nonce": command.nonce,
            "config_digest": env.config_digest,
            "software_digest": env.software_digest,
            "software_verified": env.software_verified,
            "house_way": way.name if way else "",
            "house_way_digest": way.digest if way else "",
        }
        return [CommandReply(command.request_id, command.kind, True, data=data)]

    # --- the fault state (tilt) -------------------------------------------------------------

    def enter_fault(self, detail: str, now: datetime) -> list[Effect]:
        """The journal refused a write: stop applying events until :class:`JournalRecovered`.
        The effects are for every path that does not need the disk (page, MQTT status, pole,
        log); they cannot be journaled."""
        self._prepared = None
        if self.state.fault is not None:
            self.state.fault.detail = detail
            return []
        self.state.fault = Fault(detail, now, self.state.open_round() is not None)
        return [
            self.alarms.raise_alarm(
                "table_fault",
                "critical",
                f"the journal cannot be written ({detail}): no result is settled until it can; "
                "do not settle by the display",
            ),
            StatusChanged(self.status()),
        ]

    def lost(self, event: TableEvent) -> None:
        """Tally an event that arrived during the fault and was not applied."""
        self._prepared = None
        f = self.state.fault
        if f is None:
            return
        f.events_lost += 1
        f.by_kind[getattr(event, "kind", type(event).__name__)] += 1
        match event:
            case DealStarted():
                f.deals.append(event.shuffle_id)
                f.dealing = True
            case PacketDealt() | CardDealt() if not f.dealing:
                f.deals.append("")
                f.dealing = True
            case StubVerified() | DealEnded():
                f.dealing = False
            case DeviceOnline():
                f.devices[event.device] = True
            case DeviceOffline():
                f.devices[event.device] = False

    def _recover(self, event: JournalRecovered) -> list[Effect]:
        now = event.now
        f = self.state.fault
        if f is None:
            return []
        voided, effects = self._void_lost_deals(f)
        for device, online in sorted(f.devices.items()):
            if self.state.health.devices.get(device) != online:
                effects += self.health.device(
                    DeviceOnline(device=device, detail="while the journal was failing")
                    if online
                    else DeviceOffline(device=device, reason="while the journal was failing")
                )
        seconds = max(0, int((now - f.since).total_seconds()))
        record = {
            "since": f.since.isoformat(),
            "until": now.isoformat(),
            "detail": f.detail,
            "events_lost": f.events_lost,
            "by_kind": dict(sorted(f.by_kind.items())),
            "rounds_voided": voided,
        }
        self.state.fault = None
        lost = (
            f"{len(voided)} round(s) voided (journal_fault): {', '.join(voided)}"
            if voided
            else "no round was lost"
        )
        alarm = self.alarms.raise_alarm(
            "journal_fault",
            "warning",
            f"the journal could not be written for {seconds} s from {iso(f.since)} "
            f"({f.detail}); {f.events_lost} device events were not applied; {lost}",
        )
        return [*effects, alarm, FaultCleared(record), StatusChanged(self.status())]

    def _void_lost_deals(self, f: Fault) -> tuple[list[str], list[Effect]]:
        """The round being dealt when the journal failed, and every deal seen meanwhile, void."""
        problem = Problem(
            code="journal_fault",
            detail=f"the journal could not be written from {iso(f.since)}: this deal's cards "
            "were not all journaled, so the round is void",
        )
        effects: list[Effect] = []
        voided: list[str] = []
        r = self.state.open_round()
        if r is not None:
            voided.append(r.round_id)
            effects += self.rounds.close_dead(r, [problem], "void")
        for shuffle_id in f.deals:
            effects += self.rounds.open_round("", shuffle_id)
            opened = self.state.rounds.round
            assert opened is not None
            voided.append(opened.round_id)
            effects += self.rounds.close_dead(opened, [problem], "void")
        return voided, effects

    #: What the coordinator handles itself; every other event and command goes to a part
    #: (``_EVENTS``, ``_COMMANDS``).
    _OWN_EVENTS: ClassVar[dict[type, Callable[[Table, Any], list[Effect]]]] = {
        JournalRecovered: _recover,
    }
    _OWN_COMMANDS: ClassVar[
        dict[type[Command], Callable[[Table, Any, tuple[str, str]], list[Effect]]]
    ] = {
        Authenticate: _authenticate,
        StatusRequest: _status_request,
    }


#: Each event's handler in a part (``Table._dispatch``; anything else is a command).
_EVENTS: dict[type, Callable[[Table, Any], list[Effect]]] = {
    DealStarted: lambda t, e: t.rounds.deal_started(e),
    PacketDealt: lambda t, e: t.rounds.packet(e),
    CardDealt: lambda t, e: t.rounds.card(e),
    StubVerified: lambda t, e: t.rounds.stub(e),
    DealEnded: lambda t, e: t.rounds.deal_ended(e),
    PositionDrawn: lambda t, e: t.rounds.position(e),
    DeviceOnline: lambda t, e: t.health.device(e),
    DeviceOffline: lambda t, e: t.health.device(e),
    DeviceFault: lambda t, e: t.health.device_fault(e),
    FrameError: lambda t, e: t.health.frame_error(e),
    Tick: lambda t, e: t.rounds.tick(e.now),
    NoiseSummary: lambda t, e: t.health.noise(e),
    DiskSpace: lambda t, e: t.health.disk_space(e),
    ClockSync: lambda t, e: t.health.clock_synced(e),
    Refusal: lambda t, e: t.alarms.refused(e),
    ProtectionFinding: lambda t, e: t.alarms.protection(e.finding),
}

#: Each command's handler in a part: (table, command, source) → effects (``Table._command``).
_COMMANDS: dict[type[Command], Callable[[Table, Any, tuple[str, str]], list[Effect]]] = {
    OpenTable: lambda t, c, _: t.floor.open_or_close(c),
    CloseTable: lambda t, c, _: t.floor.open_or_close(c),
    VoidRound: lambda t, c, _: t.rounds.void(c),
    SetSeats: lambda t, c, _: t.floor.set_seats(c),
    SetWagers: lambda t, c, _: t.floor.set_wagers(c),
    EnterDice: lambda t, c, _: t.rounds.enter_dice(c),
    PlayerSetting: lambda t, c, _: t.floor.player_setting(c),
    AcknowledgeAlarm: lambda t, c, source: t.alarms.acknowledge(c, source),
    SignIn: lambda t, c, _: t.floor.sign_in(c),
    SignOut: lambda t, c, _: t.floor.sign_out(c),
}
