"""Limits that keep the display server, and the table behind it, standing under a flood
(docs/display.md, "Limits and floods").

- :class:`ConnectionGuard` wraps aiohttp's protocol factory: at most ``max_connections`` open
  connections (loopback ones — the kiosk on the table computer — have a ``reserve`` beyond
  that); a connection that has not delivered a whole request head within ``request_timeout``
  is closed (an idle connect, a slowloris). Idle keep-alive connections are aiohttp's
  ``keepalive_timeout``. It wraps the protocol, not aiohttp's classes, so it relies only on
  asyncio's protocol interface.
- :class:`StreamLimiter` caps the live streams: a new one beyond ``max_streams`` closes the
  oldest remote stream; the kiosk's (loopback) streams are never closed for a remote one.
- :class:`Tally` keeps the counts and logs at most one line per kind and interval.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

from controller.display.access import is_loopback_address

log = structlog.get_logger(__name__)

#: Connections and streams the loopback kiosk may open beyond the caps.
LOCAL_RESERVE = 16


@dataclass
class Tally:
    """Counts of what the limits did, and a log line per kind at most every ``interval`` s."""

    interval: float = 10.0
    clock: Callable[[], float] = time.monotonic
    counts: dict[str, int] = field(default_factory=dict)
    _unlogged: dict[str, int] = field(default_factory=dict)
    _logged_at: dict[str, float] = field(default_factory=dict)

    def add(self, kind: str, **context: Any) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        self._unlogged[kind] = self._unlogged.get(kind, 0) + 1
        now = self.clock()
        if now - self._logged_at.get(kind, -self.interval) >= self.interval:
            count, self._unlogged[kind] = self._unlogged[kind], 0
            self._logged_at[kind] = now
            log.warning(f"display_{kind}", count=count, in_last_s=self.interval, **context)


class _Guarded(asyncio.Protocol):
    """One connection: aiohttp's protocol behind the guard's admission and arrival timer."""

    def __init__(self, guard: ConnectionGuard, inner: asyncio.Protocol) -> None:
        self.guard = guard
        self.inner = inner
        self.transport: asyncio.Transport | None = None
        self.local = False
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        peer = transport.get_extra_info("peername")
        self.local = self.guard.is_local(peer[0] if isinstance(peer, tuple) else None)
        if not self.guard.admit(self, transport):
            transport.abort()
            return
        self.transport = transport
        self._timer = asyncio.get_running_loop().call_later(
            self.guard.request_timeout, self._arrival_expired
        )
        self.inner.connection_made(transport)

    def request_arrived(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arrival_expired(self) -> None:
        self._timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.guard.tally.add("request_timeout", timeout_s=self.guard.request_timeout)
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.request_arrived()
        if self.transport is None:
            return  # refused: aiohttp never saw it
        self.guard.release(self)
        self.inner.connection_lost(exc)


class ConnectionGuard:
    """The protocol factory given to ``loop.create_server`` in place of aiohttp's ``Server``."""

    def __init__(
        self,
        factory: Callable[[], asyncio.Protocol],
        *,
        max_connections: int,
        request_timeout: float,
        reserve: int = LOCAL_RESERVE,
        tally: Tally | None = None,
        is_local: Callable[[str | None], bool] = is_loopback_address,
    ) -> None:
        """``is_local``: whether a peer address is the kiosk's side (loopback by default)."""
        self.factory = factory
        self.is_local = is_local
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self.reserve = reserve
        self.tally = tally or Tally()
        self._open: dict[asyncio.BaseTransport, _Guarded] = {}

    def __call__(self) -> asyncio.Protocol:
        return _Guarded(self, self.factory())

    def admit(self, conn: _Guarded, transport: asyncio.BaseTransport) -> bool:
        limit = self.max_connections + (self.reserve if conn.local else 0)
        if len(self._open) >= limit:
            self.tally.add("connection_refused", open=len(self._open))
            return False
        self._open[transport] = conn
        return True

    def release(self, conn: _Guarded) -> None:
        if conn.transport is not None:
            self._open.pop(conn.transport, None)

    @property
    def connections(self) -> int:
        return len(self._open)

    def request_arrived(self, transport: asyncio.BaseTransport | None) -> None:
        """A whole request head arrived on ``transport`` (called from the app's middleware)."""
        conn = self._open.get(transport) if transport is not None else None
        if conn is not None:
            conn.request_arrived()


class StreamLimiter:
    """Which live streams stay open: at most ``max_streams`` (+ the kiosk's reserve)."""

    def __init__(
        self, max_streams: int, reserve: int = LOCAL_RESERVE, tally: Tally | None = None
    ) -> None:
        self.max_streams = max_streams
        self.reserve = reserve
        self.tally = tally or Tally()
        self._streams: OrderedDict[object, bool] = OrderedDict()  # key → local, oldest first

    def admit(self, key: object, local: bool, close: Callable[[object], None]) -> bool:
        """Admit a new stream; to make room, ``close`` the oldest remote one. False: refused
        (only loopback streams are open, and a remote one may not displace them)."""
        if len(self._streams) >= self.max_streams:
            oldest = next((k for k, is_local in self._streams.items() if not is_local), None)
            if oldest is not None:
                del self._streams[oldest]
                close(oldest)
                self.tally.add("stream_dropped", streams=len(self._streams))
            elif not local or len(self._streams) >= self.max_streams + self.reserve:
                self.tally.add("stream_refused", streams=len(self._streams))
                return False
        self._streams[key] = local
        return True

    def release(self, key: object) -> None:
        self._streams.pop(key, None)

    @property
    def streams(self) -> int:
        return len(self._streams)
