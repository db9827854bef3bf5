"""Whether the table computer's clock is synchronised (docs/operations.md, "Time"): signed
commands are refused outside their time window and checkpoints and every record carry the time,
so a clock that drifts unsynchronised is a fault the table reports.

Read without privileges: the kernel's NTP state through ``adjtimex(2)`` in read-only mode (the
``STA_UNSYNC`` flag, set while no time daemon disciplines the clock), and where a seccomp filter
forbids that call (the unit's ``ProtectClock=yes`` filters the @clock calls) the flag file
systemd-timesyncd keeps, ``/run/systemd/timesync/synchronized``. None when neither can tell
(chrony under the unit: the guide says how to let it tell).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
from pathlib import Path

TIMESYNCD_FLAG = Path("/run/systemd/timesync/synchronized")
_STA_UNSYNC = 0x0040
_TIME_ERROR = 5


class _Timeval(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


class _Timex(ctypes.Structure):
    """struct timex (linux/timex.h); the padding covers the reserved ints."""

    _fields_ = [
        ("modes", ctypes.c_uint),
        ("offset", ctypes.c_long),
        ("freq", ctypes.c_long),
        ("maxerror", ctypes.c_long),
        ("esterror", ctypes.c_long),
        ("status", ctypes.c_int),
        ("constant", ctypes.c_long),
        ("precision", ctypes.c_long),
        ("tolerance", ctypes.c_long),
        ("time", _Timeval),
        ("tick", ctypes.c_long),
        ("ppsfreq", ctypes.c_long),
        ("jitter", ctypes.c_long),
        ("shift", ctypes.c_int),
        ("stabil", ctypes.c_long),
        ("jitcnt", ctypes.c_long),
        ("calcnt", ctypes.c_long),
        ("errcnt", ctypes.c_long),
        ("stbcnt", ctypes.c_long),
        ("tai", ctypes.c_int),
        ("_padding", ctypes.c_int * 11),
    ]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library, found once (``find_library`` runs ``ldconfig``: milliseconds each time)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None


def _adjtimex() -> tuple[int, _Timex] | None:
    """adjtimex with no modes (it reads, changes nothing): its state and the struct; None if
    the C library or the call is refused (EPERM under a seccomp filter, ENOSYS elsewhere)."""
    libc = _libc()
    if libc is None:
        return None
    try:
        timex = _Timex()
        state = libc.adjtimex(ctypes.byref(timex))
    except (OSError, AttributeError):
        return None
    return None if state < 0 else (int(state), timex)


def kernel_state() -> bool | None:
    """The kernel's view of whether the clock is synchronised; None if it cannot tell."""
    read = _adjtimex()
    if read is None:
        return None
    state, timex = read
    return state != _TIME_ERROR and not timex.status & _STA_UNSYNC


def estimated_error() -> float | None:
    """The kernel's estimated error of the clock in seconds (adjtimex's ``esterror``), while a
    time daemon disciplines it; None when unsynchronised or it cannot tell."""
    read = _adjtimex()
    if read is None or not kernel_state():
        return None
    return float(read[1].esterror) / 1e6  # microseconds, whatever STA_NANO says of the offset


def clock_synchronized(flag: Path = TIMESYNCD_FLAG) -> bool | None:
    """True: a time daemon disciplines the clock; False: nobody does; None: cannot tell."""
    state = kernel_state()
    if state is not None:
        return state
    if flag.exists():
        return True
    # timesyncd runs but has not synchronised yet: its directory is there, the flag is not.
    return False if flag.parent.is_dir() and os.access(flag.parent, os.R_OK) else None
