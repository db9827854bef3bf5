"""The USB dice reader: real pyusb against the simulated backend, the report codec, fuzzing."""

from __future__ import annotations

import array
import asyncio
import errno
import itertools
import random
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import structlog
import usb.core  # type: ignore[import-untyped]
import usb.util  # type: ignore[import-untyped]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from drivers.base import Backoff
from drivers.codecs.dice_hid import (
    DEFAULT_PRODUCT_ID,
    DEFAULT_VENDOR_ID,
    REPORT_DESCRIPTOR,
    STATUS_HW_FAULT,
    STATUS_IDLE,
    STATUS_MISREAD,
    DiceHidCodec,
    crc8,
    encode_report,
    encode_roll,
)
from drivers.dice import UsbDiceReader
from drivers.events import (
    DeviceEvent,
    DeviceFault,
    DeviceOffline,
    DeviceOnline,
    FrameError,
    PositionDrawn,
)
from simulators import dice as dice_simulator
from simulators.dice import DiceReaderSimulator

FAST = Backoff(initial=0.02, factor=2.0, cap=0.2, jitter=0.0)
WAIT = 2.0  # seconds any one event may take; the brief's bound for resuming after a replug


def rules_position(dice: tuple[int, int, int]) -> int:
    """docs/rules.md §6, written out independently of the codec."""
    return (sum(dice) - 1) % 7 + 1


async def next_event(events: asyncio.Queue[DeviceEvent], timeout: float = WAIT) -> DeviceEvent:
    return await asyncio.wait_for(events.get(), timeout)


async def expect(events: asyncio.Queue[DeviceEvent], kind: type[Any]) -> Any:
    event = await next_event(events)
    assert isinstance(event, kind), f"expected {kind.__name__}, got {event!r}"
    return event


class Rig:
    def __init__(self, sim: DiceReaderSimulator, events: asyncio.Queue[DeviceEvent]) -> None:
        self.sim = sim
        self.events = events

    async def roll(self, dice: tuple[int, int, int]) -> PositionDrawn:
        self.sim.roll(dice)
        event: PositionDrawn = await expect(self.events, PositionDrawn)
        return event


async def _start(sim: DiceReaderSimulator) -> AsyncIterator[Rig]:
    reader = UsbDiceReader(name="dice", backend=sim.backend, read_timeout_ms=50, backoff=FAST)
    events: asyncio.Queue[DeviceEvent] = asyncio.Queue()
    task = asyncio.create_task(reader.run(events), name="test.dice")
    try:
        yield Rig(sim, events)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)


@pytest.fixture
async def rig() -> AsyncIterator[Rig]:
    """The driver running against a plugged-in simulated reader, already online."""
    async for started in _start(DiceReaderSimulator(seed=11)):
        await expect(started.events, DeviceOnline)
        yield started


# -- the real pyusb path against the simulated device ---------------------------------------------


def test_pyusb_finds_and_reads_the_simulated_reader() -> None:
    sim = DiceReaderSimulator(seed=1)
    dev = usb.core.find(
        idVendor=DEFAULT_VENDOR_ID, idProduct=DEFAULT_PRODUCT_ID, backend=sim.backend
    )
    assert dev is not None
    assert usb.core.find(idVendor=DEFAULT_VENDOR_ID, idProduct=0xBEEF, backend=sim.backend) is None
    dev.set_configuration()
    intf = dev.get_active_configuration()[(0, 0)]
    assert intf.bInterfaceClass == 0x03  # HID
    (ep,) = intf.endpoints()
    assert ep.bEndpointAddress == 0x81
    assert usb.util.endpoint_type(ep.bmAttributes) == usb.util.ENDPOINT_TYPE_INTR
    assert ep.wMaxPacketSize == 8
    assert usb.util.get_string(dev, dev.iProduct) == "Dice Reader (simulated)"
    report_descriptor = dev.ctrl_transfer(0x81, 0x06, 0x2200, 0, len(REPORT_DESCRIPTOR))
    assert bytes(report_descriptor) == REPORT_DESCRIPTOR
    usb.util.claim_interface(dev, 0)
    assert bytes(dev.read(0x81, 8, timeout=100)) == encode_report(seq=0, status=STATUS_IDLE)
    sim.roll((2, 3, 4))
    assert bytes(dev.read(0x81, 8, timeout=100)) == encode_roll(1, (2, 3, 4))
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 8, timeout=10)
    sim.unplug()
    with pytest.raises(usb.core.USBError) as unplugged:
        dev.read(0x81, 8, timeout=100)
    assert unplugged.value.errno == errno.ENODEV == 19
    assert usb.core.find(idVendor=DEFAULT_VENDOR_ID, backend=sim.backend) is None
    usb.util.dispose_resources(dev)
    sim.replug()
    again = usb.core.find(idVendor=DEFAULT_VENDOR_ID, backend=sim.backend)
    assert again is not None and again.address != dev.address
    usb.util.dispose_resources(again)


def test_an_unplug_wakes_a_waiting_read() -> None:
    sim = DiceReaderSimulator()
    dev = usb.core.find(idVendor=DEFAULT_VENDOR_ID, backend=sim.backend)
    dev.set_configuration()
    dev.read(0x81, 8, timeout=100)  # the power-up status report
    outcome: list[BaseException] = []

    def blocked_read() -> None:
        try:
            dev.read(0x81, 8, timeout=0)  # 0: wait for ever, as libusb does
        except usb.core.USBError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=blocked_read)
    thread.start()
    assert sim.backend.wait_for_reader(WAIT)
    sim.unplug()
    thread.join(WAIT)
    assert not thread.is_alive()
    assert isinstance(outcome[0], usb.core.USBError) and outcome[0].errno == errno.ENODEV


# -- the driver ----------------------------------------------------------------------------------


async def test_rolls_become_positions_for_every_sum(rig: Rig) -> None:
    first = await rig.roll((3, 5, 6))
    assert first.device == "dice" and first.method == "dice"
    assert first.dice == (3, 5, 6) and first.number == 7
    for total in range(3, 19):
        dice = next(
            (a, b, c) for a, b, c in itertools.product(range(1, 7), repeat=3) if a + b + c == total
        )
        drawn = await rig.roll(dice)
        assert drawn.dice == dice
        assert drawn.number == rules_position(dice)
    # the dealer (position 1) is named by the sums 8 and 15 (and 1, which three dice cannot make)
    assert (await rig.roll((2, 3, 3))).number == 1
    assert (await rig.roll((5, 5, 5))).number == 1
    for _ in range(20):
        dice = rig.sim.roll()
        drawn = await expect(rig.events, PositionDrawn)
        assert drawn.dice == dice and drawn.number == rules_position(dice)


async def test_bad_reports_are_frame_errors_and_reading_carries_on(rig: Rig) -> None:
    good = encode_roll(40, (1, 2, 3))
    bad_checksum = good[:7] + bytes((good[7] ^ 0x01,))
    rig.sim.send_raw(bad_checksum)
    assert (await expect(rig.events, FrameError)).error == "checksum"
    assert (await rig.roll((4, 4, 4))).dice == (4, 4, 4)

    for bad_die in ((7, 1, 1), (1, 0, 1), (1, 1, 255)):
        rig.sim.send_raw(encode_roll(77, bad_die))
        error = await expect(rig.events, FrameError)
        assert error.error == "garbled" and "out of range" in error.detail
    assert (await rig.roll((6, 5, 4))).dice == (6, 5, 4)

    rig.sim.send_raw(good[:5])
    short = await expect(rig.events, FrameError)
    assert short.error == "truncated" and short.raw_hex == good[:5].hex()
    rig.sim.send_raw(good + b"\x00")  # longer than the 8-byte endpoint: a USB overflow
    assert (await expect(rig.events, FrameError)).error == "oversize"
    assert (await rig.roll((1, 1, 2))).number == 4


async def test_a_repeated_report_is_one_roll(rig: Rig) -> None:
    await rig.roll((2, 2, 2))
    rig.sim.repeat_last()
    rig.sim.repeat_last()
    drawn = await rig.roll((3, 3, 3))  # the next event is this roll: the repeats gave nothing
    assert drawn.dice == (3, 3, 3)
    assert rig.events.empty()


async def test_device_faults(rig: Rig) -> None:
    rig.sim.misread()
    assert (await expect(rig.events, DeviceFault)).code == "dice_misread"
    rig.sim.hardware_fault(0x2A)
    fault = await expect(rig.events, DeviceFault)
    assert fault.code == "dice_hardware" and "0x2a" in fault.detail
    assert (await rig.roll((1, 2, 6))).number == 2


async def test_unplug_and_replug(rig: Rig) -> None:
    await rig.roll((1, 1, 1))
    for power_cycle in (True, False):
        rig.sim.unplug()
        offline = await expect(rig.events, DeviceOffline)
        assert "unplugged" in offline.reason
        loop = asyncio.get_running_loop()
        replugged_at = loop.time()
        rig.sim.replug(power_cycle=power_cycle)
        online = await expect(rig.events, DeviceOnline)
        assert "1209:0001" in online.detail
        drawn = await rig.roll((6, 6, 5))
        assert drawn.number == rules_position((6, 6, 5))
        assert loop.time() - replugged_at < WAIT
    rig.sim.repeat_last()  # the same roll reported again after a hub reset: still one roll
    assert (await rig.roll((2, 1, 1))).dice == (2, 1, 1)


async def test_reader_absent_at_start_then_plugged() -> None:
    sim = DiceReaderSimulator(seed=5)
    sim.unplug()
    async for started in _start(sim):
        assert "not found" in (await expect(started.events, DeviceOffline)).reason
        sim.replug()
        await expect(started.events, DeviceOnline)
        await started.roll((4, 5, 6))


async def test_pyusb_calls_never_run_on_the_event_loop() -> None:
    sim = DiceReaderSimulator(seed=2)
    loop_thread = threading.get_ident()
    callers: set[int] = set()
    backend: Any = sim.backend

    def recorded(method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            callers.add(threading.get_ident())
            return method(*args)

        return call

    calls = ("enumerate_devices", "open_device", "set_configuration", "intr_read", "close_device")
    for name in calls:
        setattr(backend, name, recorded(getattr(backend, name)))
    async for started in _start(sim):
        await expect(started.events, DeviceOnline)
        await started.roll((1, 2, 3))
        sim.unplug()
        await expect(started.events, DeviceOffline)
    assert callers and loop_thread not in callers


async def test_cancelled_while_opening_still_releases_the_device() -> None:
    sim = DiceReaderSimulator()
    backend: Any = sim.backend
    configuring, proceed, closed = threading.Event(), threading.Event(), threading.Event()
    set_configuration, close_device = backend.set_configuration, backend.close_device

    def slow_set_configuration(handle: Any, value: int) -> None:
        configuring.set()
        proceed.wait(WAIT)
        set_configuration(handle, value)

    def recorded_close(handle: Any) -> None:
        closed.set()
        close_device(handle)

    backend.set_configuration = slow_set_configuration
    backend.close_device = recorded_close
    reader = UsbDiceReader(backend=sim.backend, read_timeout_ms=50, backoff=FAST)
    task = asyncio.create_task(reader.run(asyncio.Queue()))
    assert await asyncio.to_thread(configuring.wait, WAIT)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, WAIT)
    proceed.set()  # the open finishes in its thread after the driver is gone
    assert await asyncio.to_thread(closed.wait, WAIT)


# -- the codec -----------------------------------------------------------------------------------


def test_worked_example_from_the_protocol_doc() -> None:
    assert crc8(b"123456789") == 0xF4  # CRC-8/SMBUS check value
    report = bytes.fromhex("01 2a 01 03 05 06 00 1f")
    assert encode_roll(0x2A, (3, 5, 6)) == report
    (drawn,) = DiceHidCodec("dice").decode(report)
    assert drawn == PositionDrawn(device="dice", method="dice", dice=(3, 5, 6), number=7)


def test_status_reports_and_sequence_rules() -> None:
    codec = DiceHidCodec("dice")
    assert codec.decode(encode_report(seq=0, status=STATUS_IDLE)) == []
    assert codec.decode(b"") == []  # a zero-length packet
    assert len(codec.decode(encode_roll(1, (1, 2, 3)))) == 1
    assert codec.decode(encode_roll(1, (1, 2, 3))) == []  # the same roll again
    assert codec.decode(encode_report(seq=9, status=STATUS_IDLE)) == []  # keeps the sequence
    assert codec.decode(encode_roll(1, (1, 2, 3))) == []
    assert codec.decode(encode_report(seq=0, status=STATUS_IDLE)) == []  # power-up: forget it
    assert len(codec.decode(encode_roll(1, (1, 2, 3)))) == 1
    assert len(codec.decode(encode_roll(2, (1, 2, 3)))) == 1
    (zero,) = codec.decode(encode_roll(0, (1, 2, 3)))
    assert isinstance(zero, FrameError) and zero.error == "sequence"
    (other_id,) = codec.decode(encode_report(seq=3, status=1, dice=(1, 1, 1), report_id=2))
    assert isinstance(other_id, FrameError) and other_id.error == "unknown_type"
    (other_status,) = codec.decode(encode_report(seq=3, status=0x40))
    assert isinstance(other_status, FrameError) and other_status.error == "unknown_type"
    (misread,) = codec.decode(encode_report(seq=3, status=STATUS_MISREAD))
    assert isinstance(misread, DeviceFault)
    (fault,) = codec.decode(encode_report(seq=4, status=STATUS_HW_FAULT, detail=7))
    assert isinstance(fault, DeviceFault) and fault.code == "dice_hardware"
    (long,) = codec.decode(encode_roll(5, (1, 2, 3)) + b"\x00")
    assert isinstance(long, FrameError) and long.error == "oversize"


ALLOWED = (PositionDrawn, DeviceFault, FrameError)


def _check(codec: DiceHidCodec, report: bytes) -> None:
    for event in codec.decode(report):
        assert isinstance(event, ALLOWED)
        if isinstance(event, PositionDrawn):
            assert event.dice is not None and all(1 <= d <= 6 for d in event.dice)
            assert event.number == rules_position(event.dice)
            assert len(report) == 8 and crc8(report[:7]) == report[7]


def test_fuzz_random_reports() -> None:
    fed = 0

    @settings(
        max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(st.lists(st.binary(max_size=12), min_size=200, max_size=200), st.booleans())
    def check(reports: list[bytes], fix_checksum: bool) -> None:
        nonlocal fed
        codec = DiceHidCodec("fuzz")
        for report in reports:
            if fix_checksum and len(report) == 8:  # reach the checks behind the checksum too
                report = report[:7] + bytes((crc8(report[:7]),))
            _check(codec, report)
        fed += len(reports)

    check()
    assert fed >= 20_000


def test_fuzz_mutated_reports() -> None:
    fed = 0
    dice = st.tuples(*(st.integers(1, 6) for _ in range(3)))

    @settings(max_examples=100, deadline=None, database=None)
    @given(st.integers(0, 2**32 - 1), st.integers(0, 255), dice)
    def check(seed: int, seq: int, roll: tuple[int, int, int]) -> None:
        nonlocal fed
        rng = random.Random(seed)
        codec = DiceHidCodec("fuzz")
        valid = encode_roll(seq, roll)
        for _ in range(800):
            report = bytearray(valid)
            for _ in range(rng.randint(1, 3)):
                how = rng.randrange(5)
                if how == 0 and report:
                    report[rng.randrange(len(report))] ^= 1 << rng.randrange(8)
                elif how == 1 and report:
                    report[rng.randrange(len(report))] = rng.randrange(256)
                elif how == 2:
                    del report[rng.randrange(len(report) + 1) :]
                elif how == 3:
                    report += bytes(rng.randrange(256) for _ in range(rng.randint(1, 4)))
                elif len(report) == 8:
                    report[7] = crc8(bytes(report[:7]))
            _check(codec, bytes(report))
        fed += 800

    check()
    assert fed >= 80_000


def test_decode_never_raises_on_odd_input() -> None:
    codec = DiceHidCodec("dice")
    for odd in (bytearray(encode_roll(1, (1, 1, 1))), memoryview(encode_roll(2, (1, 1, 2)))):
        assert len(codec.decode(odd)) == 1  # type: ignore[arg-type]
    assert codec.decode(array.array("B", encode_roll(3, (1, 1, 3))))  # type: ignore[arg-type]
    (bug,) = codec.decode(None)  # type: ignore[arg-type]
    assert isinstance(bug, FrameError)


# -- the standalone simulator --------------------------------------------------------------------


@pytest.fixture
def keep_structlog_config() -> Iterator[None]:
    """main() points structlog at this test's captured stderr: put the config back after."""
    saved = structlog.get_config()
    try:
        yield
    finally:
        structlog.configure(**saved)


@pytest.mark.usefixtures("keep_structlog_config")
def test_simulator_main_reads_timed_rolls(capsys: pytest.CaptureFixture[str]) -> None:
    assert dice_simulator.main(["--seed", "4", "--interval", "0.01", "--count", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("-> position") == 3
    assert "device_online" in out
