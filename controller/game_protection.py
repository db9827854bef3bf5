"""Game protection at the table (docs/protection.md): the pure watch of ``controller/protection``
fed every settled round after it is journaled, its state kept in the journal, and its findings
handed back to the table as events (a latched ``game_protection`` alarm and the ``protection``
message). Acknowledging such an alarm restarts its test: the device was looked at or swapped.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import structlog

from controller.config.models import ProtectionSettings
from controller.journal import Journal
from controller.messages import RoundPayload
from controller.protection import ProtectionConfig, Watch, observation_from_round
from controller.table import ProtectionFinding

log = structlog.get_logger(__name__)

#: At most this many settled rounds are observed again at start.
REPLAY_LIMIT = 2_000


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

    def replay(self, journal: Journal, now: datetime) -> list[ProtectionFinding]:
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
