"""systemd service notification (sd_notify) and the watchdog, with the standard library only.

A notification is one datagram to the Unix socket named by ``$NOTIFY_SOCKET`` (a path, or an
abstract socket written with a leading ``@``). Without the variable, as when the daemon runs in a
terminal or a test, every function here does nothing and returns False.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable, Iterator, Mapping

import structlog

log = structlog.get_logger(__name__)


def _address(env: Mapping[str, str]) -> str | bytes | None:
    name = env.get("NOTIFY_SOCKET", "")
    if name.startswith("@"):
        return b"\0" + name[1:].encode()
    if name.startswith("/"):
        return name
    return None


def notify(*assignments: str, env: Mapping[str, str] | None = None) -> bool:
    """Send ``assignments`` (``"READY=1"``, ``"STATUS=…"``) to systemd in one datagram.

    Returns True when the datagram was sent; False when there is no (usable) notify socket or the
    send failed (the daemon keeps running either way).
    """
    address = _address(os.environ if env is None else env)
    if address is None or not assignments:
        return False
    data = "\n".join(assignments).encode("utf-8")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(data, address)
    except OSError as exc:
        log.warning("systemd_notify_failed", error=str(exc), message=assignments[0])
        return False
    return True


def _status(text: str) -> str:
    # One assignment per line: a newline in the text would start a new (bogus) assignment.
    return "STATUS=" + " ".join(text.splitlines())


def ready(status: str | None = None, *, env: Mapping[str, str] | None = None) -> bool:
    """Startup finished (Type=notify): ``READY=1``, with an optional status line."""
    return notify("READY=1", *([_status(status)] if status else []), env=env)


def status(text: str, *, env: Mapping[str, str] | None = None) -> bool:
    """The one-line status ``systemctl status`` shows."""
    return notify(_status(text), env=env)


def watchdog_ping(*, env: Mapping[str, str] | None = None) -> bool:
    """``WATCHDOG=1``: the service is alive."""
    return notify("WATCHDOG=1", env=env)


def stopping(status: str | None = None, *, env: Mapping[str, str] | None = None) -> bool:
    """Shutdown begins: ``STOPPING=1``."""
    return notify("STOPPING=1", *([_status(status)] if status else []), env=env)


def watchdog_interval(env: Mapping[str, str] | None = None) -> float | None:
    """Seconds between pings: half of ``$WATCHDOG_USEC`` (as systemd recommends).

    None when the watchdog is off: the variable is unset or not a positive number, or
    ``$WATCHDOG_PID`` names another process.
    """
    env = os.environ if env is None else env
    pid = env.get("WATCHDOG_PID")
    if pid is not None and pid.strip() != str(os.getpid()):
        return None
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    return usec / 2 / 1_000_000


async def watchdog_loop(
    interval: float | None = None,
    *,
    healthy: Callable[[], bool] | None = None,
    env: Mapping[str, str] | None = None,
) -> None:
    """Ping the watchdog every ``interval`` seconds (default: :func:`watchdog_interval`) until
    cancelled; returns at once when the watchdog is off.

    Because it runs on the event loop, a blocked loop stops the pings and systemd restarts the
    service. ``healthy``, when given, is asked before each ping; while it returns False no ping is
    sent, so a wedged component also leads to a restart.
    """
    period = watchdog_interval(env) if interval is None else interval
    if period is None or period <= 0:
        return
    while True:
        if healthy is None or healthy():
            watchdog_ping(env=env)
        else:
            log.warning("watchdog_ping_withheld", reason="unhealthy")
        await asyncio.sleep(period)


@contextlib.contextmanager
def stop_signals_restored() -> Iterator[None]:
    """Around a ``Daemon.run(handle_signals=True)`` and the close after it: SIGTERM's and
    SIGINT's handlers as they were before, put back once everything inside has closed. From
    its stop on the daemon ignores both (a second signal must not kill it mid-close); a process
    that goes on afterwards (the demo run by a test) must not keep them ignored, or every child
    it starts inherits the ignored SIGTERM (a process pool's workers then cannot be terminated,
    and the pool's owner waits for them for ever)."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
