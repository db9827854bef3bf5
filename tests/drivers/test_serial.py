"""The real serial driver (pyserial-asyncio-fast) on real ptys, through a udev-like symlink."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller.game.cards import DECK
from drivers.events import (
    CardDealt,
    DealEnded,
    DealStarted,
    DeviceEvent,
    DeviceFault,
    DeviceOffline,
    DeviceOnline,
    FrameError,
    PacketDealt,
    StubVerified,
)
from drivers.framing import DeviceState, FaultCode
from drivers.serial import SerialTransport
from drivers.shoe import ShoeDevice
from drivers.shuffler import ShufflerDevice
from simulators.faults import FAULT_PACKET, FAULTS
from simulators.pty import PtyPort
from simulators.shoe import ShoeSimulator
from simulators.shuffler import ShufflerSimulator
from tests.drivers.conftest import ALL_CARDS, FAST_BACKOFF, Events, running

SILENCE = 0.3
WAIT_EXIT = 5.0


@pytest.fixture
async def shuffler_pty(tmp_path: Path) -> AsyncIterator[ShufflerSimulator]:
    async with ShufflerSimulator(PtyPort(tmp_path / "paigow-shuffler"), seed=1) as sim:
        yield sim


def shuffler_on(path: str) -> ShufflerDevice:
    return ShufflerDevice(
        "shuffler", SerialTransport(path), backoff=FAST_BACKOFF, silence_timeout=SILENCE
    )


async def connect(sim: ShufflerSimulator, events: Events) -> None:
    """Wait until the driver is online and has greeted the simulator."""
    await events.expect(DeviceOnline)
    assert await sim.wait_for_host()


def packets_of(deal: list[DeviceEvent]) -> list[PacketDealt]:
    return [e for e in deal if isinstance(e, PacketDealt)]


def assert_whole_deal(deal: list[DeviceEvent]) -> None:
    assert isinstance(deal[0], DealStarted)
    packets = packets_of(deal)
    assert [p.index for p in packets] == list(range(7))
    assert all(len(p.cards) == 7 for p in packets)
    [stub] = [e for e in deal if isinstance(e, StubVerified)]
    dealt = [card for p in packets for card in p.cards] + list(stub.cards)
    assert len(dealt) == 53 and set(dealt) == ALL_CARDS
    assert isinstance(deal[-1], DealEnded)
    assert not [e for e in deal if isinstance(e, FrameError | DeviceFault)]


async def test_full_deal_through_a_symlinked_pty(
    shuffler_pty: ShufflerSimulator, events: Events
) -> None:
    port = shuffler_pty.port
    assert isinstance(port, PtyPort) and port.link is not None
    assert os.path.islink(port.path)
    async with running(shuffler_on(port.path), events):
        await connect(shuffler_pty, events)
        plan = await shuffler_pty.deal()
        deal = await events.until("deal_ended")
        assert_whole_deal(deal)
        assert [list(p.cards) for p in packets_of(deal)] == [
            [str(c) for c in _cards(packet)] for packet in plan.packets
        ]


def _cards(codes: list[int]) -> list[str]:
    return [str(DECK[c]) for c in codes]


async def test_pty_that_disappears_and_returns_is_reconnected_within_2_s(
    shuffler_pty: ShufflerSimulator, events: Events
) -> None:
    port = shuffler_pty.port
    device = ShufflerDevice("shuffler", SerialTransport(port.path))  # the default backoff
    async with running(device, events):
        await connect(shuffler_pty, events)
        for _ in range(2):
            await port.unplug()
            offline = await events.expect(DeviceOffline)
            assert "link lost" in offline.reason
            await port.replug()
            loop = asyncio.get_running_loop()
            back = loop.time()
            await events.expect(DeviceOnline, timeout=2.0)
            assert loop.time() - back < 2.0
            assert await shuffler_pty.wait_for_host()
        await shuffler_pty.deal()
        assert_whole_deal(await events.until("deal_ended"))


async def test_driver_started_before_the_device_exists(tmp_path: Path, events: Events) -> None:
    link = tmp_path / "paigow-shuffler"
    async with running(shuffler_on(str(link)), events):
        offline = await events.expect(DeviceOffline)
        assert "cannot open serial" in offline.reason
        async with ShufflerSimulator(PtyPort(link), seed=2) as sim:
            await connect(sim, events)
            await sim.deal()
            assert_whole_deal(await events.until("deal_ended"))


async def test_stopping_the_driver_reports_offline(
    shuffler_pty: ShufflerSimulator, events: Events
) -> None:
    async with running(shuffler_on(shuffler_pty.port.path), events):
        await connect(shuffler_pty, events)
    stopped = await events.expect(DeviceOffline)
    assert stopped.reason == "driver stopped"


async def test_device_faults_and_status(shuffler_pty: ShufflerSimulator, events: Events) -> None:
    async with running(shuffler_on(shuffler_pty.port.path), events):
        await connect(shuffler_pty, events)
        await shuffler_pty.fault(FaultCode.JAM, "feeder")
        assert await events.expect(DeviceFault) == DeviceFault(
            device="shuffler", code="jam", detail="feeder"
        )
        shuffler_pty.state = DeviceState.FAULT
        await shuffler_pty.port.unplug()
        await events.expect(DeviceOffline)
        await shuffler_pty.port.replug()
        await events.expect(DeviceOnline)
        # the greeting asks for STATUS, which still shows the jam
        assert (await events.expect(DeviceFault)).code == "jam"


def _packet3(deal: list[DeviceEvent]) -> PacketDealt:
    [packet] = [p for p in packets_of(deal) if p.index == FAULT_PACKET]
    return packet


@pytest.mark.parametrize("fault", FAULTS)
async def test_shuffler_fault_scenarios(
    shuffler_pty: ShufflerSimulator, events: Events, fault: str
) -> None:
    async with running(shuffler_on(shuffler_pty.port.path), events):
        await connect(shuffler_pty, events)
        plan = await shuffler_pty.deal(faults=[fault])
        if fault == "silence_mid_deal":
            deal = await events.until("device_fault")
            assert deal[-1] == DeviceFault(
                device="shuffler", code="silence", detail=f"no data for {SILENCE:g} s during a deal"
            )
            assert [p.index for p in packets_of(deal)] == [0, 1, 2]
        elif fault == "unplug_replug":
            deal = await events.until("device_online")
            assert isinstance(deal[-2], DeviceOffline)
            # bytes on the line when the cable goes may be lost, so "at most"
            assert [p.index for p in packets_of(deal)] == [0, 1, 2][: len(packets_of(deal))]
        else:
            deal = await events.until("deal_ended")
            errors = [e.error for e in deal if isinstance(e, FrameError)]
            stub = next(e for e in deal if isinstance(e, StubVerified))
            if fault == "short_packet":
                assert len(_packet3(deal).cards) == 6
            elif fault == "eight_cards":
                assert len(_packet3(deal).cards) == 8 and len(stub.cards) == 3
            elif fault == "duplicate_card":
                assert packets_of(deal)[0].cards[0] in _packet3(deal).cards
            elif fault == "foreign_card":
                assert errors == ["unknown_card"]
                assert "?7f" in _packet3(deal).cards
            elif fault == "second_joker":
                cards = [c for p in packets_of(deal) for c in p.cards] + list(stub.cards)
                assert cards.count("JK") == 2
            elif fault == "garbled_bytes":
                assert errors == ["garbled"]
                assert len(packets_of(deal)) == 7
            elif fault == "checksum_error":
                assert errors == ["checksum", "sequence"]
                assert [p.index for p in packets_of(deal)] == [0, 1, 2, 4, 5, 6]
            elif fault == "stub_three_cards":
                assert len(stub.cards) == 3
            if fault not in ("foreign_card", "garbled_bytes", "checksum_error"):
                assert errors == []
        started = [e.shuffle_id for e in deal if isinstance(e, DealStarted)]
        assert started == [plan.shuffle_id] or (fault == "unplug_replug" and not started)
        # the driver carries on: the next deal is read whole
        await shuffler_pty.deal()
        assert_whole_deal(await events.until("deal_ended"))


@pytest.mark.parametrize("fault", FAULTS)
async def test_shoe_fault_scenarios(tmp_path: Path, events: Events, fault: str) -> None:
    port = PtyPort(tmp_path / "paigow-shoe")
    async with ShoeSimulator(port, seed=9) as sim:
        device = ShoeDevice(
            "shoe", SerialTransport(port.path), backoff=FAST_BACKOFF, silence_timeout=SILENCE
        )
        async with running(device, events):
            await events.expect(DeviceOnline)
            assert await sim.wait_for_host()
            plan = await sim.deal(faults=[fault])
            end = {"silence_mid_deal": "device_fault", "unplug_replug": "device_online"}
            deal = await events.until(end.get(fault, "deal_ended"))
            cards = [e.card for e in deal if isinstance(e, CardDealt)]
            errors = [e.error for e in deal if isinstance(e, FrameError)]
            expected_cards = {
                "short_packet": 48,
                "eight_cards": 50,
                "checksum_error": 48,
                "silence_mid_deal": 21,
            }
            if fault == "unplug_replug":
                assert cards == [str(DECK[c]) for c in plan.cards[: len(cards)]]
                assert len(cards) <= 21
            else:
                assert len(cards) == expected_cards.get(fault, 49)
            expected_errors = {
                "foreign_card": ["unknown_card"],
                "garbled_bytes": ["garbled"],
                "checksum_error": ["checksum", "sequence"],
            }
            assert errors == expected_errors.get(fault, [])
            if fault == "foreign_card":
                assert cards[3 * 7 + 2] == "?7f"
            if fault == "duplicate_card":
                assert len(set(cards)) == 48
            if fault == "second_joker":
                stub = next(e for e in deal if isinstance(e, StubVerified))
                assert (cards + list(stub.cards)).count("JK") == 2
            await sim.deal()
            deal = await events.until("deal_ended")
            cards = [e.card for e in deal if isinstance(e, CardDealt)]
            stub = next(e for e in deal if isinstance(e, StubVerified))
            assert len(cards) == 49 and set(cards) | set(stub.cards) == ALL_CARDS


def test_serial_settings_are_checked() -> None:
    transport = SerialTransport("/dev/x", baudrate=9600, bytesize=7, parity="even", stopbits=2)
    assert transport.describe() == "serial /dev/x 9600 7E2"
    for bad in ({"baudrate": 0}, {"bytesize": 9}, {"parity": "X"}, {"stopbits": 3}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SerialTransport("/dev/x", **bad)


async def test_standalone_simulator_on_a_pty(tmp_path: Path, events: Events) -> None:
    """``python -m simulators shuffler --pty`` prints the path; Enter deals; a fault name too."""
    link = tmp_path / "paigow-shuffler"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "simulators",
        "shuffler",
        "--pty",
        "--link",
        str(link),
        "--seed",
        "5",
        "--interval",
        "0",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        cwd=Path(__file__).parents[2],
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        async with asyncio.timeout(15):  # a cold interpreter start on a loaded box
            path = (await process.stdout.readline()).decode().strip()
        assert path == str(link)
        async with running(shuffler_on(path), events):
            await events.expect(DeviceOnline)
            process.stdin.write(b"\n")
            assert_whole_deal(await events.until("deal_ended"))
            process.stdin.write(b"eight_cards\n")
            deal = await events.until("deal_ended")
            assert len(_packet3(deal).cards) == 8
            process.stdin.write(b"q\n")
            async with asyncio.timeout(WAIT_EXIT):
                assert await process.wait() == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
