"""Game protection at the table (docs/protection.md), a service: the pure watch of
``controller/protection`` fed every settled round after it is journaled, its findings put back
on the table's queue as events (a latched ``game_protection`` alarm and the ``protection``
message), its state kept in the journal — saved in the transaction that journals its alarm or
the alarm's acknowledgement (``keep``), and every ``SAVE_EVERY`` rounds. Acknowledging such an
alarm restarts its test: the device was looked at or swapped. The statistics run in the
service's own task at a quiet moment after the round was published, never in the listener
(controller/services/later.py).
"""

from __future__ import annotations

import asyncio
from collections import deque
from datetime import datetime
from typing import Any, Protocol

import structlog

from controller.config.models import ProtectionSettings
from controller.journal import Transaction
from controller.journal.views import History
from controller.kept_state import save_protection
from controller.messages import RoundPayload
from controller.ports import EffectSource, EventSink, OutboxStore, StateStore, TableView
from controller.protection import ProtectionConfig, Watch, observation_from_round
from controller.services.later import quiet_moment
from controller.table import (
    AlarmAcknowledged,
    Effect,
    ProtectionAlarmed,
    ProtectionFinding,
    RoundClosed,
)

log = structlog.get_logger(__name__)

#: At most this many settled rounds are observed again at start.
REPLAY_LIMIT = 2_000
#: Rounds between two saves of the watch's state (every alarm and acknowledgement saves it
#: too): after a crash, the rounds since are observed again from the journal.
SAVE_EVERY = 25


class ProtectionMonitor:
    """The table's watch. ``observe`` is called with each settled round; ``state`` is what the
    journal keeps (the watch, the last round observed, which alarm belongs to which test)."""

    def __init__(self, settings: ProtectionSettings, saved: object = None) -> None:
        self.config = ProtectionConfig(
            false_alarms_per_year=settings.false_alarms_per_year,
            rounds_per_year=settings.rounds_per_year,
            recent_deals=settings.recent_deals,
        )
        self.watch = Watch(self.config)
        self.last_seq = 0
        self.alarm_tests: dict[str, str] = {}
        self.unsaved = 0
        if isinstance(saved, dict) and isinstance(saved.get("watch"), dict):
            try:
                self.watch = Watch.from_state(saved["watch"], self.config)
                self.last_seq = int(saved.get("last_seq", 0))
                self.alarm_tests = dict(saved.get("alarm_tests", {}))
            except (ValueError, KeyError, TypeError) as exc:
                # A state from another version or configuration: start the watch afresh.
                log.warning("protection_state_discarded", error=str(exc))
                self.watch = Watch(self.config)

    def state(self) -> dict[str, Any]:
        self.unsaved = 0
        return {
            "watch": self.watch.to_state(),
            "last_seq": self.last_seq,
            "alarm_tests": self.alarm_tests,
        }

    def observe(self, payload: RoundPayload, now: datetime) -> list[ProtectionFinding]:
        """A settled round (others are ignored): the findings the table must raise."""
        if payload.round_seq <= self.last_seq:
            return []
        obs = observation_from_round(payload)
        if obs is None:
            return []
        self.last_seq = payload.round_seq
        self.unsaved += 1
        return [ProtectionFinding(f.to_dict()) for f in self.watch.observe(obs, now)]

    def replay(self, journal: History, now: datetime) -> list[ProtectionFinding]:
        """Settled rounds journaled after the saved state (a crash between saves)."""
        rounds: list[RoundPayload] = []
        offset = 0
        while len(rounds) < REPLAY_LIMIT:
            batch = journal.recent_rounds(limit=200, offset=offset)
            if not batch:
                break
            offset += len(batch)
            newer = [r for r in batch if r.seq > self.last_seq]
            rounds += [
                RoundPayload.model_validate(r.result)
                for r in newer
                if r.status == "settled" and r.result is not None
            ]
            if len(newer) < len(batch):
                break
        findings: list[ProtectionFinding] = []
        for payload in sorted(rounds, key=lambda p: p.round_seq):
            findings += self.observe(payload, now)
        return findings

    def alarmed(self, alarm_id: str, test: str) -> None:
        self.alarm_tests[alarm_id] = test

    def acknowledged(self, alarm_id: str, now: datetime) -> str | None:
        """A game-protection alarm was acknowledged: its test starts afresh. The test's name."""
        test = self.alarm_tests.pop(alarm_id, None)
        if test is not None and test in self.watch.names:
            self.watch.reset(test, now)
        return test

    def panel(self) -> dict[str, Any]:
        """What the supervisor's Game protection panel shows."""
        return {
            "enabled": True,
            "rounds": self.watch.rounds,
            "config": self.config.to_dict(),
            "tests": [s.to_dict() for s in self.watch.states()],
        }


class ProtectionHost(EffectSource, EventSink, OutboxStore, TableView, StateStore, Protocol):
    """What game protection uses: settled rounds, the queue for its findings, the journal's
    history (to observe again what a crash left unobserved), and a place to save its state."""


class ProtectionService:
    """The watch at the table. The wiring gives it the state kept at the last save."""

    name = "protection"

    def __init__(self, settings: ProtectionSettings, saved: object = None) -> None:
        self.monitor = ProtectionMonitor(settings, saved)
        self._host: ProtectionHost | None = None
        #: Settled rounds heard but not yet observed (the listener only notes them).
        self._waiting: deque[RoundPayload] = deque()
        self._arrived = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()

    def panel(self) -> dict[str, Any]:
        """What the supervisor's Game protection panel shows."""
        return self.monitor.panel()

    def keep(self, tx: Transaction, effect: Effect) -> None:
        """Inside the transaction of its alarm or the alarm's acknowledgement: the state."""
        if isinstance(effect, ProtectionAlarmed):
            self.monitor.alarmed(effect.payload.alarm_id, effect.payload.test)
        elif isinstance(effect, AlarmAcknowledged) and effect.payload.code == "game_protection":
            self.monitor.acknowledged(effect.payload.alarm_id, effect.payload.acknowledged_at)
        else:
            return
        save_protection(tx, self.monitor.state())

    async def run(self, host: ProtectionHost) -> None:
        self._host = host
        # Settled rounds journaled after the last save: a crash between saves.
        for finding in self.monitor.replay(host.journal.history, host.clock()):
            host.put_nowait(finding)
        host.subscribe(self._on_effect)
        while True:
            await self._arrived.wait()
            self._arrived.clear()
            # Off the path from the last card to the publish: the statistics wait for a quiet
            # moment (controller/services/later.py).
            await quiet_moment(host)
            while self._waiting:
                self._observe(host, self._waiting.popleft())
            self._idle.set()

    def _on_effect(self, effect: Effect) -> None:
        if isinstance(effect, RoundClosed) and effect.payload.status == "settled":
            self._waiting.append(effect.payload)
            self._idle.clear()
            self._arrived.set()

    async def observed(self, timeout: float = 10.0) -> None:
        """Wait until every settled round heard so far has been observed (tests, tools)."""
        await asyncio.wait_for(self._idle.wait(), timeout)

    def _observe(self, host: ProtectionHost, payload: RoundPayload) -> None:
        """The settled round once it is journaled; its findings come back as events, after the
        round's own (docs/protection.md)."""
        if payload.status != "settled":
            return
        try:
            findings = self.monitor.observe(payload, host.clock())
        except Exception:  # a bug in the watch must not stop the table: say so, deal on
            log.exception("protection_failed", round_id=payload.round_id)
            return
        for finding in findings:
            host.put_nowait(finding)
        if not findings and self.monitor.unsaved >= SAVE_EVERY:
            state = self.monitor.state()
            host.save_state(lambda tx: save_protection(tx, state))
