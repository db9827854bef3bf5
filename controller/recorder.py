"""What an effect becomes in the journal, in one room (docs/architecture.md, "The Recorder").

The daemon opens ONE transaction per event and calls :meth:`Recorder.record` inside it. Each
effect has one small function in :data:`EFFECTS`: its event kind and round in the journal, the
kept state it changed (``controller/kept_state.py``), and — through :meth:`Recorder.message` —
the MQTT topic and retain flag of its message. The event itself is journaled by
:func:`event_record`. So "where does this MQTT topic come from" and "which state survives a
restart" are answered here and in ``kept_state``, not in the daemon.

Durability: what opens or closes a round, queues a message, answers a command or raises an
alarm commits durably; a device event that only moves the deal on (a packet, a card, a draw
held for the next deal) does not wait for the disk (:func:`durable`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from controller.clock import iso
from controller.journal import OutboxMessage, Transaction, VoidedRound
from controller.kept_state import save_dealer, save_latched, save_seats
from controller.logging import bind_round, unbind_round
from controller.messages import Command, EnterDice, Payload, Problem, RoundPayload, envelope
from controller.ports import Origin, StateKeeper
from controller.table.effects import (
    AlarmAcknowledged,
    AlarmRaised,
    ClockSync,
    CommandReply,
    DealerChanged,
    DealRecorded,
    DeviceChanged,
    DiskSpace,
    Effect,
    FaultCleared,
    JournalRecovered,
    LatchedChanged,
    NoiseSummary,
    PlayerSettled,
    ProtectionAlarmed,
    ProtectionFinding,
    Refusal,
    RoundClosed,
    RoundOpened,
    RoundProgress,
    RoundRefused,
    SeatsChanged,
    TableEvent,
    Tick,
)
from controller.table.state import RoundIds, TableSettings
from drivers.events import DeviceEventBase, PositionDrawn

log = structlog.get_logger("controller.daemon")


def durable(event: TableEvent, effects: Sequence[Effect]) -> bool:
    """Whether the event's transaction must reach the disk before anything is shown or sent."""
    return not isinstance(event, DeviceEventBase | Tick) or any(
        not isinstance(e, RoundProgress) for e in effects
    )


@dataclass
class Recorder:
    """Journals effects and routes their messages. An MQTT-off table queues nothing: nobody
    would ever drain the outbox. ``keepers`` (services keeping state in the journal, such as
    game protection) save what an effect changed in the same transaction."""

    table_id: str
    prefix: str
    publishing: bool
    keepers: Sequence[StateKeeper] = field(default_factory=list)

    def topic(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def message(
        self, payload: Payload, *, name: str | None = None, retain: bool = False
    ) -> OutboxMessage | None:
        """The outbox message carrying ``payload`` (on ``name`` or its own topic), or None."""
        if not self.publishing:
            return None
        topic = self.topic(name if name is not None else payload_topic(payload))
        return OutboxMessage(topic, self.builder(payload), retain=retain)

    def builder(self, payload: Payload) -> Callable[[Any], dict[str, Any]]:
        table_id = self.table_id

        def build(stamp: Any) -> dict[str, Any]:
            return envelope(
                payload, msg_id=stamp.msg_id, table_id=table_id, seq=stamp.seq, time=stamp.time
            )

        return build

    def enqueue(
        self,
        tx: Transaction,
        payload: Payload,
        *,
        name: str | None = None,
        retain: bool = False,
        round_id: str | None = None,
    ) -> bool:
        """Queue ``payload``'s message in ``tx``; True if one was queued."""
        message = self.message(payload, name=name, retain=retain)
        if message is None:
            return False
        tx.enqueue(message.topic, message.payload, retain=message.retain, round_id=round_id)
        return True

    def record(
        self,
        tx: Transaction,
        event: TableEvent,
        effects: Sequence[Effect],
        before: RoundIds,
        origin: Origin | None = None,
    ) -> bool:
        """The event and all it caused, in ``tx``, from the effects alone (``before``: the
        rounds as they stood before the event). True if a message was queued."""
        queued = False
        for effect in effects:
            handler = EFFECTS.get(type(effect))
            if handler is not None:
                queued = handler(self, tx, effect) or queued
            for keeper in self.keepers:
                keeper.keep(tx, effect)
        event_record(tx, event, effects, before, origin)
        return queued


def payload_topic(payload: Payload) -> str:
    topic = getattr(payload, "topic", None)
    return topic if isinstance(topic, str) else str(payload.TOPIC)


# --- one small function an effect ------------------------------------------------------------

_Handler = Callable[[Recorder, Transaction, Any], bool]


def _round_opened(r: Recorder, tx: Transaction, effect: RoundOpened) -> bool:
    tx.open_round(effect.round_id, effect.round_seq)
    # What the floor gave the round as it opened, in the round's own rows: the audit deals it
    # again from these (docs/audit.md), whenever the sign-in before it was journaled.
    tx.record_event("round_opened", {"dealer_id": effect.dealer_id}, effect.round_id)
    if effect.draw is not None:  # drawn before the deal: now this round's
        tx.record_event("position_assigned", effect.draw, effect.round_id)
    return False


def _round_closed(r: Recorder, tx: Transaction, effect: RoundClosed) -> bool:
    p = effect.payload
    message = r.message(p)
    messages = [message] if message is not None else []
    reason = "; ".join(x.code for x in p.reasons) or None
    if effect.revises_settled:
        tx.void_settled_round(p.round_id, reason or "void", p, messages)
    else:
        tx.close_round(p.round_id, p.status, reason, p, messages)
    return bool(messages)


def _player_settled(r: Recorder, tx: Transaction, effect: PlayerSettled) -> bool:
    p = effect.payload
    tx.record_event("player_settled", p, p.round_id)
    return r.enqueue(tx, p, round_id=p.round_id)


def _alarm_raised(r: Recorder, tx: Transaction, effect: AlarmRaised) -> bool:
    tx.record_event("alarm", effect.payload, effect.payload.round_id)  # the alarm history
    return r.enqueue(tx, effect.payload)


def _command_reply(r: Recorder, tx: Transaction, effect: CommandReply) -> bool:
    """Nothing of its own: the reply is journaled with its command (``command_record``), and
    what a command changed is its own effect (seats, dealer, latched alarms)."""
    return False


def _seats_changed(r: Recorder, tx: Transaction, effect: SeatsChanged) -> bool:
    save_seats(tx, effect.occupied)
    return False


def _dealer_changed(r: Recorder, tx: Transaction, effect: DealerChanged) -> bool:
    save_dealer(tx, effect.dealer_id)
    return False


def _latched_changed(r: Recorder, tx: Transaction, effect: LatchedChanged) -> bool:
    save_latched(tx, {a.alarm_id: a for a in effect.latched})
    return False


def _alarm_acknowledged(r: Recorder, tx: Transaction, effect: AlarmAcknowledged) -> bool:
    tx.record_event("alarm_acknowledged", effect.payload, None)
    return r.enqueue(tx, effect.payload)


def _device_changed(r: Recorder, tx: Transaction, effect: DeviceChanged) -> bool:
    return r.enqueue(tx, effect.payload, name=f"device/{effect.payload.device}", retain=True)


def _protection_alarmed(r: Recorder, tx: Transaction, effect: ProtectionAlarmed) -> bool:
    return r.enqueue(tx, effect.payload)  # its state: the protection service's keep()


def _deal_recorded(r: Recorder, tx: Transaction, effect: DealRecorded) -> bool:
    record = {"shuffle_id": effect.shuffle_id, "fingerprint": effect.fingerprint}
    tx.record_event("deal_seen", record, effect.round_id)
    return False


def _fault_cleared(r: Recorder, tx: Transaction, effect: FaultCleared) -> bool:
    tx.record_event("journal_fault", effect.record)
    return False


#: What each effect becomes in the journal and on MQTT (effects not named here, such as
#: ``RoundProgress`` and ``StatusChanged``, are heard but not journaled).
EFFECTS: dict[type[Effect], _Handler] = {
    RoundOpened: _round_opened,
    RoundClosed: _round_closed,
    PlayerSettled: _player_settled,
    AlarmRaised: _alarm_raised,
    CommandReply: _command_reply,
    SeatsChanged: _seats_changed,
    DealerChanged: _dealer_changed,
    LatchedChanged: _latched_changed,
    AlarmAcknowledged: _alarm_acknowledged,
    DeviceChanged: _device_changed,
    ProtectionAlarmed: _protection_alarmed,
    DealRecorded: _deal_recorded,
    FaultCleared: _fault_cleared,
}


# --- the event itself ------------------------------------------------------------------------


#: Commands about the table, not a round: journaled under the round being dealt, if any.
FLOOR_COMMANDS = frozenset(
    {"open_table", "close_table", "set_seats", "set_wagers", "sign_in", "sign_out"}
)


def event_record(
    tx: Transaction,
    event: TableEvent,
    effects: Sequence[Effect],
    before: RoundIds,
    origin: Origin | None,
) -> None:
    """Journal the event: under the round it belongs to (the newest round after it; a draw
    made between deals is held for the next one and journaled under it as
    ``position_assigned``). A command the table refused for its round is journaled as that
    refusal."""
    opened = [e.round_id for e in effects if isinstance(e, RoundOpened)]
    round_id = opened[-1] if opened else before.latest
    refused = next((e.refusal for e in effects if isinstance(e, RoundRefused)), None)
    if isinstance(event, PositionDrawn | EnterDice):
        round_id = before.open  # a draw belongs to the deal it was made in
    elif not opened and getattr(event, "kind", "") in FLOOR_COMMANDS:
        round_id = before.open  # between deals, a sign-in is no part of the round before it
    if isinstance(event, Tick):
        tx.record_event("tick", {"now": iso(event.now, "microseconds")}, round_id)
    elif isinstance(event, DeviceEventBase):
        tx.record_event(event.kind, event, round_id)
    elif isinstance(event, ProtectionFinding):
        tx.record_event(event.kind, event.finding, None)
    elif isinstance(event, NoiseSummary | DiskSpace | ClockSync | Refusal):
        tx.record_event(event.kind, event.record(), before.open)
    elif refused is not None:
        tx.record_event(refused.kind, refused.record(), before.open)
    elif not isinstance(event, JournalRecovered):  # that one is its FaultCleared record
        tx.record_event(f"command.{event.kind}", command_record(event, effects, origin), round_id)


def command_record(
    command: Command, effects: Sequence[Effect], origin: Origin | None
) -> dict[str, Any]:
    """A command as journaled: its fields, who sent it and what came of it (docs/audit.md)."""
    reply = next((e for e in effects if isinstance(e, CommandReply)), None)
    return {
        **command.model_dump(mode="json"),
        "origin": {"channel": origin.channel, "identity": origin.identity} if origin else None,
        "outcome": {"ok": reply.ok, "error": reply.error} if reply else None,
    }


def restart_void(voided: VoidedRound, settings: TableSettings) -> RoundPayload:
    """The result of a round voided because the daemon restarted mid-round."""
    return RoundPayload(
        round_id=voided.round_id,
        round_seq=voided.seq,
        status="void",
        reasons=[
            Problem(code="restart", detail="the controller restarted mid-round; the round is void")
        ],
        opened_at=datetime.fromisoformat(voided.opened_at),
        closed_at=datetime.fromisoformat(voided.closed_at),
        rules=settings.describe_rules(),
        paytables=settings.describe_paytables(),
    )


# --- what an effect becomes in the log (journald) --------------------------------------------


def log_effect(table_id: str, effect: Effect) -> None:
    match effect:
        case RoundOpened():
            bind_round(table_id, effect.round_id)
            log.info("round_opened", round_seq=effect.round_seq, shuffle_id=effect.shuffle_id)
        case RoundClosed(payload=p):
            setting = p.dealer.setting if p.dealer else None
            log.info(
                "round_closed",
                round_id=p.round_id,
                status=p.status,
                reasons=[r.code for r in p.reasons],
                rule=setting.rule if setting else None,
                two_jacks=p.dealer.two_jacks if p.dealer else None,
            )
            unbind_round()
        case AlarmRaised(payload=p):
            # A critical alarm is critical in the journal too (journalctl -p crit finds it).
            emit = log.critical if p.severity == "critical" else log.warning
            emit("alarm", code=p.code, severity=p.severity, detail=p.detail, device=p.device)
