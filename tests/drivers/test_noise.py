"""No noise is silent (docs/protocols.md §8): every byte a device sends is in one good frame or
counted in one ``FrameError.discarded``, before the device's first good frame as after it, and
endless noise costs bounded memory. The framing helper, every reference codec, the real serial
driver on a pty, and the pole display's input."""

from __future__ import annotations

import asyncio
import contextlib
import random
import tracemalloc
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers.codecs.dice_hid import DiceHidCodec, encode_roll
from drivers.codecs.rng import ReferenceRngCodec, msg_draw
from drivers.codecs.shoe import ReferenceShoeCodec, msg_card
from drivers.codecs.shuffler import ReferenceShufflerCodec
from drivers.events import (
    CardDealt,
    DealEnded,
    DealStarted,
    DeviceEvent,
    DeviceOnline,
    FrameError,
    PositionDrawn,
)
from drivers.framing import (
    MAX_FRAME,
    MAX_JUNK,
    MAX_PAYLOAD,
    OVERHEAD,
    RAW_HEX_LIMIT,
    STX,
    Frame,
    FrameDecoder,
    FrameEncoder,
    FrameProblem,
    Message,
    MsgType,
    ReferenceCodec,
    encode_frame,
    msg_deal_end,
    msg_deal_start,
)
from drivers.pole import SerialPoleDisplay
from drivers.serial import SerialTransport
from drivers.shuffler import ShufflerDevice
from simulators.pty import PtyPort
from tests.drivers.conftest import FAST_BACKOFF, Events, running
from tests.drivers.test_stream import HandTransport, QueueLink

NOISE_SEED = 2026  # 200 KB of it hold no good frame by chance (asserted below)
NOISE_SIZE = 200_000
SERIAL_READ = 1024  # what the serial transport reads at once
HELD_BOUND = MAX_JUNK + 2 * MAX_FRAME  # the most a decoder holds between feeds

# each codec, a frame its device sends, and the event that frame gives
CODECS: dict[type[ReferenceCodec], tuple[Message, type[DeviceEvent]]] = {
    ReferenceShufflerCodec: (msg_deal_end(), DealEnded),
    ReferenceShoeCodec: (msg_card(51), CardDealt),
    ReferenceRngCodec: (msg_draw(5), PositionDrawn),
}
DISCARDING = {"garbled", "oversize", "checksum", "truncated"}


def noise(size: int = NOISE_SIZE, seed: int = NOISE_SEED) -> bytes:
    return random.Random(seed).randbytes(size)


def pieces(data: bytes, size: int) -> Iterator[bytes]:
    for at in range(0, len(data), size):
        yield data[at : at + size]


# --- the framing helper and the codecs, byte for byte ---------------------------------------


@pytest.mark.parametrize("read", [1, SERIAL_READ, NOISE_SIZE], ids=["bytewise", "1k", "at-once"])
def test_noise_before_the_first_frame_is_counted_by_the_framing(read: int) -> None:
    decoder = FrameDecoder()
    data = noise(20_000 if read == 1 else NOISE_SIZE)
    out = [item for piece in pieces(data, read) for item in decoder.feed(piece)]
    assert not any(isinstance(item, Frame) for item in out)  # the seed holds no good frame
    out += decoder.feed(encode_frame(7, MsgType.DEAL_END))
    *problems, last = out
    assert last == Frame(7, MsgType.DEAL_END, b"")
    assert problems and all(isinstance(p, FrameProblem) for p in problems)
    assert sum(p.discarded for p in problems if isinstance(p, FrameProblem)) == len(data)
    assert not decoder.pending


@pytest.mark.parametrize("codec_class", list(CODECS), ids=lambda c: c.__name__)
def test_200_kb_of_noise_then_a_frame_reports_the_bytes_then_the_frame(
    codec_class: type[ReferenceCodec],
) -> None:
    """The audit's finding: 200 KB of noise before the device's first good frame gave nothing."""
    message, expected = CODECS[codec_class]
    codec = codec_class("dev")
    data = noise()
    events = [event for piece in pieces(data, SERIAL_READ) for event in codec.feed(piece)]
    events += codec.feed(FrameEncoder().encode(*message))
    *reported, last = events
    assert isinstance(last, expected)
    assert reported, "the noise gave no event"
    assert all(isinstance(e, FrameError) and e.error in DISCARDING for e in reported), reported
    assert sum(e.discarded for e in reported if isinstance(e, FrameError)) == NOISE_SIZE
    assert any(str(e.discarded) in e.detail for e in reported if isinstance(e, FrameError))
    assert codec.frames == 1 and not codec.pending


def test_an_oversize_frame_counts_the_bytes_it_skipped() -> None:
    decoder = FrameDecoder()
    junk = bytes((STX, 0x41)) + b"\xff" * 30  # LEN 65, then no STX for 30 bytes
    out = decoder.feed(junk + encode_frame(0, MsgType.DEAL_END))
    assert out[0] == FrameProblem("oversize", "LEN 65 is over 64: 32 bytes discarded", junk, 32)
    assert out[1] == Frame(0, MsgType.DEAL_END, b"")


def test_a_long_run_of_noise_is_counted_not_kept() -> None:
    decoder = FrameDecoder()
    [problem] = decoder.feed(b"\xff" * 100_000)
    assert isinstance(problem, FrameProblem) and problem.error == "garbled"
    assert problem.discarded == 100_000 and problem.raw == b"\xff" * RAW_HEX_LIMIT
    assert decoder.held == 0


# --- properties: arbitrary streams -------------------------------------------------------------

_parts = st.one_of(
    st.binary(max_size=300),  # anything
    st.builds(
        encode_frame, st.integers(0, 255), st.integers(0, 255), st.binary(max_size=MAX_PAYLOAD)
    ),  # good frames
    st.binary(max_size=MAX_FRAME).map(lambda b: bytes((STX,)) + b),  # frame-like starts
    st.sampled_from([b"\x02", b"\x02\xff", b"\x02\x40", b"\x02\x00", b"\x02\x00\x02"]),
)
_streams = st.lists(_parts, max_size=40).map(b"".join)
_cuts = st.lists(st.integers(1, 600), min_size=1, max_size=30)


def _chunks(data: bytes, cuts: list[int]) -> Iterator[bytes]:
    at = 0
    i = 0
    while at < len(data):
        size = cuts[i % len(cuts)]
        yield data[at : at + size]
        at += size
        i += 1


def _decode(data: bytes, cuts: list[int]) -> list[Frame | FrameProblem]:
    decoder = FrameDecoder()
    out: list[Frame | FrameProblem] = []
    for chunk in _chunks(data, cuts):
        out += decoder.feed(chunk)
        assert decoder.held <= HELD_BOUND
    out += decoder.flush()
    assert decoder.held == 0 and not decoder.pending
    return out


@settings(max_examples=500, deadline=None, database=None)
@given(data=_streams, cuts=_cuts)
def test_framing_accounts_for_every_byte_fed(data: bytes, cuts: list[int]) -> None:
    """Bytes in good frames plus bytes reported discarded are exactly the bytes fed."""
    out = _decode(data, cuts)
    framed = sum(len(f.payload) + OVERHEAD for f in out if isinstance(f, Frame))
    problems = [p for p in out if isinstance(p, FrameProblem)]
    assert framed + sum(p.discarded for p in problems) == len(data)
    for p in problems:
        assert p.discarded > 0 and 0 < len(p.raw) <= p.discarded
        assert len(p.raw) <= max(RAW_HEX_LIMIT, MAX_FRAME)


@settings(max_examples=300, deadline=None, database=None)
@given(data=_streams, cuts=_cuts)
def test_codecs_never_raise_and_report_every_discarded_byte(data: bytes, cuts: list[int]) -> None:
    """Whatever arrives, in whatever pieces: no exception, no internal error, and the codec's
    FrameErrors count exactly the bytes that were in no good frame."""
    out = _decode(data, cuts)
    not_framed = len(data) - sum(len(f.payload) + OVERHEAD for f in out if isinstance(f, Frame))
    for codec_class in CODECS:
        codec = codec_class("fuzzed")
        events = [e for chunk in _chunks(data, cuts) for e in codec.feed(chunk)] + codec.flush()
        errors = [e for e in events if isinstance(e, FrameError)]
        assert not any(e.detail.startswith("internal codec error") for e in errors)
        assert sum(e.discarded for e in errors) == not_framed
        assert all(e.error in DISCARDING for e in errors if e.discarded)
        assert not codec.pending


# --- memory: 5 MB of noise --------------------------------------------------------------------

FIVE_MB = 5 * 1024 * 1024


@pytest.mark.parametrize("codec_class", list(CODECS), ids=lambda c: c.__name__)
def test_5_mb_of_noise_costs_bounded_memory_and_is_all_reported(
    codec_class: type[ReferenceCodec],
) -> None:
    rng = random.Random(NOISE_SEED)
    codec = codec_class("dev")
    discarded = 0
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        for _ in range(FIVE_MB // 4096):
            for event in codec.feed(rng.randbytes(4096)):
                assert isinstance(event, FrameError)
                discarded += event.discarded
        for event in codec.flush():
            assert isinstance(event, FrameError)
            discarded += event.discarded
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert discarded == FIVE_MB
    assert peak - base < 256 * 1024, f"{peak - base} bytes at the peak for 5 MB of noise"


@pytest.mark.parametrize(
    "pattern",
    [b"\xff", b"\x02\xff", b"\x02\x40", b"\x02\x00", b"\x02\x00\x02\x00\x00"],
    ids=["no-stx", "oversize", "longest-wait", "empty-frames", "nested-starts"],
)
def test_the_worst_noise_patterns_hold_no_more_than_a_few_frames(pattern: bytes) -> None:
    """Repeated, each of these keeps the decoder waiting or skipping as long as it can."""
    decoder = FrameDecoder()
    fed = accounted = 0
    for _ in range(64):  # 256 KB
        chunk = (pattern * (4096 // len(pattern) + 1))[:4096]
        fed += len(chunk)
        for item in decoder.feed(chunk):
            accounted += _size(item)
        assert decoder.held <= HELD_BOUND
    accounted += sum(_size(item) for item in decoder.flush())
    assert accounted == fed


def _size(item: Frame | FrameProblem) -> int:
    return len(item.payload) + OVERHEAD if isinstance(item, Frame) else item.discarded


# --- the dice reader: each transfer is a report -------------------------------------------------


def test_dice_reports_that_are_not_reports_count_their_bytes() -> None:
    codec = DiceHidCodec("dice")
    good = encode_roll(1, (2, 3, 3))
    bad_crc = good[:7] + bytes((good[7] ^ 0xFF,))
    errors = [e for report in (good[:5], good + b"\x00", bad_crc) for e in codec.decode(report)]
    assert [(e.error, e.discarded) for e in errors if isinstance(e, FrameError)] == [
        ("truncated", 5),
        ("oversize", 9),
        ("checksum", 8),
    ]
    [roll] = codec.decode(good)
    assert isinstance(roll, PositionDrawn)


# --- the real serial driver on a pty: noise before the device's first frame --------------------


async def test_noise_before_the_first_frame_on_a_pty_is_reported_then_online(
    tmp_path: Path, events: Events
) -> None:
    """A device that sends 200 KB of noise before its first good frame (a wrong baud rate, a
    babbling power-up): FrameErrors counting every byte, then DeviceOnline, then the frame."""
    port = PtyPort(tmp_path / "paigow-shuffler")
    greeted = asyncio.Event()
    port.set_receiver(lambda data: greeted.set())  # a device that does not answer the greeting
    async with opened(port):
        device = ShufflerDevice("shuffler", SerialTransport(port.path), backoff=FAST_BACKOFF)
        async with running(device, events):
            await asyncio.wait_for(greeted.wait(), 5)  # the driver has the port open
            for piece in pieces(noise(), 4096):
                assert await port.write(piece)
            encoder = FrameEncoder()
            assert await port.write(encoder.encode(*msg_deal_start("after-noise")))
            seen = await events.until("deal_started", timeout=15)
    *reported, online, started = seen
    assert isinstance(online, DeviceOnline)
    assert started == DealStarted(device="shuffler", shuffle_id="after-noise")
    assert reported and all(isinstance(e, FrameError) for e in reported), reported[:3]
    assert sum(e.discarded for e in reported if isinstance(e, FrameError)) == NOISE_SIZE


@contextlib.asynccontextmanager
async def opened(port: PtyPort) -> AsyncIterator[PtyPort]:
    await port.open()
    try:
        yield port
    finally:
        await port.close()


async def test_a_link_that_drops_after_noise_reports_it(events: Events) -> None:
    """Noise and then the link gone, no good frame ever: the noise is reported, then offline."""
    link = QueueLink()
    device = ShufflerDevice("shuffler", HandTransport([link]), backoff=FAST_BACKOFF)
    async with running(device, events):
        link.incoming.put_nowait(b"\x99" * 100)  # under MAX_JUNK: held until the link goes
        link.incoming.put_nowait(None)
        seen = await events.until("device_offline")
    error, offline = seen
    assert isinstance(error, FrameError) and error.error == "garbled" and error.discarded == 100
    assert "no valid frame" in getattr(offline, "reason", "")


# --- the pole display: it sends nothing, so what arrives is noise -------------------------------


async def test_bytes_from_the_pole_display_are_reported_not_dropped() -> None:
    sent = b"\x13\x11" + noise(10_000)

    async def display(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1)  # the driver's first write
        writer.write(sent)
        await writer.drain()
        await reader.read()  # until the driver goes

    server = await asyncio.start_server(display, "127.0.0.1", 0)
    number = server.sockets[0].getsockname()[1]
    async with server:
        pole = SerialPoleDisplay(port=f"socket://127.0.0.1:{number}", backoff=FAST_BACKOFF)
        events = Events()
        async with running(pole, events):
            await events.expect(DeviceOnline)
            discarded = 0
            async with asyncio.timeout(5):
                while discarded < len(sent):
                    error = await events.expect(FrameError)
                    assert error.device == "pole" and error.error == "garbled"
                    discarded += error.discarded
    assert discarded == len(sent)
    assert not [e for e in events.pending() if isinstance(e, FrameError)]
