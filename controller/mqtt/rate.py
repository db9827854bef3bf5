"""How many MQTT commands the table takes a minute (``[limits] mqtt_commands_per_minute``):
a token bucket, so a burst of a few is fine and a flood is refused, counted and reported."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta


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


@dataclass
class CommandBudgets:
    """The table's command budgets (issue 40): on a table that takes signed commands, signed
    ones whose signature checked draw from ``signed``, everything else — unsigned read-only
    commands and every refusal — from ``unsigned``, so no flood of unsigned or forged commands
    starves the casino's; a table without command keys draws every command from ``signed``.
    Refused ones are counted for one record a minute (``due``, ``take``)."""

    signed: CommandRate
    unsigned: CommandRate
    keyed: bool = False
    reported: dict[str, datetime] = field(default_factory=dict)

    def refusal(self, now: datetime, *, signed: bool) -> str | None:
        """Charge one command; the reason it is refused (``rate_limited``: signed, or any on a
        table without keys; ``flood``: unsigned or refused), or None."""
        if signed or not self.keyed:
            return None if self.signed.admit(now) else "rate_limited"
        return None if self.unsigned.admit(now) else "flood"

    def due(self, now: datetime, reason: str, every: timedelta) -> bool:
        """Whether the budget of ``reason`` has not been reported for ``every``."""
        last = self.reported.get(reason)
        return last is None or now - last >= every

    def take(self, now: datetime, only: str = "") -> list[tuple[str, str, int]]:
        """For each budget run over (``only``: that one): its reason, what it says, how many it
        refused since it last said so."""
        out: list[tuple[str, str, int]] = []
        for bucket, reason, what in (
            (self.signed, "rate_limited", "signed commands" if self.keyed else "commands"),
            (self.unsigned, "flood", "unsigned or refused commands"),
        ):
            over = bucket.take_over() if only in ("", reason) else 0
            if over:
                self.reported[reason] = now
                out.append((reason, f"more than {bucket.per_minute} {what} a minute", over))
        return out
