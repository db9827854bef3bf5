"""What the pages show, kept up to date from the daemon's effects, and the fan-out to live clients.

``LiveState`` listens to every effect (after it is journaled) and keeps the table's picture:
status, devices, occupied seats, the current round as the dealer may see it, the players'
settings of this round and recent alarms. Each change becomes one :class:`Update` (an SSE event
name and JSON data) handed to every connected client's queue at once, so a result reaches the
browsers within milliseconds of its journal commit.

The dealer's view of a round never carries a player's cards or side-wager results before the
dealer's hand is set (docs/rules.md §6, "The dealer's hand is set and shown before any player's"):
seats are included only in a settled round, which carries the dealer's setting (or two Jacks)."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.clock import Clock, iso, utc_now
from controller.messages import DevicePayload, PlayerPayload, RoundPayload
from controller.table import (
    AlarmRaised,
    CommandReply,
    DeviceChanged,
    Effect,
    PlayerSettled,
    RoundClosed,
    RoundOpened,
    RoundProgress,
    StatusChanged,
)
from controller.words import table as words_table

MAX_ALARMS = 50
CLIENT_QUEUE = 256


@dataclass(frozen=True, slots=True)
class Update:
    """One live message: an SSE event name and its JSON data."""

    event: str
    data: Mapping[str, Any]

    def encode(self, event_id: int) -> bytes:
        body = json.dumps(self.data, separators=(",", ":"), ensure_ascii=False)
        return f"id: {event_id}\nevent: {self.event}\ndata: {body}\n\n".encode()


CLOSE = Update("close", {})


def round_view(payload: RoundPayload) -> dict[str, Any]:
    """A closed round as the dealer page shows it (no dead hands' cards; seats only once the
    dealer's hand is set)."""
    data = payload.model_dump(mode="json", exclude={"positions"})
    dealer_set = payload.dealer is not None and (
        payload.dealer.setting is not None or payload.dealer.two_jacks
    )
    if payload.status != "settled" or not dealer_set:
        data["seats"] = []
    return {
        "round_id": payload.round_id,
        "round_seq": payload.round_seq,
        "phase": payload.status,
        "packets": 7 if payload.status == "settled" else None,
        "waiting_for": "",
        "position": data.get("first_position"),
        "result": data,
    }


@dataclass
class LiveState:
    """The table as the pages see it; ``subscribe`` gives a client its queue and a snapshot."""

    table: dict[str, Any]
    status: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    occupied: dict[str, bool | None] = field(default_factory=dict)
    round: dict[str, Any] | None = None
    players: dict[str, dict[str, Any]] = field(default_factory=dict)
    alarms: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_ALARMS))
    last_payload: RoundPayload | None = None
    clock: Clock = utc_now  # the daemon's clock: alarm and device times on the pages
    _clients: set[asyncio.Queue[Update]] = field(default_factory=set)

    # --- what the pages get -------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "status": self.status,
            "devices": self.devices,
            "occupied": self.occupied,
            "round": self.round,
            "players": self.players,
            "alarms": list(self.alarms),
            "words": words_table(),
        }

    def subscribe(self) -> tuple[asyncio.Queue[Update], dict[str, Any]]:
        """A new client's queue and the snapshot it starts from (no update falls between)."""
        queue: asyncio.Queue[Update] = asyncio.Queue(CLIENT_QUEUE)
        self._clients.add(queue)
        return queue, self.snapshot()

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        self._clients.discard(queue)

    @property
    def clients(self) -> int:
        return len(self._clients)

    def close_client(self, queue: object) -> None:
        """End one client's stream (the stream cap chose it); its browser may reconnect."""
        if isinstance(queue, asyncio.Queue):
            self._clients.discard(queue)
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(CLOSE)

    def close_all(self) -> None:
        """Tell every client's stream to end (the server is stopping)."""
        for queue in list(self._clients):
            self._push(queue, CLOSE)

    def _push(self, queue: asyncio.Queue[Update], update: Update) -> None:
        try:
            queue.put_nowait(update)
        except asyncio.QueueFull:
            # A client this far behind is dropped; its browser reconnects and gets a snapshot.
            self._clients.discard(queue)
            while not queue.empty():
                queue.get_nowait()
            queue.put_nowait(CLOSE)

    def _publish(self, event: str, data: Mapping[str, Any]) -> None:
        update = Update(event, data)
        for queue in list(self._clients):
            self._push(queue, update)

    # --- what the daemon tells ----------------------------------------------------------

    def load_round(self, payload: RoundPayload, players: list[PlayerPayload]) -> None:
        """Start from the journal's last closed round (after a restart)."""
        self.last_payload = payload
        self.round = round_view(payload)
        self.players = {p.seat: p.model_dump(mode="json") for p in players}

    def on_effect(self, effect: Effect) -> None:
        """The daemon's listener: never blocks, never raises on a well-formed effect."""
        match effect:
            case RoundOpened():
                self._round_opened(effect)
            case RoundProgress():
                self._round_progress(effect)
            case RoundClosed(payload=p):
                self._round_closed(p)
            case PlayerSettled(payload=p):
                self._player_settled(p)
            case AlarmRaised(payload=p):
                alarm = {"at": iso(self.clock()), **p.model_dump(mode="json")}
                self.alarms.appendleft(alarm)
                self._publish("alarm", alarm)
            case DeviceChanged(payload=p):
                self._device_changed(p)
            case StatusChanged(payload=p):
                self.status = p.model_dump(mode="json")
                self._publish("status", self.status)
            case CommandReply(command="set_seats", ok=True, data=data) if data:
                self.occupied = dict(data.get("occupied", {}))
                self._publish("seats", {"occupied": self.occupied})

    def _round_opened(self, effect: RoundOpened) -> None:
        self.last_payload = None
        self.players = {}
        self.round = {
            "round_id": effect.round_id,
            "round_seq": effect.round_seq,
            "phase": "dealing",
            "packets": 0,
            "waiting_for": "cards",
            "position": effect.draw.model_dump(mode="json") if effect.draw else None,
            "result": None,
        }
        self._publish("round", self.round)

    def _round_progress(self, effect: RoundProgress) -> None:
        if self.round is None or self.round["round_id"] != effect.round_id:
            return
        if self.round["phase"] not in ("dealing", "waiting_position"):
            return
        self.round = {
            **self.round,
            "phase": "waiting_position" if effect.waiting_for == "position" else "dealing",
            "packets": effect.packets,
            "waiting_for": effect.waiting_for,
            "position": effect.position.model_dump(mode="json") if effect.position else None,
        }
        self._publish("round", self.round)

    def _round_closed(self, p: RoundPayload) -> None:
        self.last_payload = p
        if p.status != "settled":
            self.players = {}
        self.round = round_view(p)
        self._publish("round", self.round)

    def _player_settled(self, p: PlayerPayload) -> None:
        if self.round is None or self.round["round_id"] != p.round_id:
            return
        self.players[p.seat] = p.model_dump(mode="json")
        self._publish("player", self.players[p.seat])

    def _device_changed(self, p: DevicePayload) -> None:
        self.devices[p.device] = {
            "online": p.online,
            "detail": p.detail,
            "at": iso(self.clock()),
        }
        self._publish("device", {"device": p.device, **self.devices[p.device]})
