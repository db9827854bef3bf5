"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

_WIDTH = 30


class Progress:
    """``start(total)``, ``advance(n)``, ``finish()``. Silent unless the stream is a TTY (or
    ``force``), so pipes and JSON output stay clean. Redraws at most ten times a second."""

    def __init__(
        self,
        label: str,
        *,
        stream: TextIO | None = None,
        force: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self._clock = clock
        self.stream = sys.stderr if stream is None else stream
        self.enabled = force or self.stream.isatty()
        self.total = 0
        self.done = 0
        self._started = 0.0
        self._drawn = 0.0
        self._width = 0

    def start(self, total: int) -> None:
        self.total = max(1, total)
        self.done = 0
        self._started = self._clock()
        self._drawn = 0.0
        self._width = 0
        self._draw()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = self._clock()
        if now - self._drawn >= 0.1 or self.done >= self.total:
            self._draw()

    def finish(self) -> None:
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def _draw(self) -> None:
        if not self.enabled:
            return
        self._drawn = now = self._clock()
        frac = min(1.0, self.done / self.total)
        filled = int(frac * _WIDTH)
        elapsed = now - self._started
        if self.done >= self.total:
            tail = f"done in {elapsed:.1f}s"
        elif frac > 0:
            tail = f"{elapsed / frac - elapsed:.0f}s left"
        else:
            tail = f"{elapsed:.1f}s"
        bar = "#" * filled + "-" * (_WIDTH - filled)
        line = f"{self.label} [{bar}] {frac * 100:5.1f}% {tail}"
        # Pad over what the longer line before left behind ("… 3s left" → "… done in 15.5s").
        self.stream.write(f"\r{line}{' ' * max(0, self._width - len(line))}")
        self._width = len(line)
        self.stream.flush()
