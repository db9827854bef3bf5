"""The one reconnect loop every driver runs (byte streams, the USB dice reader, the pole display).

Open the link; run a session on it until it fails; close it; wait with capped, jittered backoff;
again, forever. The rules are the same for every device:

* a device is **online** only once a session proved it is there (a well-formed frame from a card
  source or an RNG box, an opened USB device, a write the pole display took) — a serial-device
  server that accepts and hangs up, or a port that opens with nothing behind it, is not online;
* **one offline report per outage**, whether the link cannot be opened or keeps dropping;
* the backoff starts again from its first step after a proven session, and keeps growing while
  every attempt fails;
* cancelled while online, the device is reported offline ("driver stopped").
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, NoReturn, TypeVar

import structlog

from drivers.base import Backoff, EventSink
from drivers.events import DeviceOffline, DeviceOnline

_log = structlog.get_logger(__name__)

MAX_ATTEMPT: Final = (
    32  # Backoff.delay overflows a float near attempt 1024; the cap is long reached
)

L = TypeVar("L")


@dataclass
class Presence:
    """Whether a device is online, reported on its sink and in the log once per change."""

    name: str
    sink: EventSink
    online: bool = False
    _offline_reported: bool = field(default=False, repr=False)

    def log(self) -> structlog.stdlib.BoundLogger:
        # Bound when used, not when built: the daemon configures logging after the drivers exist.
        bound: structlog.stdlib.BoundLogger = _log.bind(device=self.name)
        return bound

    def up(self, detail: str) -> None:
        """The device proved it is there."""
        if self.online:
            return
        self.online = True
        self._offline_reported = False
        self.log().info("device_online", link=detail)
        self.sink.put_nowait(DeviceOnline(device=self.name, detail=detail))

    def down(self, reason: str, *, stopping: bool = False) -> None:
        """The link is gone or cannot be had: reported once per outage (a driver that is
        stopping says so at info level: nothing is wrong)."""
        if not self.online and self._offline_reported:
            self.log().debug("device_still_offline", reason=reason)
            return
        self.online = False
        self._offline_reported = True
        if stopping:
            self.log().info("device_offline", reason=reason)
        else:
            self.log().warning("device_offline", reason=reason)
        self.sink.put_nowait(DeviceOffline(device=self.name, reason=reason))


async def keep_connected(
    presence: Presence,
    backoff: Backoff,
    *,
    open_link: Callable[[], Awaitable[L]],
    session: Callable[[L], Awaitable[str]],
    close_link: Callable[[L], Awaitable[None]],
    cannot_open: Callable[[Exception], str],
    unproven: Callable[[str], str] = lambda reason: f"no answer from the device: {reason}",
) -> NoReturn:
    """Run sessions on fresh links until cancelled (module doc). ``session`` calls
    ``presence.up`` once the device proved itself and returns why the link went."""
    attempt = 0
    try:
        while True:
            try:
                link = await open_link()
            except Exception as exc:  # absent, busy, refused: retried, never fatal
                presence.down(cannot_open(exc))
                await backoff.sleep(attempt)
                attempt = min(attempt + 1, MAX_ATTEMPT)
                continue
            try:
                reason = await session(link)
            except Exception as exc:  # a driver bug must not end the driver: reconnect instead
                presence.log().exception("driver_error")
                reason = f"driver error: {exc!r}"
            finally:
                await close_link(link)
            if presence.online:
                attempt = 0  # the device was there: try again at once
            else:
                reason = unproven(reason)
            presence.down(reason)
            await backoff.sleep(attempt)
            attempt = min(attempt + 1, MAX_ATTEMPT)
    except asyncio.CancelledError:
        if presence.online:
            presence.down("driver stopped", stopping=True)
        raise
