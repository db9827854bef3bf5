"""The TCP transport (a serial-device server such as ser2net) with a simulator serving TCP."""

from __future__ import annotations

import asyncio

from drivers.events import (
    DealEnded,
    DeviceOffline,
    DeviceOnline,
    FrameError,
    PacketDealt,
    PositionDrawn,
)
from drivers.rng import RngBoxDevice
from drivers.shuffler import ShufflerDevice
from drivers.tcp import TcpTransport
from simulators.rng import RngSimulator
from simulators.shuffler import ShufflerSimulator
from simulators.tcp import TcpServerPort
from tests.drivers.conftest import ALL_CARDS, FAST_BACKOFF, Events, running


async def test_deal_over_tcp_and_server_gone_and_back(events: Events) -> None:
    port = TcpServerPort()
    async with ShufflerSimulator(port, seed=21) as sim:
        device = ShufflerDevice(
            "shuffler", TcpTransport("127.0.0.1", port.port), backoff=FAST_BACKOFF
        )
        async with running(device, events):
            await events.expect(DeviceOnline)
            assert await sim.wait_for_host()
            await sim.deal()
            deal = await events.until("deal_ended")
            packets = [e for e in deal if isinstance(e, PacketDealt)]
            assert len(packets) == 7
            assert len({c for p in packets for c in p.cards}) == 49
            assert {c for p in packets for c in p.cards} < ALL_CARDS

            await port.unplug()
            offline = await events.expect(DeviceOffline)
            assert "link lost" in offline.reason
            await port.replug()
            loop = asyncio.get_running_loop()
            back = loop.time()
            await events.expect(DeviceOnline, timeout=2.0)
            assert loop.time() - back < 2.0
            assert await sim.wait_for_host()
            await sim.deal()
            deal = await events.until("deal_ended")
            assert isinstance(deal[-1], DealEnded)
            assert len([e for e in deal if isinstance(e, PacketDealt)]) == 7


async def test_rng_box_over_tcp(events: Events) -> None:
    port = TcpServerPort()
    async with RngSimulator(port, seed=1) as sim:
        device = RngBoxDevice("rng", TcpTransport("127.0.0.1", port.port), backoff=FAST_BACKOFF)
        async with running(device, events):
            await events.expect(DeviceOnline)
            assert await sim.wait_for_host()
            number = await sim.press()
            assert await events.expect(PositionDrawn) == PositionDrawn(
                device="rng", method="rng", number=number
            )


async def test_connection_refused_is_offline_then_retried(events: Events) -> None:
    port = TcpServerPort()
    await port.open()
    number = port.port
    await port.close()
    device = RngBoxDevice("rng", TcpTransport("127.0.0.1", number), backoff=FAST_BACKOFF)
    async with running(device, events):
        offline = await events.expect(DeviceOffline)
        assert "cannot open tcp 127.0.0.1" in offline.reason
        async with RngSimulator(TcpServerPort(port=number), seed=2):
            await events.expect(DeviceOnline)


async def test_a_serial_server_without_its_device_is_one_offline_and_never_online(
    events: Events,
) -> None:
    """ser2net with its device absent accepts, writes an error text and closes, again and
    again: the device is not online (no valid frame came), and the outage is reported once. The
    text is not a frame: each time, it is reported as discarded bytes (FrameError), not dropped
    silently (the daemon's limiter makes that one alarm per interval)."""
    accepted = 0
    enough = asyncio.Event()
    text = b"\x02ser2net: port /dev/ttyUSB0 unavailable\r\n\xff"

    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        if accepted >= 6:
            enough.set()
        writer.write(text)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(refuse, "127.0.0.1", 0, reuse_address=True)
    number = server.sockets[0].getsockname()[1]
    device = RngBoxDevice("rng", TcpTransport("127.0.0.1", number), backoff=FAST_BACKOFF)
    async with running(device, events):
        async with asyncio.timeout(10):
            await enough.wait()
        server.close()
        await server.wait_closed()
        before = events.pending()
        offline = [e for e in before if isinstance(e, DeviceOffline)]
        assert len(offline) == 1, before
        assert "no valid frame" in offline[0].reason
        noise = [e for e in before if not isinstance(e, DeviceOffline)]
        assert len(noise) >= 5 and all(isinstance(e, FrameError) for e in noise), before
        assert all(e.discarded == len(text) for e in noise if isinstance(e, FrameError))
        async with RngSimulator(TcpServerPort(port=number), seed=3) as sim:
            # (the text of a connection still in flight when the server closed may come first)
            up = await events.until("device_online", timeout=5)
            assert all(isinstance(e, FrameError) for e in up[:-1]), up
            assert await sim.wait_for_host()
            number_drawn = await sim.press()
            drawn = await events.expect(PositionDrawn)
            assert drawn.number == number_drawn
