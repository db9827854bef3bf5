"""One daemon per journal (docs/operations.md §4): ``paigow-table run`` holds an exclusive lock on
``<journal>.lock`` for the life of its process, with its pid in the file, so a second ``run`` on
the same journal exits at once naming the journal and the pid that holds it, instead of
interleaving its writes with the first's (which breaks the hash chain).

The lock is ``flock(2)`` on a file beside the journal, not on the journal itself: SQLite keeps
POSIX record locks on the journal, and closing any other descriptor of that file would drop them.
The kernel releases a ``flock`` when the process ends, however it ends (a kill -9, a crash), so a
stale lock file never keeps a table from starting. It does not protect against a process that
opens the journal without asking for the lock (``sqlite3`` by hand, a tool that writes) nor
against two hosts sharing the journal over a network file system whose ``flock`` is local."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from types import TracebackType
from typing import Self


class JournalInUse(Exception):
    """Another process holds the journal's lock; ``pid``: the one its lock file names (None if
    it could not be read)."""

    def __init__(self, journal: str, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "another process"
        super().__init__(
            f"journal {journal} is in use by {holder} (another paigow-table run on the same "
            "journal); this one exits: stop that one first, or give this one its own journal"
        )
        self.journal = journal
        self.pid = pid


class JournalLock:
    """The exclusive lock of the journal at ``journal``, taken by :meth:`acquire` (raising
    :class:`JournalInUse` at once if another process holds it) and let go by :meth:`release`
    or when the process ends."""

    def __init__(self, journal: str | os.PathLike[str]) -> None:
        self.journal = os.fspath(journal)
        self.path = Path(f"{self.journal}.lock")
        self._fd: int | None = None

    def acquire(self) -> Self:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _pid_in(fd)
            os.close(fd)
            raise JournalInUse(self.journal, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)  # no pid left behind for a reader to blame
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _pid_in(fd: int) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(os.pread(fd, 32, 0).decode("ascii").strip())
    return None
