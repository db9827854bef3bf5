"""What the round state machine takes in (device events, commands, ticks) and gives out: the
effects the daemon journals and every listener hears, in order."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.messages import (
    AlarmAckPayload,
    AlarmPayload,
    Command,
    DevicePayload,
    PlayerPayload,
    PositionDraw,
    ProtectionPayload,
    RoundPayload,
    StatusPayload,
)
from drivers.events import (
    DeviceEvent,
)

PACKETS = 7
PACKET_SIZE = 7
DEALER_POSITION = 1


@dataclass(frozen=True, slots=True)
class Tick:
    """The daemon's clock, fed every second or so: lets a silent deal time out."""

    now: datetime


@dataclass(frozen=True, slots=True)
class NoiseSummary:
    """What a device's limiter held back over an interval (controller/table/limits.py): frame
    errors and faults beyond the first of the interval, and events beyond the device's rate.
    ``bytes_discarded``: the bytes those frame errors threw away (line noise, bad frames)."""

    device: str
    since: datetime
    until: datetime
    frame_errors: int = 0
    faults: int = 0
    dropped: int = 0
    dropped_kinds: tuple[tuple[str, int], ...] = ()
    bytes_discarded: int = 0

    kind = "noise_summary"

    def record(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "frame_errors": self.frame_errors,
            "bytes_discarded": self.bytes_discarded,
            "faults": self.faults,
            "dropped": self.dropped,
            "dropped_kinds": dict(self.dropped_kinds),
        }


@dataclass(frozen=True, slots=True)
class ClockSync:
    """The table computer's clock became synchronised, or stopped being (controller/clock_sync.py):
    signed commands' time window and every record's time depend on it."""

    synchronized: bool

    kind = "clock_sync"

    def record(self) -> dict[str, Any]:
        return {"synchronized": self.synchronized}


@dataclass(frozen=True, slots=True)
class DiskSpace:
    """The journal's filesystem crossed the configured free-space threshold (either way)."""

    free_mb: int
    threshold_mb: int
    low: bool

    kind = "disk_space"

    def record(self) -> dict[str, Any]:
        return {"free_mb": self.free_mb, "threshold_mb": self.threshold_mb, "low": self.low}


@dataclass(frozen=True, slots=True)
class JournalRecovered:
    """The daemon's probe: journal writes may work again; end the fault (tilt) if they do."""

    now: datetime

    kind = "journal_fault"


@dataclass(frozen=True, slots=True)
class Refusal:
    """A command refused before it reached the table (a wrong PIN, a bad or stale signature,
    a replay, over the rate): journaled as ``command_refused``; the table raises an alarm once
    one source has been refused ``refusals_before_alarm`` times within the window."""

    channel: str
    identity: str
    command: str
    reason: str  # wrong_pin, locked_out, signature, rate_limited
    detail: str
    count: int = 1  # rate_limited: the refusals this summary stands for

    kind = "command_refused"

    def record(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "identity": self.identity,
            "command": self.command,
            "reason": self.reason,
            "detail": self.detail,
            "count": self.count,
        }


@dataclass(frozen=True, slots=True)
class ProtectionFinding:
    """Game protection's finding (controller/protection/, a ``Finding.to_dict()``): the table
    raises a latched ``game_protection`` alarm and the ``protection`` message."""

    finding: dict[str, Any]

    kind = "protection_finding"


TableEvent = (
    DeviceEvent
    | Command
    | Tick
    | NoiseSummary
    | DiskSpace
    | ClockSync
    | JournalRecovered
    | Refusal
    | ProtectionFinding
)


# --- effects --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RoundOpened:
    """A round begins. ``draw``: a first-position draw made before the deal, now this round's;
    ``dealer_id``: the dealer signed in as it opened, whom its result names."""

    round_id: str
    round_seq: int
    shuffle_id: str
    opened_at: datetime
    draw: PositionDraw | None = None
    dealer_id: str | None = None


@dataclass(frozen=True, slots=True)
class RoundClosed:
    """A round's final word (settled, dead, misdeal or void): journal it, then send and show it.
    ``revises_settled``: a void of a round that had already settled (its results are void)."""

    payload: RoundPayload
    revises_settled: bool = False


@dataclass(frozen=True, slots=True)
class PlayerSettled:
    payload: PlayerPayload


@dataclass(frozen=True, slots=True)
class AlarmRaised:
    payload: AlarmPayload


@dataclass(frozen=True, slots=True)
class AlarmAcknowledged:
    """A latched alarm acknowledged by a named person: journaled, sent on ``alarm_ack``."""

    payload: AlarmAckPayload


@dataclass(frozen=True, slots=True)
class ProtectionAlarmed:
    """A game-protection alarm's statistics: journaled, sent on ``protection``."""

    payload: ProtectionPayload


@dataclass(frozen=True, slots=True)
class DeviceChanged:
    payload: DevicePayload


@dataclass(frozen=True, slots=True)
class StatusChanged:
    payload: StatusPayload


@dataclass(frozen=True, slots=True)
class RoundProgress:
    """For the display only: how far the current deal has got."""

    round_id: str
    packets: int
    cards: int
    position: PositionDraw | None
    waiting_for: str


@dataclass(frozen=True, slots=True)
class CommandReply:
    request_id: str | None
    command: str
    ok: bool
    error: str | None = None
    data: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class DealRecorded:
    """A complete deal's identity, kept so the same shuffle or the same cards are refused if
    they come again (docs/faults.md, replayed deals)."""

    round_id: str
    shuffle_id: str
    fingerprint: str


@dataclass(frozen=True, slots=True)
class FaultCleared:
    """The journal accepts writes again: the record of the fault (start, end, what was lost)."""

    record: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SeatsChanged:
    """The seats in play changed (kept across a restart)."""

    occupied: Mapping[str, bool | None]


@dataclass(frozen=True, slots=True)
class DealerChanged:
    """A dealer signed in or out (kept across a restart); None: nobody is signed in."""

    dealer_id: str | None


@dataclass(frozen=True, slots=True)
class LatchedChanged(StatusChanged):
    """The latched (unacknowledged) alarms changed: the status that lists them, and all of
    them, oldest first (kept across a restart). A status change to every listener."""

    latched: tuple[AlarmPayload, ...] = ()


@dataclass(frozen=True, slots=True)
class RoundRefused:
    """A command naming a round it would not act on, refused by the table (docs/mqtt.md,
    round-scoped): journaled as the refusal (``command_refused``), not as the command."""

    refusal: Refusal


@dataclass(frozen=True, slots=True)
class Refused:
    """A refusal the table counted (every :class:`Refusal`, and a round-scoped refusal): heard
    (the metrics count commands refused by kind and reason), journaled as its event."""

    refusal: Refusal


Effect = (
    RoundOpened
    | RoundClosed
    | PlayerSettled
    | AlarmRaised
    | AlarmAcknowledged
    | ProtectionAlarmed
    | DeviceChanged
    | StatusChanged
    | RoundProgress
    | CommandReply
    | DealRecorded
    | FaultCleared
    | SeatsChanged
    | DealerChanged
    | LatchedChanged
    | RoundRefused
    | Refused
)
