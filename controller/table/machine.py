"""The round state machine of docs/rules.md §6: (state, event) → (state, [effects]). No I/O.

The daemon feeds it device events (drivers/events.py), commands (controller/messages.py) and
clock ticks, and carries out the effects it returns: journal writes, MQTT messages, the display.

A round opens with a deal (DealStarted, or the first packet or card of a deal nobody announced).
Packets (or single cards from a shoe) and the first-position draw arrive in either order. When the
deal is complete (DealEnded, or seven packets and the stub) it is checked (deal.check_deal); a dead
deal or misdeal closes the round at once. Otherwise, as soon as the first position is known, packets
go to positions, the dealer is set by the House Way (or has two Jacks) and every seat's side wagers
are settled: the round closes as settled. Players may then enter their own settings until the next
deal. A new deal closes a round still dealing (reason ``new_deal``)."""

from __future__ import annotations

import hashlib
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Literal

from controller.clock import iso
from controller.game.cards import CardError, card_texts
from controller.game.deal import (
    assign_packets,
    check_deal,
    position_from_dice,
    position_from_rng,
)
from controller.game.hands import HandValue, evaluate, is_ace_high_pai_gow
from controller.game.house_way import house_way
from controller.game.paytables import Paytable
from controller.game.setting import Rules, Setting
from controller.game.wagers import (
    chan_chu,
    dealer_has_two_jacks,
    jacks_beat,
    push_ace_high,
    settle_envy,
)
from controller.game.way import Way
from controller.messages import (
    AcknowledgeAlarm,
    AlarmAckPayload,
    AlarmPayload,
    Authenticate,
    CloseTable,
    Command,
    DealerOut,
    DevicePayload,
    EnterDice,
    EnvyAwardOut,
    EnvyOut,
    FaultOut,
    OpenTable,
    PlayerPayload,
    PlayerSetting,
    PositionCards,
    PositionDraw,
    Problem,
    ProtectionPayload,
    RoundPayload,
    SeatOut,
    SetSeats,
    SetWagers,
    SignIn,
    SignOut,
    StatusPayload,
    StatusRequest,
    VoidRound,
    Wagers,
)
from controller.table.effects import (
    DEALER_POSITION,
    PACKET_SIZE,
    PACKETS,
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
    TableEvent,
    Tick,
)
from controller.table.results import player_result, problem_of, setting_out, side_out
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

# --- configuration and state ----------------------------------------------------------------

#: A source refused this many times within REFUSAL_WINDOW raises one ``command_refused`` alarm.
REFUSALS_BEFORE_ALARM = 3
REFUSAL_WINDOW = timedelta(minutes=10)

#: Corrections of players' settings a round, and an hour, at most ([limits] corrections_per_round
#: and corrections_per_hour): a correction needs a supervisor and a reason, and raises an alarm.
CORRECTIONS_PER_ROUND = 2
CORRECTIONS_PER_HOUR = 6
CORRECTION_WINDOW = timedelta(hours=1)


@dataclass(frozen=True, slots=True)
class TableSettings:
    table_id: str
    seats: Mapping[int, str]  # positions 2–7 → seat labels (docs/rules.md §6)
    rules: Rules
    chan_chu: Paytable
    jacks_beat: Paytable
    envy: Paytable | None = None
    deal_timeout: timedelta = timedelta(seconds=60)
    #: [limits]: refusals of one source before an alarm; corrections a round and an hour.
    refusals_before_alarm: int = REFUSALS_BEFORE_ALARM
    corrections_per_round: int = CORRECTIONS_PER_ROUND
    corrections_per_hour: int = CORRECTIONS_PER_HOUR
    #: The House Way the dealer (and a player on the House Way) is set by: a way file
    #: (controller/game/way, docs/house-way.md); None: the filed way's rule code.
    way: Way | None = None

    def describe_rules(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "wheel_rank": self.rules.wheel_rank,
            "ace_high_pushes_pai_gow": self.rules.ace_high_pushes_pai_gow,
        }
        if self.way is not None:  # journaled with every round: audit verify deals it again
            described["house_way"] = self.way.name
            described["house_way_digest"] = self.way.digest
        return described

    def set_by_house_way(self, cards: Sequence[Any]) -> Setting:
        """Seven cards set by this table's House Way."""
        if self.way is not None:
            return self.way.set([int(c) for c in cards], self.rules)
        return house_way(cards, self.rules)

    def describe_paytables(self) -> dict[str, Any]:
        return {
            "chan_chu": self.chan_chu.name,
            "jacks_beat": self.jacks_beat.name,
            "envy": self.envy.name if self.envy else None,
        }


@dataclass(frozen=True, slots=True)
class KeptTableState:
    """What the table kept across a restart (controller/kept_state.py reads it from the
    journal's chained record): the latched alarms, the occupied seats, the dealer signed in."""

    latched: tuple[AlarmPayload, ...] = ()
    occupied: Mapping[str, bool | None] = field(default_factory=dict)
    dealer_id: str | None = None


class Phase(Enum):
    """Where a round is: dealing, then settled (results out) or closed without results (dead or
    misdealt, or voided while dealing); a settled round may still be voided."""

    DEALING = "dealing"
    SETTLED = "settled"
    DEAD = "dead"
    VOID = "void"
    VOIDED_AFTER_SETTLEMENT = "voided_after_settlement"


@dataclass
class _Round:
    round_id: str
    round_seq: int
    opened_at: datetime
    shuffle_id: str = ""
    source: str = ""
    packets: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    shoe_cards: list[str] = field(default_factory=list)
    stub: tuple[str, ...] | None = None
    ended: bool = False
    draw: PositionDraw | None = None
    frame_errors: list[str] = field(default_factory=list)
    phase: Phase = Phase.DEALING
    dealer_cards: tuple[int, ...] = ()
    dealer_setting: Setting | None = None
    seat_cards: dict[str, tuple[int, ...]] = field(default_factory=dict)
    players: dict[str, PlayerPayload] = field(default_factory=dict)
    dealer_id: str | None = None
    corrections: int = 0  # players' settings entered again (docs/audit.md "Corrections")

    def clone(self) -> _Round:
        """A copy that shares only immutable parts (tuples, models the table never changes)."""
        return replace(
            self,
            packets=list(self.packets),
            shoe_cards=list(self.shoe_cards),
            frame_errors=list(self.frame_errors),
            seat_cards=dict(self.seat_cards),
            players=dict(self.players),
        )

    def dealt_packets(self) -> list[tuple[str, ...]]:
        """Packets in deal order; a shoe's cards grouped in sevens, the rest is the stub."""
        if self.packets:
            return [cards for _, cards in sorted(self.packets, key=lambda p: p[0])]
        dealt = self.shoe_cards[: PACKETS * PACKET_SIZE]
        return [tuple(dealt[i : i + PACKET_SIZE]) for i in range(0, len(dealt), PACKET_SIZE)]

    def stub_cards(self) -> tuple[str, ...] | None:
        if self.stub is not None:
            return self.stub
        extra = self.shoe_cards[PACKETS * PACKET_SIZE :]
        return tuple(extra) if extra else None

    def complete(self) -> bool:
        return self.ended or (len(self.packets) >= PACKETS and self.stub is not None)

    @property
    def settled(self) -> bool:
        """Results went out (and stand, or were voided after)."""
        return self.phase in (Phase.SETTLED, Phase.VOIDED_AFTER_SETTLEMENT)

    @property
    def closed(self) -> bool:
        """No more cards or draws: settled, dead, misdealt or void."""
        return self.phase is not Phase.DEALING

    @property
    def voided(self) -> bool:
        return self.phase in (Phase.VOID, Phase.VOIDED_AFTER_SETTLEMENT)


#: Complete deals remembered to refuse a replay (the same shuffle id or the same cards): about
#: two weeks of a busy table, in about 4 MB (64-bit keys, round numbers as values).
RECENT_DEALS = 20_000


def _key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def deal_fingerprint(packets: Iterable[tuple[str, ...]], stub: tuple[str, ...] | None) -> str:
    """The identity of a deal's exact cards in dealing order (and the stub), as 32 hex digits."""
    text = "|".join(",".join(p) for p in packets) + "/" + ",".join(stub or ())
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


@dataclass
class _Fault:
    """The table's fault state (tilt): the journal refused a write. What arrives meanwhile is
    not applied (the table must never run ahead of its journal); it is tallied here so the
    recovery can say what was lost and void the rounds seen on the line."""

    detail: str
    since: datetime
    dealing: bool
    events_lost: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    deals: list[str] = field(default_factory=list)  # the shuffle ids ("" unknown) of new deals
    devices: dict[str, bool] = field(default_factory=dict)

    def clone(self) -> _Fault:
        return replace(
            self, by_kind=Counter(self.by_kind), deals=list(self.deals), devices=dict(self.devices)
        )

    def out(self) -> FaultOut:
        return FaultOut(
            code="journal_write_failed",
            detail=self.detail,
            since=self.since,
            events_lost=self.events_lost,
        )


#: Latched alarms listed in the status (the oldest; the rest are counted): a burst must not make
#: every retained status message grow without bound.
STATUS_ALARMS = 50


class Table:
    """One table's rounds. ``handle`` is the only entry point; it never raises on bad input."""

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
        kept: KeptTableState = KeptTableState(),
    ) -> None:
        """``recent_deals``: (round number, shuffle id, fingerprint) of earlier complete deals,
        oldest first (the journal's ``deal_seen`` events), so a replay is refused across
        restarts. ``kept``: the state kept across a restart (latched alarms, seats, dealer)."""
        self.settings = settings
        self._new_round_id = new_round_id
        self._new_alarm_id = new_alarm_id or (lambda: f"alarm-{uuid.uuid4().hex}")
        self._clock = clock
        self._next_seq = next_round_seq
        self._software_version = software_version
        self._config_digest = config_digest
        self._software = (software_digest, software_verified)
        self.round: _Round | None = None
        self.pending_draw: PositionDraw | None = None
        self.table_open = True
        self.devices: dict[str, bool] = {}
        labels = set(settings.seats.values())
        self.occupied: dict[str, bool | None] = dict.fromkeys(sorted(labels))
        self.occupied.update({k: v for k, v in kept.occupied.items() if k in self.occupied})
        self.wagers: dict[str, Wagers] = {}
        self.fault: _Fault | None = None
        #: Critical alarms nobody has acknowledged yet, by id (latched: the daemon keeps them
        #: in the journal so they survive a restart).
        self.latched: dict[str, AlarmPayload] = {a.alarm_id: a for a in kept.latched if a.alarm_id}
        self.dealer_id: str | None = kept.dealer_id or None
        #: Whether the computer's clock is synchronised (None: not checked, or cannot tell).
        self.clock_synchronized: bool | None = None
        #: Refused commands per (channel, identity, reason): first refusal, count, alarmed.
        self._refusals: dict[tuple[str, str, str], tuple[datetime, int, bool]] = {}
        self.refusals_before_alarm = settings.refusals_before_alarm
        self.refusal_window = REFUSAL_WINDOW
        self.corrections_per_round = CORRECTIONS_PER_ROUND
        self.corrections_per_hour = CORRECTIONS_PER_HOUR
        self.limit_corrections(settings.corrections_per_round, settings.corrections_per_hour)
        #: When each correction of the last hour was made (any round), oldest first.
        self._corrections: list[datetime] = []
        self._deals: OrderedDict[int, int] = OrderedDict()  # fingerprint key → round number
        self._shuffles: OrderedDict[int, int] = OrderedDict()  # shuffle id key → round number
        for round_seq, shuffle_id, fingerprint in recent_deals:
            self._remember_deal(round_seq, shuffle_id, fingerprint)

    # --- state the daemon may roll back --------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Everything ``handle`` may change: restore it if the journal refuses the event's
        writes, so the table never runs ahead of its journal. Cheap (no deep copy): what is
        shared is never changed in place."""
        return {
            "round": self.round.clone() if self.round is not None else None,
            "pending_draw": self.pending_draw,
            "table_open": self.table_open,
            "devices": dict(self.devices),
            "occupied": dict(self.occupied),
            "wagers": dict(self.wagers),
            "fault": self.fault.clone() if self.fault is not None else None,
            "latched": dict(self.latched),
            "dealer_id": self.dealer_id,
            "_refusals": dict(self._refusals),
            "_corrections": list(self._corrections),
            "_next_seq": self._next_seq,
            "_deal_count": (len(self._deals), len(self._shuffles)),
        }

    def restore(self, snapshot: dict[str, Any]) -> None:
        deals, shuffles = snapshot["_deal_count"]
        while len(self._deals) > deals:
            self._deals.popitem()
        while len(self._shuffles) > shuffles:
            self._shuffles.popitem()
        for name, value in snapshot.items():
            if name != "_deal_count":
                setattr(self, name, value)

    def limit_corrections(self, per_round: int, per_hour: int) -> None:
        """At most ``per_round`` corrections of players' settings in a round and ``per_hour``
        in any hour ([limits]; 0 refuses every correction)."""
        if per_round < 0 or per_hour < 0:
            raise ValueError("correction limits must not be negative")
        self.corrections_per_round = per_round
        self.corrections_per_hour = per_hour

    # --- the fault state (tilt) -------------------------------------------------------------

    def enter_fault(self, detail: str, now: datetime) -> list[Effect]:
        """The journal refused a write: stop applying events until :class:`JournalRecovered`.
        The effects are for every path that does not need the disk (page, MQTT status, pole,
        log); they cannot be journaled."""
        if self.fault is not None:
            self.fault.detail = detail
            return []
        dealing = self.round is not None and not self.round.closed
        self.fault = _Fault(detail, now, dealing)
        return [
            self._alarm(
                "table_fault",
                "critical",
                f"the journal cannot be written ({detail}): no result is settled until it can; "
                "do not settle by the display",
            ),
            StatusChanged(self.status()),
        ]

    def lost(self, event: TableEvent) -> None:
        """Tally an event that arrived during the fault and was not applied."""
        f = self.fault
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

    def _recover(self, now: datetime) -> list[Effect]:
        f = self.fault
        if f is None:
            return []
        since = iso(f.since)
        problem = Problem(
            code="journal_fault",
            detail=f"the journal could not be written from {since}: this deal's cards were not "
            "all journaled, so the round is void",
        )
        effects: list[Effect] = []
        voided: list[str] = []
        r = self.round
        if r is not None and not r.closed:
            voided.append(r.round_id)
            effects += self._close_dead(r, [problem], "void")
        for shuffle_id in f.deals:
            effects += self._open_round("", shuffle_id)
            assert self.round is not None
            voided.append(self.round.round_id)
            effects += self._close_dead(self.round, [problem], "void")
        for device, online in sorted(f.devices.items()):
            if self.devices.get(device) != online:
                effects += self._device(
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
        self.fault = None
        effects += [
            self._alarm(
                "journal_fault",
                "warning",
                f"the journal could not be written for {seconds} s from {since} ({f.detail}); "
                f"{f.events_lost} device events were not applied; "
                + (
                    f"{len(voided)} round(s) voided (journal_fault): {', '.join(voided)}"
                    if voided
                    else "no round was lost"
                ),
            ),
            FaultCleared(record),
            StatusChanged(self.status()),
        ]
        return effects

    # --- the entry point ----------------------------------------------------------------

    def handle(self, event: TableEvent, source: tuple[str, str] = ("", "")) -> list[Effect]:
        """Apply one event; return what must be done, in order. ``source``: the channel and
        identity a command came from (an acknowledgement names them)."""
        latched = len(self.latched)
        effects = self._handle(event, source)
        if len(self.latched) != latched and not any(isinstance(e, StatusChanged) for e in effects):
            effects.append(StatusChanged(self.status()))  # the retained status lists them
        return effects

    def _handle(self, event: TableEvent, source: tuple[str, str]) -> list[Effect]:
        handler = _EVENTS.get(type(event))
        if handler is None:
            return self._command(event, source)  # type: ignore[arg-type]  # the rest: commands
        return handler(self, event)

    def _device_fault(self, event: DeviceFault) -> list[Effect]:
        detail = f"{event.code}: {event.detail}".rstrip(": ")
        return [self._alarm("device_fault", "warning", detail, event.device)]

    def _frame_error(self, event: FrameError) -> list[Effect]:
        detail = f"{event.error}: {event.detail}".rstrip(": ")
        return [self._alarm("frame_error", "warning", detail, event.device)]

    def _clock_synced(self, event: ClockSync) -> list[Effect]:
        before, self.clock_synchronized = self.clock_synchronized, event.synchronized
        said: list[Effect] = [StatusChanged(self.status())]
        # Synchronised at the first look is no news; losing it, or getting it back, is.
        if not event.synchronized or before is False:
            said.insert(0, self._clock_sync(event))
        return said

    def status(self) -> StatusPayload:
        return StatusPayload(
            state="fault" if self.fault is not None else "online",
            fault=self.fault.out() if self.fault is not None else None,
            table_open=self.table_open,
            devices=dict(self.devices),
            round_id=self.round.round_id if self.round and not self.round.closed else None,
            software_version=self._software_version,
            config_digest=self._config_digest,
            software_digest=self._software[0],
            software_verified=self._software[1],
            house_way=self.settings.way.name if self.settings.way else "",
            house_way_digest=self.settings.way.digest if self.settings.way else "",
            # A flood adds one a minute: the retained status stays small, the total is told.
            alarms_unacknowledged=list(self.latched.values())[:STATUS_ALARMS],
            alarms_unacknowledged_total=len(self.latched),
            dealer_id=self.dealer_id,
            clock_synchronized=self.clock_synchronized,
        )

    # --- the deal -----------------------------------------------------------------------

    def _open_round(self, device: str, shuffle_id: str = "") -> list[Effect]:
        effects: list[Effect] = []
        if self.round is not None and not self.round.settled and not self.round.closed:
            effects += self._close_dead(
                self.round,
                [Problem(code="new_deal", detail="a new deal began before this one was complete")],
                "dead",
            )
        now = self._clock()
        r = _Round(self._new_round_id(), self._next_seq, now, shuffle_id, device)
        r.dealer_id = self.dealer_id
        self._next_seq += 1
        r.draw, self.pending_draw = self.pending_draw, None
        self.round = r
        effects.append(RoundOpened(r.round_id, r.round_seq, shuffle_id, now, r.draw))
        effects.append(self._progress(r))
        return effects

    def _current(self, device: str) -> tuple[_Round, list[Effect]]:
        """The round a dealt card belongs to: the open one, or a new one if none is dealing."""
        if self.round is not None and not self.round.settled and not self.round.closed:
            return self.round, []
        effects = self._open_round(device)
        assert self.round is not None
        return self.round, effects

    def _deal_started(self, event: DealStarted) -> list[Effect]:
        return self._open_round(event.device, event.shuffle_id)

    def _packet(self, event: PacketDealt) -> list[Effect]:
        r, effects = self._current(event.device)
        r.packets.append((event.index, tuple(event.cards)))
        effects.append(self._progress(r))
        return effects + self._try_settle(r)

    def _card(self, event: CardDealt) -> list[Effect]:
        r, effects = self._current(event.device)
        r.shoe_cards.append(event.card)
        effects.append(self._progress(r))
        return effects + self._try_settle(r)

    def _stub(self, event: StubVerified) -> list[Effect]:
        if self.round is None or self.round.settled or self.round.closed:
            return [
                self._alarm(
                    "stub_without_deal", "warning", "a stub arrived with no deal open", event.device
                )
            ]
        self.round.stub = tuple(event.cards)
        return self._try_settle(self.round)

    def _deal_ended(self, event: DealEnded) -> list[Effect]:
        if self.round is None or self.round.settled or self.round.closed:
            return []
        self.round.ended = True
        return self._try_settle(self.round)

    def _position(self, event: PositionDrawn) -> list[Effect]:
        try:
            if event.method in ("dice", "dice_manual"):
                if event.dice is None:
                    raise ValueError("dice result without dice")
                position = position_from_dice(*event.dice)
            else:
                if event.number is None:
                    raise ValueError("RNG result without a number")
                position = position_from_rng(event.number)
        except ValueError as exc:
            return [self._alarm("position_invalid", "warning", str(exc), event.device)]
        # A dice draw carries its dice; ``number`` is the RNG's alone (readers may echo one).
        number = None if event.method in ("dice", "dice_manual") else event.number
        draw = PositionDraw(method=event.method, number=number, dice=event.dice, position=position)
        r = self.round
        if r is None or r.settled or r.closed:
            # Between deals the newest draw wins (the dealer re-rolled): the next deal uses it.
            replaced, self.pending_draw = self.pending_draw, draw
            if replaced is not None:
                return [
                    self._alarm(
                        "position_replaced",
                        "info",
                        f"a new first-position draw (position {position}) replaced the unused "
                        f"one (position {replaced.position}); the next deal uses position "
                        f"{position}",
                        event.device,
                    )
                ]
            return []
        if r.draw is not None:
            return [
                self._alarm(
                    "position_ignored",
                    "warning",
                    f"first position already drawn ({r.draw.position}); a second draw is ignored",
                    event.device,
                    r.round_id,
                )
            ]
        r.draw = draw
        return [self._progress(r), *self._try_settle(r)]

    def _progress(self, r: _Round) -> RoundProgress:
        packets = len(r.dealt_packets()) if r.packets else len(r.shoe_cards) // PACKET_SIZE
        if not r.complete():
            waiting = "cards"
        elif r.draw is None:
            waiting = "position"
        else:
            waiting = ""
        return RoundProgress(
            r.round_id,
            packets,
            sum(len(p) for _, p in r.packets) + len(r.shoe_cards),
            r.draw,
            waiting,
        )

    def _try_settle(self, r: _Round) -> list[Effect]:
        if r.settled or r.closed or not r.complete():
            return []
        packets = r.dealt_packets()
        check = check_deal(packets, r.stub_cards())
        if check.status != "ok":
            effects: list[Effect] = []
            if check.alarm:
                effects.append(
                    self._alarm(
                        "deck_integrity",
                        "critical",
                        "; ".join(
                            p.detail
                            for p in check.reasons
                            if p.code in ("duplicate_card", "foreign_card", "second_joker")
                        ),
                        r.source,
                        r.round_id,
                    )
                )
            return effects + self._close_dead(
                r, [problem_of(p) for p in check.reasons], check.status
            )
        stub = r.stub_cards()
        fingerprint = deal_fingerprint(packets, stub)
        repeated = self._repeat_of(r.shuffle_id, fingerprint)
        if repeated:
            return [
                self._alarm("deck_integrity", "critical", repeated, r.source, r.round_id),
                *self._close_dead(r, [Problem(code="replayed_deal", detail=repeated)], "dead"),
            ]
        if r.draw is None:
            return [self._progress(r)]
        self._remember_deal(r.round_seq, r.shuffle_id, fingerprint)
        return [DealRecorded(r.round_id, r.shuffle_id, fingerprint), *self._settle(r, packets)]

    def _repeat_of(self, shuffle_id: str, fingerprint: str) -> str:
        """Why a deal repeats an earlier one ("" if it does not)."""
        earlier = self._deals.get(_key(fingerprint))
        if earlier is not None:
            return (
                f"replayed deal: the same cards in the same order as round #{earlier}; "
                "no real shuffle repeats a deck"
            )
        earlier = self._shuffles.get(_key(shuffle_id)) if shuffle_id else None
        if earlier is not None:
            return f"replayed deal: shuffle id {shuffle_id} was already dealt in round #{earlier}"
        return ""

    def _remember_deal(self, round_seq: int, shuffle_id: str, fingerprint: str) -> None:
        self._deals[_key(fingerprint)] = round_seq
        if len(self._deals) > RECENT_DEALS:
            self._deals.popitem(last=False)
        if shuffle_id:
            self._shuffles[_key(shuffle_id)] = round_seq
            if len(self._shuffles) > RECENT_DEALS:
                self._shuffles.popitem(last=False)

    def _settle(self, r: _Round, packets: list[tuple[str, ...]]) -> list[Effect]:
        assert r.draw is not None
        s = self.settings
        rules = s.rules
        by_position = assign_packets(packets, r.draw.position)
        dealer = tuple(int(c) for c in by_position[DEALER_POSITION])
        two_jacks = dealer_has_two_jacks(dealer)
        setting = None if two_jacks else s.set_by_house_way(by_position[DEALER_POSITION])
        dealer_value = HandValue(evaluate(dealer, rules.wheel_high))
        r.dealer_cards, r.dealer_setting = dealer, setting

        seats = [
            (pos, s.seats[pos])
            for pos in sorted(s.seats)
            if self.occupied.get(s.seats[pos]) is not False
        ]
        envy = None
        if s.envy is not None:
            envy = settle_envy(
                {
                    label: (by_position[pos], self.wagers.get(label, Wagers()).chan_chu)
                    for pos, label in seats
                },
                s.envy,
            )
        seat_out: list[SeatOut] = []
        for pos, label in seats:
            cards = tuple(int(c) for c in by_position[pos])
            r.seat_cards[label] = cards
            w = self.wagers.get(label)
            cc = chan_chu(cards, s.chan_chu)
            jb = jacks_beat(dealer, cards, s.jacks_beat, rules)
            pah = push_ace_high(dealer, cards, rules)
            e = envy[label] if envy is not None else None
            seat_out.append(
                SeatOut(
                    seat=label,
                    position=pos,
                    cards=card_texts(cards),
                    best_hand=HandValue(evaluate(cards, rules.wheel_high)).name,
                    wagers=w,
                    chan_chu=side_out(cc.line, cc.pays, w.chan_chu if w else None),
                    jacks_beat=side_out(jb.line, jb.pays, w.jacks_beat if w else None),
                    push_ace_high=side_out(pah.line, pah.pays, w.push_ace_high if w else None),
                    envy=EnvyOut(
                        qualifies=e.qualifies,
                        total=e.total,
                        awards=[
                            EnvyAwardOut(from_seat=a.from_seat, line=a.line, amount=int(a.amount))
                            for a in e.awards
                        ],
                    )
                    if e
                    else None,
                )
            )
        payload = RoundPayload(
            round_id=r.round_id,
            round_seq=r.round_seq,
            status="settled",
            opened_at=r.opened_at,
            closed_at=self._clock(),
            shuffle_id=r.shuffle_id,
            card_source=r.source,
            dealer_id=r.dealer_id,
            first_position=r.draw,
            positions=self._positions(by_position, r.draw.position),
            dealer=DealerOut(
                cards=card_texts(dealer),
                best_hand=dealer_value.name,
                two_jacks=two_jacks,
                ace_high_pai_gow=is_ace_high_pai_gow(dealer_value),
                setting=setting_out(setting) if setting else None,
            ),
            seats=seat_out,
            rules=s.describe_rules(),
            paytables=s.describe_paytables(),
        )
        r.phase = Phase.SETTLED
        return [RoundClosed(payload)]

    def _positions(
        self, by_position: Mapping[int, tuple[Any, ...]], first: int
    ) -> list[PositionCards]:
        return [
            PositionCards(
                position=pos,
                seat="dealer" if pos == DEALER_POSITION else self.settings.seats.get(pos, str(pos)),
                cards=card_texts(cards),
                packet=((pos - first) % PACKETS) + 1,
            )
            for pos, cards in sorted(by_position.items())
        ]

    def _close_dead(
        self, r: _Round, reasons: list[Problem], status: Literal["dead", "misdeal", "void"]
    ) -> list[Effect]:
        positions: list[PositionCards] = []
        for packet, cards in enumerate(r.dealt_packets(), start=1):
            # Packets are counted 1–7 in dealing order everywhere, as dealers count them.
            pos = ((r.draw.position + packet - 2) % PACKETS) + 1 if r.draw else packet
            label = (
                "dealer"
                if r.draw and pos == DEALER_POSITION
                else (self.settings.seats.get(pos, str(pos)) if r.draw else f"packet {packet}")
            )
            positions.append(
                PositionCards(position=pos, seat=label, cards=list(cards), packet=packet)
            )
        payload = RoundPayload(
            round_id=r.round_id,
            round_seq=r.round_seq,
            status=status,
            reasons=reasons,
            opened_at=r.opened_at,
            closed_at=self._clock(),
            shuffle_id=r.shuffle_id,
            card_source=r.source,
            dealer_id=r.dealer_id,
            first_position=r.draw,
            positions=positions,
            rules=self.settings.describe_rules(),
            paytables=self.settings.describe_paytables(),
        )
        revises = r.settled
        if status == "void":
            r.phase = Phase.VOIDED_AFTER_SETTLEMENT if revises else Phase.VOID
        else:
            r.phase = Phase.DEAD
        return [RoundClosed(payload, revises_settled=revises)]

    def _tick(self, now: datetime) -> list[Effect]:
        r = self.round
        if r is None or r.closed or r.settled or r.complete():
            return []
        if now - r.opened_at < self.settings.deal_timeout:
            return []
        detail = f"no card for {int(self.settings.deal_timeout.total_seconds())} s mid-deal"
        problem = Problem(
            code="deal_timeout", detail=detail + "; fewer than seven cards reached a position"
        )
        return [
            self._alarm("deal_timeout", "critical", detail, r.source, r.round_id),
            *self._close_dead(r, [problem], "dead"),
        ]

    # --- devices and alarms -------------------------------------------------------------

    def _device(self, event: DeviceOnline | DeviceOffline) -> list[Effect]:
        online = isinstance(event, DeviceOnline)
        detail = event.detail if isinstance(event, DeviceOnline) else event.reason
        self.devices[event.device] = online
        effects: list[Effect] = [
            DeviceChanged(DevicePayload(device=event.device, online=online, detail=detail)),
            StatusChanged(self.status()),
        ]
        if not online:
            effects.append(
                self._alarm(
                    "device_offline",
                    "warning",
                    f"{event.device} went offline: {detail}".rstrip(": "),
                    event.device,
                )
            )
        return effects

    def _noise(self, event: NoiseSummary) -> list[Effect]:
        seconds = max(1, round((event.until - event.since).total_seconds()))
        parts = []
        if event.frame_errors:
            discarded = (
                f" ({event.bytes_discarded} bytes discarded)" if event.bytes_discarded else ""
            )
            parts.append(f"{event.frame_errors} more frame errors{discarded}")
        if event.faults:
            parts.append(f"{event.faults} more device faults")
        if event.dropped:
            kinds = ", ".join(f"{n} {k}" for k, n in event.dropped_kinds)
            parts.append(
                f"{event.dropped} events beyond the device's rate were not applied ({kinds})"
            )
        if not parts:
            return []
        code = "device_flood" if event.dropped else "frame_error"
        return [
            self._alarm(
                code,
                "critical" if event.dropped else "warning",
                f"{event.device}: {'; '.join(parts)} in the last {seconds} s "
                "(one alarm per interval; check the cable and the device)",
                event.device,
            )
        ]

    def _clock_sync(self, event: ClockSync) -> AlarmRaised:
        if event.synchronized:
            return self._alarm(
                "clock_synchronized", "info", "the computer's clock is synchronised again"
            )
        return self._alarm(
            "clock_unsynchronized",
            "warning",
            "the computer's clock is not synchronised by a time service: signed commands may be "
            "refused as outside their time window and records carry a drifting time; start the "
            "time service (docs/operations.md, Time)",
        )

    def _disk_space(self, event: DiskSpace) -> AlarmRaised:
        if event.low:
            return self._alarm(
                "disk_space_low",
                "critical",
                f"the journal's disk has {event.free_mb} MB free, below {event.threshold_mb} MB: "
                "free space or the table will stop settling when it is full",
            )
        return self._alarm(
            "disk_space_ok",
            "info",
            f"the journal's disk has {event.free_mb} MB free again (threshold "
            f"{event.threshold_mb} MB)",
        )

    def _alarm(
        self,
        code: str,
        severity: Literal["info", "warning", "critical"],
        detail: str,
        device: str | None = None,
        round_id: str | None = None,
        *,
        latch: bool = False,
        by: str | None = None,
    ) -> AlarmRaised:
        if round_id is None and self.round is not None and not self.round.closed:
            round_id = self.round.round_id
        payload = AlarmPayload(
            code=code,
            severity=severity,
            detail=detail,
            device=device,
            round_id=round_id,
            alarm_id=self._new_alarm_id(),
            raised_at=self._clock(),
            ack_required=latch or severity == "critical",
            by=by,
        )
        if payload.ack_required:
            self.latched[payload.alarm_id] = payload
        return AlarmRaised(payload)

    def restore_latched(self, alarms: Iterable[AlarmPayload]) -> None:
        """The latched alarms the journal kept across a restart."""
        self.latched = {a.alarm_id: a for a in alarms if a.alarm_id}

    # --- commands -----------------------------------------------------------------------

    def _command(self, command: Command, source: tuple[str, str]) -> list[Effect]:
        kind = command.kind
        handler = _COMMANDS.get(type(command))
        if handler is None:
            return [CommandReply(command.request_id, kind, False, f"unknown command {kind}")]
        try:
            return handler(self, command, source)
        except (ValueError, CardError) as exc:
            return [CommandReply(command.request_id, kind, False, str(exc))]

    def _set_wagers(self, command: SetWagers) -> list[Effect]:
        if command.seat not in self.occupied:
            raise ValueError(f"unknown seat {command.seat}")
        self.wagers[command.seat] = command.wagers
        return [CommandReply(command.request_id, command.kind, True)]

    def _status_request(self, command: StatusRequest) -> list[Effect]:
        status = self.status()
        data = status.model_dump(mode="json")
        return [
            CommandReply(command.request_id, command.kind, True, data=data),
            StatusChanged(status),
        ]

    def _open_or_close(self, command: OpenTable | CloseTable) -> list[Effect]:
        self.table_open = isinstance(command, OpenTable)
        return [CommandReply(command.request_id, command.kind, True), StatusChanged(self.status())]

    def _set_seats(self, command: SetSeats) -> list[Effect]:
        unknown = sorted(set(command.occupied) - set(self.occupied))
        if unknown:
            raise ValueError(
                f"unknown seat {', '.join(unknown)} (seats: {', '.join(self.occupied)})"
            )
        self.occupied.update(command.occupied)
        data = {"occupied": dict(self.occupied)}
        return [CommandReply(command.request_id, command.kind, True, data=data)]

    def _enter_dice(self, command: EnterDice) -> list[Effect]:
        kind = command.kind
        if "round_id" in command.model_fields_set:
            # Checked again here, where it acts: a deal may have ended and another begun since
            # the MQTT layer looked (docs/mqtt.md, round-scoped).
            r = self.round
            dealing = r.round_id if r is not None and not r.closed else None
            if command.round_id != dealing:
                return [
                    CommandReply(
                        command.request_id,
                        kind,
                        False,
                        f"the dice are for {command.round_id or 'the next deal'}, "
                        f"but {'round ' + dealing if dealing else 'no round'} is "
                        "being dealt: nothing was changed",
                    )
                ]
        effects = self._position(
            PositionDrawn(device="dealer", method="dice_manual", dice=command.dice)
        )
        rejected = [
            e
            for e in effects
            if isinstance(e, AlarmRaised)
            and e.payload.code in ("position_ignored", "position_invalid")
        ]
        if rejected:
            return [
                CommandReply(command.request_id, kind, False, rejected[0].payload.detail),
                *effects,
            ]
        return [CommandReply(command.request_id, kind, True), *effects]

    def _authenticate(self, command: Authenticate) -> list[Effect]:
        # The table records who asked; the MQTT service hashes the files.
        data = {
            "nonce": command.nonce,
            "config_digest": self._config_digest,
            "software_digest": self._software[0],
            "software_verified": self._software[1],
            "house_way": self.settings.way.name if self.settings.way else "",
            "house_way_digest": self.settings.way.digest if self.settings.way else "",
        }
        return [CommandReply(command.request_id, command.kind, True, data=data)]

    def _sign_out(self, command: SignOut) -> list[Effect]:
        if self.dealer_id is None:
            raise ValueError("no dealer is signed in")
        was, self.dealer_id = self.dealer_id, None
        return [
            CommandReply(command.request_id, command.kind, True, data={"dealer_id": was}),
            StatusChanged(self.status()),
        ]

    def _acknowledge(self, command: AcknowledgeAlarm, source: tuple[str, str]) -> list[Effect]:
        alarm = self.latched.pop(command.alarm_id, None)
        if alarm is None:
            raise ValueError(f"no unacknowledged alarm {command.alarm_id}")
        ack = AlarmAckPayload(
            alarm_id=alarm.alarm_id,
            code=alarm.code,
            raised_at=alarm.raised_at,
            acknowledged_at=self._clock(),
            by=command.by,
            channel=source[0],
            identity=source[1],
            note=command.note,
        )
        return [
            CommandReply(command.request_id, command.kind, True, data=ack.model_dump(mode="json")),
            AlarmAcknowledged(ack),
        ]  # handle() adds the status: the latched alarms changed

    def _protection(self, finding: dict[str, Any]) -> list[Effect]:
        """A game-protection test past its threshold: an alarm a named person must acknowledge
        whatever its severity (docs/protection.md), and its statistics on ``protection``."""
        alarm = self._alarm(
            "game_protection",
            finding["severity"],
            f"{finding['title']}: {finding['detail']} — {finding['advice']}",
            latch=True,
        )
        payload = ProtectionPayload(alarm_id=alarm.payload.alarm_id, **finding)
        return [alarm, ProtectionAlarmed(payload)]

    def _refused(self, event: Refusal) -> list[Effect]:
        """Every refusal is journaled (by the daemon); one alarm per source and window once it
        has been refused ``refusals_before_alarm`` times: a guesser or a forger is seen."""
        now = self._clock()
        key = (event.channel, event.identity, event.reason)
        first, count, alarmed = self._refusals.get(key, (now, 0, False))
        if now - first > self.refusal_window:
            first, count, alarmed = now, 0, False
        count += event.count
        effects: list[Effect] = []
        # Over the rate is a flood already: alarmed at once, not after N reports.
        limit = 1 if event.reason == "rate_limited" else self.refusals_before_alarm
        if count >= limit and not alarmed:
            alarmed = True
            who = f"{event.channel} {event.identity}".strip()
            # A guesser, a forger or a flood is a security event; a malformed command is a
            # faulty integration: seen, not latched.
            severity: Literal["warning", "critical"] = (
                "warning" if event.reason in ("invalid", "disabled") else "critical"
            )
            effects.append(
                self._alarm(
                    "command_refused",
                    severity,
                    f"{count} {event.command} commands from {who} refused since "
                    f"{iso(first)} ({event.reason}: {event.detail}); call security if "
                    "nobody at the table can explain it",
                )
            )
        if len(self._refusals) > 1_000:  # a flood of sources: forget the oldest half
            for old in sorted(self._refusals, key=lambda k: self._refusals[k][0])[:500]:
                del self._refusals[old]
        self._refusals[key] = (first, count, alarmed)
        return effects

    def _sign_in(self, command: SignIn) -> list[Effect]:
        """A dealer takes the table; the rounds opened from now on record them. A different
        dealer already signed in makes it a rotation (journaled as this command)."""
        was, self.dealer_id = self.dealer_id, command.dealer_id
        data = {"dealer_id": command.dealer_id, "replaces": was, "rotation": was is not None}
        return [
            CommandReply(command.request_id, command.kind, True, data=data),
            StatusChanged(self.status()),
        ]

    def _void(self, command: VoidRound) -> list[Effect]:
        r = self.round
        if r is None or (command.round_id is not None and command.round_id != r.round_id):
            raise ValueError(f"no round {command.round_id or ''} to void".replace("  ", " "))
        if r.voided or (r.closed and not r.settled):
            raise ValueError(f"round {r.round_id} is already closed as dead or void")
        note = " after settlement: its results are void" if r.settled else ""
        by = f" by {command.by}" if command.by else ""
        return [
            CommandReply(command.request_id, "void_round", True, data={"round_id": r.round_id}),
            *self._close_dead(r, [Problem(code="void", detail=command.reason)], "void"),
            self._alarm(
                "round_voided",
                "warning",
                f"round {r.round_id} voided{by}{note}: {command.reason}",
                None,
                r.round_id,
                by=command.by,
            ),
        ]

    def _player_setting(self, command: PlayerSetting) -> list[Effect]:
        r = self.round
        if r is None or not r.settled or r.voided or not r.dealer_cards:
            raise ValueError(
                "no settled round: a player sets only after the dealer (docs/rules.md §6)"
            )
        if command.round_id is not None and command.round_id != r.round_id:
            raise ValueError(f"round {command.round_id} is not the current round {r.round_id}")
        cards = r.seat_cards.get(command.seat)
        if cards is None:
            raise ValueError(f"seat {command.seat} has no hand this round")
        if not command.house_way and command.front is None:
            raise ValueError("give the two front cards, or house_way true")
        setting, result = player_result(
            card_texts(cards),
            None if command.house_way else command.front,
            r.dealer_setting,
            r.dealer_cards,
            self.settings.rules,
            seat=command.seat,
            house_way_of=self.settings.set_by_house_way,
        )
        earlier = r.players.get(command.seat)
        if earlier is not None:
            refused = self._correction_refused(r, command)
            if refused:
                return refused
        w = self.wagers.get(command.seat)
        amount = w.pai_gow if w else None
        entry = int(earlier.setting_id.rsplit("/", 1)[1]) + 1 if earlier else 1
        payload = PlayerPayload(
            round_id=r.round_id,
            seat=command.seat,
            setting=setting_out(setting),
            house_way=command.house_way,
            foul=setting.is_foul,
            pai_gow=result.to_dict(),
            wager=amount,
            win=None
            if amount is None
            else {"win": amount, "push": 0, "lose": -amount}[str(result.outcome)],
            setting_id=f"{r.round_id}/{command.seat}/{entry}",
            corrects=earlier.setting_id if earlier else None,
            dealer_id=r.dealer_id,
            by=command.by,
            reason=command.reason.strip(),
        )
        r.players[command.seat] = payload
        effects: list[Effect] = [
            CommandReply(
                command.request_id, "player_setting", True, data=payload.model_dump(mode="json")
            ),
            PlayerSettled(payload),
        ]
        if earlier is not None:
            r.corrections += 1
            self._corrections.append(self._clock())
            effects.append(
                self._alarm(
                    "setting_corrected",
                    "warning",
                    f"seat {command.seat}'s setting in round #{r.round_seq} was corrected by "
                    f"{command.by}: {payload.reason} (entry {entry} replaces "
                    f"{earlier.setting_id}; correction {r.corrections} of at most "
                    f"{self.corrections_per_round} this round)",
                    None,
                    r.round_id,
                    by=command.by,
                )
            )
        return effects

    def _correction_refused(self, r: _Round, command: PlayerSetting) -> list[Effect]:
        """Why a correction (a seat's setting entered again) is refused, as its effects; [] when
        it may go ahead. It needs a supervisor (``by``: the display checked their badge and PIN,
        or the shared void PIN) and a reason, and stays within the limits of a round and an
        hour; a correction over a limit also raises a warning."""
        seat = command.seat
        if not command.by:
            raise ValueError(
                f"seat {seat} already has a setting this round: a correction needs a supervisor "
                "(badge and PIN) and a reason"
            )
        if not command.reason.strip():
            raise ValueError(f"a correction of seat {seat}'s setting needs a reason")
        now = self._clock()
        self._corrections = [t for t in self._corrections if now - t < CORRECTION_WINDOW]
        if r.corrections >= self.corrections_per_round:
            why = (
                "corrections are off at this table ([limits] corrections_per_round = 0)"
                if self.corrections_per_round == 0
                else f"round #{r.round_seq} has had {r.corrections} correction(s), the most "
                "[limits] corrections_per_round allows"
            )
        elif len(self._corrections) >= self.corrections_per_hour:
            why = (
                "corrections are off at this table ([limits] corrections_per_hour = 0)"
                if self.corrections_per_hour == 0
                else f"{len(self._corrections)} correction(s) in the last hour at this table, "
                "the most [limits] corrections_per_hour allows"
            )
        else:
            return []
        detail = f"the correction of seat {seat}'s setting is refused: {why}; the entry stands"
        return [
            CommandReply(command.request_id, command.kind, False, detail),
            self._alarm(
                "correction_refused",
                "warning",
                f"{detail} (asked by {command.by})",
                None,
                r.round_id,
                by=command.by,
            ),
        ]


#: Each event's handler (``Table._handle``; anything else is a command).
_EVENTS: dict[type, Callable[[Table, Any], list[Effect]]] = {
    DealStarted: lambda t, e: t._deal_started(e),
    PacketDealt: lambda t, e: t._packet(e),
    CardDealt: lambda t, e: t._card(e),
    StubVerified: lambda t, e: t._stub(e),
    DealEnded: lambda t, e: t._deal_ended(e),
    PositionDrawn: lambda t, e: t._position(e),
    DeviceOnline: lambda t, e: t._device(e),
    DeviceOffline: lambda t, e: t._device(e),
    DeviceFault: lambda t, e: t._device_fault(e),
    FrameError: lambda t, e: t._frame_error(e),
    Tick: lambda t, e: t._tick(e.now),
    NoiseSummary: lambda t, e: t._noise(e),
    DiskSpace: lambda t, e: [t._disk_space(e)],
    ClockSync: lambda t, e: t._clock_synced(e),
    JournalRecovered: lambda t, e: t._recover(e.now),
    Refusal: lambda t, e: t._refused(e),
    ProtectionFinding: lambda t, e: t._protection(e.finding),
}

#: Each command's handler: (table, command, source) → effects (``Table._command``).
_COMMANDS: dict[type[Command], Callable[[Table, Any, tuple[str, str]], list[Effect]]] = {
    OpenTable: lambda t, c, _: t._open_or_close(c),
    CloseTable: lambda t, c, _: t._open_or_close(c),
    VoidRound: lambda t, c, _: t._void(c),
    SetSeats: lambda t, c, _: t._set_seats(c),
    SetWagers: lambda t, c, _: t._set_wagers(c),
    EnterDice: lambda t, c, _: t._enter_dice(c),
    PlayerSetting: lambda t, c, _: t._player_setting(c),
    Authenticate: lambda t, c, _: t._authenticate(c),
    AcknowledgeAlarm: lambda t, c, source: t._acknowledge(c, source),
    SignIn: lambda t, c, _: t._sign_in(c),
    SignOut: lambda t, c, _: t._sign_out(c),
    StatusRequest: lambda t, c, _: t._status_request(c),
}
