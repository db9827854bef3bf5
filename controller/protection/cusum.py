"""A bank of CUSUMs of log-likelihood ratios, updated lazily.

Each CUSUM is S_n = max(0, S_{n-1} + x_n) where x_n is the log of q(o_n)/p(o_n): the round's
observation under an alternative q over its exact null p. Most CUSUMs see the same "nothing
happened" increment ``base`` (≤ 0) most rounds (a card not in this packet); the bank stores the
value at the round of its last event and applies the missed ``base`` steps when it next needs it,
so a round costs one update per event, not one per CUSUM.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime


class Bank:
    """CUSUMs 0..size-1; ``base[i]`` is CUSUM i's increment on a round without an event."""

    __slots__ = ("base", "last", "start", "start_time", "value")

    def __init__(self, base: Sequence[float]) -> None:
        if any(b > 0 for b in base):
            raise ValueError("a CUSUM's no-event increment must not be positive")
        self.base = list(base)
        size = len(self.base)
        self.value = [0.0] * size
        self.last = [0] * size
        self.start = [0] * size
        self.start_time: list[datetime | None] = [None] * size

    def __len__(self) -> int:
        return len(self.base)

    def at(self, i: int, n: int) -> float:
        """CUSUM i's value after round n (n ≥ its last event)."""
        v = self.value[i] + self.base[i] * (n - self.last[i])
        return v if v > 0.0 else 0.0

    def add(self, i: int, x: float, n: int, now: datetime) -> float:
        """Apply round n's increment ``x`` to CUSUM i (after the no-event rounds since its last
        event) and return its new value; a run that starts from zero starts its window at n."""
        v = self.value[i] + self.base[i] * (n - 1 - self.last[i])
        if v <= 0.0:
            v = x
            if v > 0.0:
                self.start[i] = n
                self.start_time[i] = now
            else:
                v = 0.0
        else:
            v += x
            if v < 0.0:
                v = 0.0
        self.value[i] = v
        self.last[i] = n
        return v

    def add_all(
        self, indices: Sequence[int], xs: Sequence[float], n: int, now: datetime
    ) -> tuple[int, float]:
        """``add`` for each (index, increment) of round n, inlined (the hot path); the CUSUM that
        ends highest and its value ((0, -1.0) for no index)."""
        value, last, base, start, start_time = (
            self.value,
            self.last,
            self.base,
            self.start,
            self.start_time,
        )
        best, best_v = 0, -1.0
        for i, x in zip(indices, xs, strict=True):
            v = value[i]
            if v > 0.0:
                v += base[i] * (n - 1 - last[i])
            if v <= 0.0:
                v = x
                if v > 0.0:
                    start[i] = n
                    start_time[i] = now
                else:
                    v = 0.0
            else:
                v += x
                if v < 0.0:
                    v = 0.0
            value[i] = v
            last[i] = n
            if v > best_v:
                best, best_v = i, v
        return best, best_v

    def top(self, n: int) -> tuple[int, float]:
        """The CUSUM with the largest value after round n, and that value (0, 0.0 if none)."""
        best, best_v = 0, 0.0
        base, value, last = self.base, self.value, self.last
        for i in range(len(base)):
            v = value[i]
            if v > 0.0:
                v += base[i] * (n - last[i])
                if v > best_v:
                    best, best_v = i, v
        return best, best_v

    def clear(self) -> None:
        size = len(self.base)
        self.value = [0.0] * size
        self.last = [0] * size
        self.start = [0] * size
        self.start_time = [None] * size

    def to_state(self) -> list[list[object]]:
        """The running CUSUMs as [i, value, last, start, start_time] (idle ones are zero)."""
        return [
            [
                i,
                self.value[i],
                self.last[i],
                self.start[i],
                None if (when := self.start_time[i]) is None else when.isoformat(),
            ]
            for i in range(len(self.base))
            if self.value[i] > 0.0
        ]

    def load(self, rows: list[list[object]]) -> None:
        """Restore what ``to_state`` gave; ValueError on a row that does not fit this bank."""
        self.clear()
        for row in rows:
            i, value, last, start, when = row
            if not isinstance(i, int) or not 0 <= i < len(self.base):
                raise ValueError(f"protection state: CUSUM {i!r} does not exist")
            if not isinstance(value, (int, float)) or not isinstance(last, int):
                raise ValueError(f"protection state: CUSUM {i} is malformed")
            if not isinstance(start, int) or not (when is None or isinstance(when, str)):
                raise ValueError(f"protection state: CUSUM {i} is malformed")
            self.value[i] = float(value)
            self.last[i] = last
            self.start[i] = start
            self.start_time[i] = None if when is None else datetime.fromisoformat(when)


class SumBank(Bank):
    """The same CUSUMs' increments summed without the clamp at zero: a pooled CUSUM's evidence
    split by member (``pit.pooling``: each table's log-likelihood ratio over the window of a
    finding, replayed through the test's own code with this bank in place of its own)."""

    __slots__ = ()

    def add(self, i: int, x: float, n: int, now: datetime) -> float:
        v = self.value[i] + self.base[i] * (n - 1 - self.last[i]) + x
        self.value[i] = v
        self.last[i] = n
        return v

    def add_all(
        self, indices: Sequence[int], xs: Sequence[float], n: int, now: datetime
    ) -> tuple[int, float]:
        best, best_v = 0, -1.0
        for i, x in zip(indices, xs, strict=True):
            v = self.add(i, x, n, now)
            if v > best_v:
                best, best_v = i, v
        return best, best_v

    def total(self, i: int, n: int) -> float:
        """CUSUM i's summed increments over rounds 1..n (n ≥ its last event)."""
        return self.value[i] + self.base[i] * (n - self.last[i])

    def take(self, i: int, n: int) -> float:
        """CUSUM i's increments since the last ``take`` (or the start), up to round n, and zero
        again: one round's increment when taken after each round (−∞ for a round the
        alternative rules out, never carried into the next)."""
        v = self.total(i, n)
        self.value[i] = 0.0
        self.last[i] = n
        return v
