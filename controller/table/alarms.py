"""The alarms (docs/alarms.md): raising one, latching a critical one until a named person
acknowledges it, game protection's findings, and commands refused before the table. No I/O."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from controller.clock import iso
from controller.messages import AcknowledgeAlarm, AlarmAckPayload, AlarmPayload, ProtectionPayload
from controller.table.effects import (
    AlarmAcknowledged,
    AlarmRaised,
    CommandReply,
    Effect,
    LatchedChanged,
    ProtectionAlarmed,
    Refusal,
    Refused,
    StatusChanged,
)
from controller.table.state import TableEnv, TableState, status_of

Severity = Literal["info", "warning", "critical"]

#: Sources of refusals remembered at most; a flood of sources forgets the oldest half.
REFUSAL_SOURCES = 1_000


class Alarms:
    """Raises alarms and keeps the latched ones (``state.alarms``)."""

    def __init__(self, state: TableState, env: TableEnv) -> None:
        self.state = state
        self.env = env

    def raise_alarm(
        self,
        code: str,
        severity: Severity,
        detail: str,
        device: str | None = None,
        round_id: str | None = None,
        *,
        latch: bool = False,
        by: str | None = None,
    ) -> AlarmRaised:
        """An alarm, under the round being dealt unless ``round_id`` names one; a critical one
        (or ``latch``) is latched until acknowledged."""
        open_round = self.state.open_round()
        if round_id is None and open_round is not None:
            round_id = open_round.round_id
        payload = AlarmPayload(
            code=code,
            severity=severity,
            detail=detail,
            device=device,
            round_id=round_id,
            alarm_id=self.env.new_alarm_id(),
            raised_at=self.env.clock(),
            ack_required=latch or severity == "critical",
            by=by,
        )
        if payload.ack_required:
            self.state.alarms.latched[payload.alarm_id] = payload
        return AlarmRaised(payload)

    def latched_ids(self) -> tuple[str, ...]:
        return tuple(self.state.alarms.latched)

    def changed_since(self, before: tuple[str, ...], effects: list[Effect]) -> list[Effect]:
        """``effects``, and if the latched alarms are not the ones ``before`` named, the status
        that lists them as ``LatchedChanged`` (in place of the last status change, if any)."""
        latched = self.state.alarms.latched
        if tuple(latched) == before:
            return effects
        said = LatchedChanged(status_of(self.state, self.env), tuple(latched.values()))
        last = max((i for i, e in enumerate(effects) if isinstance(e, StatusChanged)), default=-1)
        if last < 0:
            return [*effects, said]  # the retained status lists them
        return [*effects[:last], said, *effects[last + 1 :]]

    def restore_latched(self, alarms: Iterable[AlarmPayload]) -> None:
        """The latched alarms the journal kept across a restart."""
        self.state.alarms.latched = {a.alarm_id: a for a in alarms if a.alarm_id}

    def acknowledge(self, command: AcknowledgeAlarm, source: tuple[str, str]) -> list[Effect]:
        alarm = self.state.alarms.latched.pop(command.alarm_id, None)
        if alarm is None:
            raise ValueError(f"no unacknowledged alarm {command.alarm_id}")
        ack = AlarmAckPayload(
            alarm_id=alarm.alarm_id,
            code=alarm.code,
            raised_at=alarm.raised_at,
            acknowledged_at=self.env.clock(),
            by=command.by,
            channel=source[0],
            identity=source[1],
            note=command.note,
        )
        return [
            CommandReply(command.request_id, command.kind, True, data=ack.model_dump(mode="json")),
            AlarmAcknowledged(ack),
        ]  # the table adds the status: the latched alarms changed

    def protection(self, finding: dict[str, Any]) -> list[Effect]:
        """A game-protection test past its threshold: an alarm a named person must acknowledge
        whatever its severity (docs/protection.md), and its statistics on ``protection``."""
        alarm = self.raise_alarm(
            "game_protection",
            finding["severity"],
            f"{finding['title']}: {finding['detail']} — {finding['advice']}",
            latch=True,
        )
        payload = ProtectionPayload(alarm_id=alarm.payload.alarm_id, **finding)
        return [alarm, ProtectionAlarmed(payload)]

    def refused(self, event: Refusal) -> list[Effect]:
        """Every refusal is journaled (by the daemon); one alarm per source and window once it
        has been refused ``refusals_before_alarm`` times: a guesser or a forger is seen."""
        s = self.state.alarms
        now = self.env.clock()
        key = (event.channel, event.identity, event.reason)
        first, count, alarmed = s.refusals.get(key, (now, 0, False))
        if now - first > s.refusal_window:
            first, count, alarmed = now, 0, False
        count += event.count
        effects: list[Effect] = [Refused(event)]
        # Over the rate is a flood already: alarmed at once, not after N reports.
        limit = 1 if event.reason in ("rate_limited", "flood") else s.refusals_before_alarm
        if count >= limit and not alarmed:
            alarmed = True
            effects.append(self._refusal_alarm(event, count, first))
        if len(s.refusals) > REFUSAL_SOURCES:  # a flood of sources: forget the oldest half
            for old in sorted(s.refusals, key=lambda k: s.refusals[k][0])[: REFUSAL_SOURCES // 2]:
                del s.refusals[old]
        s.refusals[key] = (first, count, alarmed)
        return effects

    def _refusal_alarm(self, event: Refusal, count: int, first: Any) -> AlarmRaised:
        who = f"{event.channel} {event.identity}".strip()
        # A guesser, a forger or a signed flood is a security event; a malformed command is a
        # faulty integration, and a flood of unsigned or refused commands (``flood``) changed
        # nothing: seen by the floor, not latched for a supervisor each time (issue 40).
        severity: Severity = (
            "warning" if event.reason in ("invalid", "disabled", "flood") else "critical"
        )
        return self.raise_alarm(
            "command_refused",
            severity,
            f"{count} {event.command} commands from {who} refused since "
            f"{iso(first)} ({event.reason}: {event.detail}); call security if "
            "nobody at the table can explain it",
        )
