"""How many MQTT commands the table takes a minute (``[limits] mqtt_commands_per_minute``):
a token bucket, so a burst of a few is fine and a flood is refused, counted and reported."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass
class CommandRate:
    """``admit`` says whether one more command may run now; the refused ones are counted until
    ``take_over`` hands the count to a journal record (once a minute at most)."""

    per_minute: int
    tokens: float = -1.0
    over: int = 0
    _at: datetime | None = None

    def __post_init__(self) -> None:
        if self.tokens < 0:
            self.tokens = float(self.per_minute)

    def admit(self, now: datetime) -> bool:
        return self.grant(now, 1) == 1

    def grant(self, now: datetime, wanted: int) -> int:
        """As many of ``wanted`` as the bucket holds now (0 is counted as refused)."""
        if self._at is not None:
            elapsed = max(0.0, (now - self._at).total_seconds())
            self.tokens = min(float(self.per_minute), self.tokens + elapsed * self.per_minute / 60)
        self._at = now
        granted = min(wanted, int(self.tokens))
        if granted < 1:
            self.over += 1
            return 0
        self.tokens -= granted
        return granted

    def take_over(self) -> int:
        """The refusals not yet reported (and zero them)."""
        over, self.over = self.over, 0
        return over
