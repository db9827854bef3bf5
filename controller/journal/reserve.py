"""Space kept for the record of a full disk (docs/faults.md): a file of real blocks beside the
journal, released when the journal cannot be written so the fault and every deal seen during it
still reach the journal, and made again once the disk has room."""

from __future__ import annotations

import os
from pathlib import Path

_CHUNK = 1 << 20


class Reserve:
    """``size`` bytes at ``path``; nothing at all when ``size`` is 0."""

    def __init__(self, path: str | os.PathLike[str], size: int) -> None:
        self.path = Path(path)
        self.size = size

    @property
    def held(self) -> int:
        """The bytes held now (0 when released or never made)."""
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def ensure(self) -> bool:
        """Make (or complete) the reserve with written blocks (a sparse file would free
        nothing); True when it is whole. A disk too full for it leaves what could be written."""
        if self.size <= 0 or self.held >= self.size:
            return self.size <= 0 or self.held >= self.size
        try:
            with self.path.open("ab") as f:
                while f.tell() < self.size:
                    f.write(b"\0" * min(_CHUNK, self.size - f.tell()))
                f.flush()
                os.fsync(f.fileno())
        except OSError:
            return False
        return True

    def release(self) -> int:
        """Free the reserve's space; the bytes freed."""
        held = self.held
        if held:
            self.path.unlink(missing_ok=True)
        return held
