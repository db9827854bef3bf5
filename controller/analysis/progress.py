"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_WIDTH = 30


class Progress:
    """``start(total)``, ``advance(n)``, ``finish()``. Silent unless the stream is a TTY (or
    ``force``), so pipes and JSON output stay clean. Redraws at most ten times a second."""

    def __init__(self, label: str, *, stream: TextIO | None = None, force: bool = False) -> None:
        self.label = label
        self.stream = sys.stderr if stream is None else stream
        self.enabled = force or self.stream.isatty()
        self.total = 0
        self.done = 0
        self._started = 0.0
        self._drawn = 0.0

    def start(self, total: int) -> None:
        self.total = max(1, total)
        self.done = 0
        self._started = time.monotonic()
        self._drawn = 0.0
        self._draw()

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
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
        self._drawn = now = time.monotonic()
        frac = min(1.0, self.done / self.total)
        filled = int(frac * _WIDTH)
        elapsed = now - self._started
        eta = f"{elapsed / frac - elapsed:5.0f}s left" if 0 < frac < 1 else f"{elapsed:5.1f}s"
        bar = "#" * filled + "-" * (_WIDTH - filled)
        self.stream.write(f"\r{self.label} [{bar}] {frac * 100:5.1f}% {eta}")
        self.stream.flush()
