"""Limits that keep the display server, and the table behind it, standing under a flood
(docs/display.md, "Limits and floods").

- :class:`ConnectionGuard` wraps aiohttp's protocol factory: at most ``max_connections`` open
  connections. Nothing is known of a connection when it is accepted, so a new one beyond the cap
  is accepted and the oldest *idle* connection closed to make room: one that has no request in
  flight (it never sent a whole request head, or it waits between requests) and whose requests
  have not carried the kiosk's credential (kiosk.py). An idle flood can therefore never starve a
  newcomer, and the kiosk's own connections are never closed for anyone. When nothing is idle,
  a newcomer is held in a ``reserve`` beyond the cap until its request head tells whether it is
  the kiosk's; one that is not is answered 503 and closed. A connection that has not delivered
  a whole request head within ``request_timeout`` is closed (an idle connect, a slowloris).
  Idle keep-alive connections are aiohttp's ``keepalive_timeout``. It wraps the protocol, not
  aiohttp's classes, so it relies only on asyncio's protocol interface.
- :class:`StreamLimiter` caps the live streams: a new one beyond ``max_streams`` closes the
  oldest stream that is not the kiosk's; the kiosk's (credentialed) streams are never closed for
  anyone else's, whatever the address of either.
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

log = structlog.get_logger(__name__)

#: Connections and streams beyond the caps that only the kiosk (its credential) may keep.
KIOSK_RESERVE = 16


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
        #: A request of it carried the kiosk's credential: never closed to make room.
        self.kiosk = False
        #: Requests in flight (head arrived, handler not yet returned): not idle.
        self.busy = 0
        #: Admitted beyond the cap (nothing was idle): kept only if it turns out the kiosk's.
        self.provisional = False
        self._timer: asyncio.TimerHandle | None = None

    @property
    def evictable(self) -> bool:
        return not self.busy and not self.kiosk

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        if not self.guard.admit(self, transport):
            transport.abort()
            return
        self.transport = transport
        self._timer = asyncio.get_running_loop().call_later(
            self.guard.request_timeout, self._arrival_expired
        )
        self.inner.connection_made(transport)

    def stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _arrival_expired(self) -> None:
        self._timer = None
        if self.transport is not None and not self.transport.is_closing():
            self.guard.tally.add("request_timeout", timeout_s=self.guard.request_timeout)
            self.transport.close()

    def evict(self) -> None:
        """Closed to make room for a newcomer (the guard no longer counts it)."""
        self.stop_timer()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.guard.touch(self)  # the most recently active: the last to be closed for room
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.stop_timer()
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
        reserve: int = KIOSK_RESERVE,
        tally: Tally | None = None,
    ) -> None:
        self.factory = factory
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self.reserve = reserve
        self.tally = tally or Tally()
        #: Open connections, least recently active first (the order idle ones are closed in).
        self._open: OrderedDict[asyncio.BaseTransport, _Guarded] = OrderedDict()

    def __call__(self) -> asyncio.Protocol:
        return _Guarded(self, self.factory())

    def _oldest_idle(self) -> _Guarded | None:
        return next((c for c in self._open.values() if c.evictable), None)

    def admit(self, conn: _Guarded, transport: asyncio.BaseTransport) -> bool:
        """Admit a new connection: under the cap at once; at the cap by closing the oldest idle
        one; when none is idle, provisionally within the reserve; beyond that, refused."""
        while len(self._open) >= self.max_connections:
            victim = self._oldest_idle()
            if victim is None:
                break
            if victim.transport is not None:
                del self._open[victim.transport]
            victim.evict()
            self.tally.add("connection_evicted", open=len(self._open))
        if len(self._open) >= self.max_connections:
            if len(self._open) >= self.max_connections + self.reserve:
                self.tally.add("connection_refused", open=len(self._open))
                return False
            conn.provisional = True
        self._open[transport] = conn
        return True

    def release(self, conn: _Guarded) -> None:
        if conn.transport is not None and self._open.get(conn.transport) is conn:
            del self._open[conn.transport]

    def touch(self, conn: _Guarded) -> None:
        if conn.transport is not None and conn.transport in self._open:
            self._open.move_to_end(conn.transport)

    @property
    def connections(self) -> int:
        return len(self._open)

    def request_arrived(self, transport: asyncio.BaseTransport | None, *, kiosk: bool) -> bool:
        """A whole request head arrived on ``transport`` (called from the app's middleware);
        ``kiosk``: it carries the kiosk's credential. False: the connection was admitted beyond
        the cap and is not the kiosk's, so the request must be refused (503) and closed."""
        conn = self._open.get(transport) if transport is not None else None
        if conn is None:
            return True  # not one of ours (a test's app), or already let go
        conn.stop_timer()
        conn.kiosk = conn.kiosk or kiosk
        if conn.provisional and not conn.kiosk:
            self.tally.add("connection_refused", open=len(self._open))
            return False
        conn.busy += 1
        return True

    def request_done(self, transport: asyncio.BaseTransport | None) -> None:
        """The request's handler returned: the connection is idle again (the newest idle)."""
        conn = self._open.get(transport) if transport is not None else None
        if conn is not None and conn.busy:
            conn.busy -= 1
            self.touch(conn)


class StreamLimiter:
    """Which live streams stay open: at most ``max_streams`` (+ a reserve for the kiosk's)."""

    def __init__(
        self, max_streams: int, reserve: int = KIOSK_RESERVE, tally: Tally | None = None
    ) -> None:
        self.max_streams = max_streams
        self.reserve = reserve
        self.tally = tally or Tally()
        self._streams: OrderedDict[object, bool] = OrderedDict()  # key → kiosk's, oldest first

    def admit(self, key: object, kiosk: bool, close: Callable[[object], None]) -> bool:
        """Admit a new stream; to make room, ``close`` the oldest one that is not the kiosk's.
        False: refused (only the kiosk's streams are open, and this one is not the kiosk's, or
        the kiosk's reserve is full too)."""
        if len(self._streams) >= self.max_streams:
            oldest = next((k for k, is_kiosk in self._streams.items() if not is_kiosk), None)
            if oldest is not None:
                del self._streams[oldest]
                close(oldest)
                self.tally.add("stream_dropped", streams=len(self._streams))
            elif not kiosk or len(self._streams) >= self.max_streams + self.reserve:
                self.tally.add("stream_refused", streams=len(self._streams))
                return False
        self._streams[key] = kiosk
        return True

    def release(self, key: object) -> None:
        self._streams.pop(key, None)

    @property
    def streams(self) -> int:
        return len(self._streams)
