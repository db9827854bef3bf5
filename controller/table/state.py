"""The table's state: its settings, the round and its phase, each part's state as one dataclass,
and the one copy of it all that a rollback restores (:func:`clone`). No I/O.

Everything ``Table.handle`` may change lives in :class:`TableState`; the snapshot is a
:func:`clone` of that object, so a field added to any part is rolled back with the rest without
anyone listing it (issue 32: a hand-written list once missed ``clock_synchronized``)."""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from enum import Enum
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel

from controller.game.house_way import house_way
from controller.game.paytables import Paytable
from controller.game.setting import Rules, Setting
from controller.game.way import Way
from controller.messages import (
    AlarmPayload,
    DeviceIdentity,
    FaultOut,
    PlayerPayload,
    PositionDraw,
    StatusPayload,
    Wagers,
)
from controller.table.effects import PACKET_SIZE, PACKETS

#: A source refused this many times within REFUSAL_WINDOW raises one ``command_refused`` alarm.
REFUSALS_BEFORE_ALARM = 3
REFUSAL_WINDOW = timedelta(minutes=10)

#: Corrections of players' settings a round, and an hour, at most ([limits] corrections_per_round
#: and corrections_per_hour): a correction needs a supervisor and a reason, and raises an alarm.
CORRECTIONS_PER_ROUND = 2
CORRECTIONS_PER_HOUR = 6
CORRECTION_WINDOW = timedelta(hours=1)

#: Latched alarms listed in the status (the oldest; the rest are counted): a burst must not make
#: every retained status message grow without bound.
STATUS_ALARMS = 50

#: Complete deals remembered to refuse a replay (the same shuffle id or the same cards): about
#: two weeks of a busy table, in about 4 MB (64-bit keys, round numbers as values).
RECENT_DEALS = 20_000


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
    #: What each device is ([devices.<name>.identity]): sent in its status (DevicePayload).
    identities: Mapping[str, DeviceIdentity] = field(default_factory=dict)

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


@dataclass(frozen=True, slots=True)
class RoundIds:
    """The rounds as they stood before an event: the one being dealt (None between deals) and
    the newest (dealt or closed). With the event's effects they say where it is journaled."""

    open: str | None = None
    latest: str | None = None


class Phase(Enum):
    """Where a round is: dealing, then settled (results out) or closed without results (dead or
    misdealt, or voided while dealing); a settled round may still be voided."""

    DEALING = "dealing"
    SETTLED = "settled"
    DEAD = "dead"
    VOID = "void"
    VOIDED_AFTER_SETTLEMENT = "voided_after_settlement"


@dataclass
class Round:
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


def deal_key(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def deal_fingerprint(packets: Iterable[tuple[str, ...]], stub: tuple[str, ...] | None) -> str:
    """The identity of a deal's exact cards in dealing order (and the stub), as 32 hex digits."""
    text = "|".join(",".join(p) for p in packets) + "/" + ",".join(stub or ())
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


#: Deals kept in the small layer of :class:`DealMemory` before it is folded into the large one.
RECENT_LAYER = 64


@dataclass
class DealMemory:
    """Earlier complete deals (fingerprint and shuffle id keys → round number), to refuse a
    replay. Two layers so a snapshot stays cheap: ``base`` is read-only and shared by every
    copy (a new one is built when ``recent`` is folded in, once every RECENT_LAYER deals), and
    only the small ``recent`` layer is copied with the rest of the state."""

    base: Mapping[str, Mapping[int, int]] = field(
        default_factory=lambda: MappingProxyType({"deals": {}, "shuffles": {}})
    )
    recent: dict[str, OrderedDict[int, int]] = field(
        default_factory=lambda: {"deals": OrderedDict(), "shuffles": OrderedDict()}
    )

    def load(self, deals: Iterable[tuple[int, str, str]]) -> None:
        """The deals the journal kept (round number, shuffle id, fingerprint), oldest first."""
        for round_seq, shuffle_id, fingerprint in deals:
            self.recent["deals"][deal_key(fingerprint)] = round_seq
            if shuffle_id:
                self.recent["shuffles"][deal_key(shuffle_id)] = round_seq
        self._fold()

    def get(self, layer: str, key: int) -> int | None:
        found = self.recent[layer].get(key)
        return found if found is not None else self.base[layer].get(key)

    def remember(self, round_seq: int, shuffle_id: str, fingerprint: str) -> None:
        self.recent["deals"][deal_key(fingerprint)] = round_seq
        if shuffle_id:
            self.recent["shuffles"][deal_key(shuffle_id)] = round_seq
        if len(self.recent["deals"]) >= RECENT_LAYER:
            self._fold()

    def _fold(self) -> None:
        """A new read-only base: the old one, then the recent deals, the oldest beyond
        RECENT_DEALS forgotten."""
        base: dict[str, Mapping[int, int]] = {}
        for layer in ("deals", "shuffles"):
            merged = OrderedDict(self.base[layer])
            for key, seq in self.recent[layer].items():
                merged.pop(key, None)
                merged[key] = seq
            while len(merged) > RECENT_DEALS:
                merged.popitem(last=False)
            base[layer] = MappingProxyType(merged)
            self.recent[layer] = OrderedDict()
        self.base = MappingProxyType(base)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DealMemory):
            return NotImplemented
        return all(
            {**self.base[k], **self.recent[k]} == {**other.base[k], **other.recent[k]}
            for k in ("deals", "shuffles")
        )


@dataclass
class Fault:
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

    def out(self) -> FaultOut:
        return FaultOut(
            code="journal_write_failed",
            detail=self.detail,
            since=self.since,
            events_lost=self.events_lost,
        )


# --- each part's state ----------------------------------------------------------------------


@dataclass
class RoundsState:
    """The round (controller/table/rounds.py): the current one, a draw held for the next deal,
    the next round number and the deals remembered against a replay."""

    round: Round | None = None
    pending_draw: PositionDraw | None = None
    next_seq: int = 1
    deals: DealMemory = field(default_factory=DealMemory)


@dataclass
class FloorState:
    """The floor (controller/table/floor.py): open or closed, seats, wagers, the dealer, and
    the corrections of players' settings with their limits."""

    table_open: bool = True
    occupied: dict[str, bool | None] = field(default_factory=dict)
    wagers: dict[str, Wagers] = field(default_factory=dict)
    dealer_id: str | None = None
    #: When each correction of the last hour was made (any round), oldest first.
    corrections: list[datetime] = field(default_factory=list)
    corrections_per_round: int = CORRECTIONS_PER_ROUND
    corrections_per_hour: int = CORRECTIONS_PER_HOUR


@dataclass
class AlarmsState:
    """The alarms (controller/table/alarms.py): the latched ones by id, and the refusals
    counted per (channel, identity, reason) as (first refusal, count, alarmed)."""

    latched: dict[str, AlarmPayload] = field(default_factory=dict)
    refusals: dict[tuple[str, str, str], tuple[datetime, int, bool]] = field(default_factory=dict)
    refusals_before_alarm: int = REFUSALS_BEFORE_ALARM
    refusal_window: timedelta = REFUSAL_WINDOW


@dataclass
class HealthState:
    """Devices and the computer (controller/table/health.py)."""

    devices: dict[str, bool] = field(default_factory=dict)
    #: Whether the computer's clock is synchronised (None: not checked, or cannot tell).
    clock_synchronized: bool | None = None


@dataclass
class TableState:
    """Everything ``Table.handle`` may change, and nothing else."""

    rounds: RoundsState = field(default_factory=RoundsState)
    floor: FloorState = field(default_factory=FloorState)
    alarms: AlarmsState = field(default_factory=AlarmsState)
    health: HealthState = field(default_factory=HealthState)
    fault: Fault | None = None

    def open_round(self) -> Round | None:
        """The round being dealt, if any."""
        r = self.rounds.round
        return r if r is not None and not r.closed else None


@dataclass(frozen=True)
class TableEnv:
    """What the parts are given and never change: the settings, the clock and the id sources,
    and what the table says of its software."""

    settings: TableSettings
    clock: Callable[[], datetime]
    new_round_id: Callable[[], str]
    new_alarm_id: Callable[[], str]
    software_version: str = ""
    config_digest: str = ""
    software_digest: str = ""
    software_verified: bool | None = None


def status_of(state: TableState, env: TableEnv) -> StatusPayload:
    """The table's status as the retained ``status`` message and the pages show it."""
    way = env.settings.way
    open_round = state.open_round()
    latched = state.alarms.latched
    return StatusPayload(
        state="fault" if state.fault is not None else "online",
        fault=state.fault.out() if state.fault is not None else None,
        table_open=state.floor.table_open,
        devices=dict(state.health.devices),
        round_id=open_round.round_id if open_round is not None else None,
        software_version=env.software_version,
        config_digest=env.config_digest,
        software_digest=env.software_digest,
        software_verified=env.software_verified,
        house_way=way.name if way else "",
        house_way_digest=way.digest if way else "",
        # A flood adds one a minute: the retained status stays small, the total is told.
        alarms_unacknowledged=list(latched.values())[:STATUS_ALARMS],
        alarms_unacknowledged_total=len(latched),
        dealer_id=state.floor.dealer_id,
        clock_synchronized=state.health.clock_synchronized,
    )


# --- the copy a rollback restores -----------------------------------------------------------

_T = TypeVar("_T")

#: Values shared by a copy: nothing changes them in place.
_IMMUTABLE = (
    str,
    int,
    float,
    bool,
    bytes,
    type(None),
    date,
    timedelta,
    Enum,
    MappingProxyType,
    tuple,
    frozenset,
)


def clone(value: _T) -> _T:
    """A copy of ``value`` that shares only what cannot change: every mutable dataclass, dict
    and list is copied, all the way down; immutable values (numbers, text, times, enums,
    tuples, frozen dataclasses and frozen pydantic models, read-only mappings) are shared.
    Anything else is a TypeError: the state must not hold a mutable value a copy would share."""
    return _clone(value)  # type: ignore[no-any-return]


_SHARE, _DICT, _LIST, _DATACLASS = range(4)

#: How each type met in the state is copied (found once a type: a snapshot is taken every event).
_KINDS: dict[type, int] = {}
_FIELDS: dict[type, tuple[str, ...]] = {}


def _kind(cls: type) -> int:
    kind = _KINDS.get(cls)
    if kind is not None:
        return kind
    if issubclass(cls, _IMMUTABLE):
        kind = _SHARE
    elif issubclass(cls, dict):  # dict, OrderedDict, Counter: their keys are immutable
        kind = _DICT
    elif issubclass(cls, list):
        kind = _LIST
    elif dataclasses.is_dataclass(cls):
        params = next(
            k.__dict__["__dataclass_params__"]
            for k in cls.__mro__
            if k.__dict__.get("__dataclass_params__")
        )
        kind = _SHARE if params.frozen else _DATACLASS
        _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls))
    elif issubclass(cls, BaseModel) and cls.model_config.get("frozen"):
        kind = _SHARE
    else:
        raise TypeError(f"the table's state holds a mutable {cls.__name__}: cannot copy it")
    _KINDS[cls] = kind
    return kind


def _all_shared(values: Iterable[Any]) -> bool:
    return all(_kind(cls) == _SHARE for cls in set(map(type, values)))


def _clone(value: Any) -> Any:
    kind = _KINDS.get(type(value))
    if kind is None:
        kind = _kind(type(value))
    if kind == _SHARE:
        return value
    if kind == _DICT:
        if _all_shared(value.values()):
            return value.copy()  # the common case, at C speed
        copied = type(value)()
        for key, item in value.items():
            copied[key] = _clone(item)
        return copied
    if kind == _LIST:
        return list(value) if _all_shared(value) else [_clone(item) for item in value]
    instance: Any = object.__new__(type(value))
    for name in _FIELDS[type(value)]:
        item = getattr(value, name)
        shared = _KINDS.get(type(item)) == _SHARE
        object.__setattr__(instance, name, item if shared else _clone(item))
    return instance
