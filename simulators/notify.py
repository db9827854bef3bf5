"""A systemd notify socket of one's own, for starting a real daemon as systemd would
(``NOTIFY_SOCKET``) and hearing its READY=1: the pit's demo tables and the benchmarks."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path


def notify_socket(path: Path) -> socket.socket:
    """A non-blocking datagram socket bound at ``path`` (a stale one is replaced)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.setblocking(False)
    return sock


def forget(sock: socket.socket) -> None:
    """Drop what an earlier run of the daemon said on ``sock``."""
    with contextlib.suppress(BlockingIOError):
        while sock.recv(4096):
            continue
