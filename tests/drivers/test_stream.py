"""The run loop of a byte-stream device, over links made in the test: timers and backoff."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field

from drivers.base import Backoff
from drivers.codecs.shuffler import ReferenceShufflerCodec, msg_packet, msg_status
from drivers.events import DeviceOffline, DeviceOnline, FrameError, PacketDealt
from drivers.framing import DeviceState, FrameEncoder, MsgType
from drivers.reconnect import MAX_ATTEMPT
from drivers.stream import Link, LinkClosed, ProtocolLink, QueueProtocol, StreamDevice
from tests.drivers.conftest import Events, running


@dataclass(frozen=True)
class CountingBackoff(Backoff):
    """Records each attempt it is asked to wait for, and waits no time at all."""

    attempts: list[int] = field(default_factory=list)
    enough: asyncio.Event = field(default_factory=asyncio.Event)

    async def sleep(self, attempt: int) -> None:
        self.attempts.append(attempt)
        if len(self.attempts) >= 40:
            self.enough.set()
        await asyncio.sleep(0)


class QueueLink:
    """A link the test feeds by hand."""

    def __init__(self) -> None:
        self.incoming: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.written = bytearray()

    async def read(self) -> bytes:
        data = await self.incoming.get()
        if data is None:
            raise LinkClosed("closed by the test")
        return data

    def write(self, data: bytes) -> None:
        self.written += data

    async def close(self) -> None:
        return None


class HandTransport:
    def __init__(self, links: list[Link] | None = None, error: Exception | None = None) -> None:
        self.links = links or []
        self.error = error
        self.opened = 0

    def describe(self) -> str:
        return "hand"

    async def open(self) -> Link:
        self.opened += 1
        if self.error is not None:
            raise self.error
        if self.links:
            return self.links.pop(0)
        link = QueueLink()
        link.incoming.put_nowait(None)  # a link that drops at once
        return link


async def test_partial_frame_is_given_up_after_the_frame_timeout(events: Events) -> None:
    link = QueueLink()
    device = StreamDevice(
        "shuffler", HandTransport([link]), ReferenceShufflerCodec("shuffler"), frame_timeout=0.05
    )
    encoder = FrameEncoder()
    status = encoder.encode(*msg_status(DeviceState.IDLE))
    frame = encoder.encode(*msg_packet(0, [1, 2, 3, 4, 5, 6, 7]))
    async with running(device, events):
        link.incoming.put_nowait(status)  # the device answers the greeting: now it is online
        await events.expect(DeviceOnline)
        assert link.written[3] == MsgType.STATUS_REQUEST  # the greeting
        link.incoming.put_nowait(frame[:6])
        truncated = await events.expect(FrameError)
        assert truncated.error == "truncated" and truncated.raw_hex == frame[:6].hex()
        link.incoming.put_nowait(frame)
        assert (await events.expect(PacketDealt)).index == 0


async def test_an_absent_device_is_reported_once_and_retried_with_growing_backoff(
    events: Events,
) -> None:
    backoff = CountingBackoff()
    transport = HandTransport(error=FileNotFoundError(2, "No such file or directory"))
    device = StreamDevice("rng", transport, ReferenceShufflerCodec("rng"), backoff=backoff)
    async with running(device, events):
        async with asyncio.timeout(5):
            await backoff.enough.wait()
    assert backoff.attempts[:4] == [0, 1, 2, 3]
    assert backoff.attempts[-1] == MAX_ATTEMPT  # capped: Backoff.delay overflows near 1024
    offline = [e for e in events.pending() if isinstance(e, DeviceOffline)]
    assert len(offline) == 1 and "No such file" in offline[0].reason


async def test_a_link_that_drops_at_once_keeps_backing_off(events: Events) -> None:
    backoff = CountingBackoff()
    transport = HandTransport()
    device = StreamDevice("shuffler", transport, ReferenceShufflerCodec("s"), backoff=backoff)
    async with running(device, events):
        async with asyncio.timeout(5):
            await backoff.enough.wait()
    assert backoff.attempts[:5] == [0, 1, 2, 3, 4]  # not reset by each short-lived link
    # No valid frame ever arrived: never online, and one offline report for the whole outage.
    [offline] = events.pending()
    assert isinstance(offline, DeviceOffline) and "no valid frame" in offline.reason


class _ClosingTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing

    def abort(self) -> None:
        self.closing = True


async def test_a_driver_stopped_as_its_link_goes_stops() -> None:
    """Cancelled while closing a link that is already gone (the device left as the daemon
    stopped), close() must not swallow the cancellation: on Python 3.11 asyncio.wait_for did,
    and the driver's reconnect loop ran on for ever."""
    protocol = QueueProtocol()
    transport = _ClosingTransport()
    protocol.connection_made(transport)
    protocol.connection_lost(None)
    closing = asyncio.create_task(ProtocolLink(transport, protocol).close())
    await asyncio.sleep(0)  # close() is waiting for the link to be released
    closing.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await closing
    assert closing.cancelled(), "close() swallowed the cancellation"
    assert transport.closing
