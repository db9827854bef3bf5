"""Devices and the computer: devices online and offline, their faults and line noise, whether
the clock is synchronised, and the journal's free disk space. No I/O."""

from __future__ import annotations

from controller.messages import DevicePayload
from controller.table.alarms import Alarms
from controller.table.effects import (
    AlarmRaised,
    ClockSync,
    DeviceChanged,
    DiskSpace,
    Effect,
    NoiseSummary,
    StatusChanged,
)
from controller.table.state import TableEnv, TableState, status_of
from drivers.events import DeviceFault, DeviceOffline, DeviceOnline, FrameError


class Health:
    """Keeps ``state.health``: which devices are online, whether the clock is synchronised."""

    def __init__(self, state: TableState, env: TableEnv, alarms: Alarms) -> None:
        self.state = state
        self.env = env
        self.alarms = alarms

    def device(self, event: DeviceOnline | DeviceOffline) -> list[Effect]:
        online = isinstance(event, DeviceOnline)
        detail = event.detail if isinstance(event, DeviceOnline) else event.reason
        self.state.health.devices[event.device] = online
        effects: list[Effect] = [
            DeviceChanged(
                DevicePayload(
                    device=event.device,
                    online=online,
                    detail=detail,
                    identity=self.env.settings.identities.get(event.device),
                )
            ),
            StatusChanged(status_of(self.state, self.env)),
        ]
        if not online:
            effects.append(
                self.alarms.raise_alarm(
                    "device_offline",
                    "warning",
                    f"{event.device} went offline: {detail}".rstrip(": "),
                    event.device,
                )
            )
        return effects

    def device_fault(self, event: DeviceFault) -> list[Effect]:
        detail = f"{event.code}: {event.detail}".rstrip(": ")
        return [self.alarms.raise_alarm("device_fault", "warning", detail, event.device)]

    def frame_error(self, event: FrameError) -> list[Effect]:
        detail = f"{event.error}: {event.detail}".rstrip(": ")
        return [self.alarms.raise_alarm("frame_error", "warning", detail, event.device)]

    def noise(self, event: NoiseSummary) -> list[Effect]:
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
            self.alarms.raise_alarm(
                code,
                "critical" if event.dropped else "warning",
                f"{event.device}: {'; '.join(parts)} in the last {seconds} s "
                "(one alarm per interval; check the cable and the device)",
                event.device,
            )
        ]

    def clock_synced(self, event: ClockSync) -> list[Effect]:
        h = self.state.health
        before, h.clock_synchronized = h.clock_synchronized, event.synchronized
        said: list[Effect] = [StatusChanged(status_of(self.state, self.env))]
        # Synchronised at the first look is no news; losing it, or getting it back, is.
        if not event.synchronized or before is False:
            said.insert(0, self._clock_alarm(event))
        return said

    def _clock_alarm(self, event: ClockSync) -> AlarmRaised:
        if event.synchronized:
            return self.alarms.raise_alarm(
                "clock_synchronized", "info", "the computer's clock is synchronised again"
            )
        return self.alarms.raise_alarm(
            "clock_unsynchronized",
            "warning",
            "the computer's clock is not synchronised by a time service: signed commands may be "
            "refused as outside their time window and records carry a drifting time; start the "
            "time service (docs/operations.md, Time)",
        )

    def disk_space(self, event: DiskSpace) -> list[Effect]:
        if event.low:
            return [
                self.alarms.raise_alarm(
                    "disk_space_low",
                    "critical",
                    f"the journal's disk has {event.free_mb} MB free, below "
                    f"{event.threshold_mb} MB: free space or the table will stop settling when "
                    "it is full",
                )
            ]
        return [
            self.alarms.raise_alarm(
                "disk_space_ok",
                "info",
                f"the journal's disk has {event.free_mb} MB free again (threshold "
                f"{event.threshold_mb} MB)",
            )
        ]
