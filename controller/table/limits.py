"""How much a noisy or flooding device may cost: pure, fed the daemon's clock (no I/O).

Line noise on a serial cable becomes a frame error every few bytes; a broken device may repeat a
fault or flood valid-looking frames. Each would be journaled, alarmed, queued for MQTT and logged,
and at serial speed that is gigabytes an hour (docs/faults.md). The limiter stands in front of the
table, per device:

- the first frame error and the first device fault of an interval pass (one alarm at once); the
  rest of the interval are counted, not applied (frame errors with the bytes they discarded,
  for the summary: endless line noise, before a device's first good frame as after it, is one
  alarm at once and one summary per interval);
- every event spends a token of a bucket refilled at ``events_per_minute`` (a burst of a minute's
  worth); an event without a token is counted, not applied (a flood's deal is left incomplete and
  so goes dead by the deal timeout: fail closed);
- at the end of each interval with anything held back, :meth:`flush` gives one
  :class:`~controller.table.effects.NoiseSummary` per device, which the table turns into one alarm
  with the counts and the daemon journals as one event.

So one device costs the journal at most a few rows per interval plus its rate of admitted events.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from controller.table.effects import NoiseSummary
from drivers.events import DeviceEventBase, DeviceFault, FrameError


@dataclass
class _Device:
    tokens: float
    refilled: datetime
    window_start: datetime
    frame_errors_passed: int = 0
    faults_passed: int = 0
    frame_errors: int = 0
    bytes_discarded: int = 0
    faults: int = 0
    dropped: Counter[str] = field(default_factory=Counter)

    def held(self) -> bool:
        return bool(self.frame_errors or self.faults or self.dropped)


class DeviceLimiter:
    """Admit or hold back device events; ``interval`` in seconds, ``events_per_minute`` a rate."""

    def __init__(self, *, interval: float = 60.0, events_per_minute: int = 600) -> None:
        if interval <= 0 or events_per_minute <= 0:
            raise ValueError("interval and events_per_minute must be positive")
        self.interval = interval
        self.rate = events_per_minute / 60.0
        self.burst = float(events_per_minute)
        self._devices: dict[str, _Device] = {}

    def admit(self, event: DeviceEventBase, now: datetime) -> bool:
        """True: apply the event (journal, table, alarm). False: it was counted for the summary."""
        d = self._devices.get(event.device)
        if d is None:
            d = self._devices[event.device] = _Device(self.burst, now, now)
        elapsed = (now - d.refilled).total_seconds()
        if elapsed > 0:
            d.tokens = min(self.burst, d.tokens + elapsed * self.rate)
            d.refilled = now
        if isinstance(event, FrameError):
            if d.frame_errors_passed:
                d.frame_errors += 1
                d.bytes_discarded += event.discarded
                return False
            d.frame_errors_passed = 1
        elif isinstance(event, DeviceFault):
            if d.faults_passed:
                d.faults += 1
                return False
            d.faults_passed = 1
        if d.tokens < 1.0:
            d.dropped[str(getattr(event, "kind", "event"))] += 1
            return False
        d.tokens -= 1.0
        return True

    def flush(self, now: datetime) -> list[NoiseSummary]:
        """Close every interval that has ended: a summary for each device that held anything back.
        A device whose interval ended quietly starts a new one (its next error passes again)."""
        out: list[NoiseSummary] = []
        for name, d in self._devices.items():
            if (now - d.window_start).total_seconds() < self.interval:
                continue
            if d.held():
                out.append(
                    NoiseSummary(
                        device=name,
                        since=d.window_start,
                        until=now,
                        frame_errors=d.frame_errors,
                        faults=d.faults,
                        dropped=sum(d.dropped.values()),
                        dropped_kinds=tuple(sorted(d.dropped.items())),
                        bytes_discarded=d.bytes_discarded,
                    )
                )
            d.window_start = now
            d.frame_errors_passed = d.faults_passed = 0
            d.frame_errors = d.faults = d.bytes_discarded = 0
            d.dropped.clear()
        return out

    def holding(self) -> int:
        """Events held back in the current intervals, all devices (for status and tests)."""
        return sum(
            d.frame_errors + d.faults + sum(d.dropped.values()) for d in self._devices.values()
        )
