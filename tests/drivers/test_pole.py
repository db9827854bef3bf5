"""The pole display: codec and format_pole, and the driver writing to a real pty."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drivers.base import Backoff
from drivers.codecs.pole import (
    INIT,
    PoleResult,
    PoleScreen,
    display_lines,
    display_text,
    encode_frame,
    format_pole,
)
from drivers.events import DeviceEvent, DeviceOffline, DeviceOnline
from drivers.pole import SerialPoleDisplay
from simulators.pole import PoleDisplaySimulator

FAST = Backoff(initial=0.02, factor=2.0, cap=0.2, jitter=0.0)
WAIT = 2.0
ROOT = Path(__file__).resolve().parents[2]
TOP_LEFT = b"\x1f\x24\x01\x01"  # US $ 1 1 starts every frame


async def expect(events: asyncio.Queue[DeviceEvent], kind: type[Any]) -> Any:
    event = await asyncio.wait_for(events.get(), WAIT)
    assert isinstance(event, kind), f"expected {kind.__name__}, got {event!r}"
    return event


# -- text and bytes ------------------------------------------------------------------------------


def test_display_text_pads_cuts_and_maps() -> None:
    assert display_text("As Ks") == "As Ks" + " " * 15
    assert display_text("X" * 30) == "X" * 20
    assert display_text("A♠ K♥ Q♦ J♣") == "As Kh Qd Jc".ljust(20)
    assert display_text("Café – Señor “Big”") == 'Cafe - Senor "Big"  '
    assert display_text("\x1b@\x0c\x1f$\x01\x01\ttab\n") == " @  $   tab ".ljust(20)
    assert display_text("龍🂡") == "??".ljust(20)
    assert display_text("ＦＵＬＬ") == "FULL".ljust(20)
    assert display_lines(["only one"]) == ("only one".ljust(20), " " * 20)
    assert display_lines(["a", "b", "c"]) == ("a".ljust(20), "b".ljust(20))


def test_frame_bytes() -> None:
    assert INIT == b"\x1b\x40\x1f\x01\x0c"
    frame = encode_frame(["TOP", "BOTTOM"])
    assert frame == (
        b"\x1f\x24\x01\x01" + b"TOP".ljust(20) + b"\x1f\x24\x01\x02" + b"BOTTOM".ljust(20)
    )


def test_screen_decodes_frames_fed_in_any_pieces() -> None:
    data = INIT + encode_frame(["FRONT As Ks    2P-77", "BACK  Qh Qd 9c 9s 4d"])
    whole = PoleScreen()
    whole.feed(data)
    assert whole.lines == ("FRONT As Ks    2P-77", "BACK  Qh Qd 9c 9s 4d")
    bytewise = PoleScreen()
    for byte in data:
        bytewise.feed(bytes((byte,)))
    assert bytewise.lines == whole.lines
    assert whole.errors == bytewise.errors == 0


def test_screen_other_commands() -> None:
    screen = PoleScreen()
    screen.feed(b"HELLO\x0c")  # CLR
    assert screen.lines == (" " * 20, " " * 20)
    screen.feed(b"\x1bR\x00\x1ft\x00\x1fC\x00AB\x0b\x43")  # ESC R 0, ignored US t, US C 0, HOM
    assert screen.lines[0].startswith("CB")
    assert screen.errors == 2  # US t is not a display command, so its 0x00 is a stray byte
    screen.feed(b"\x1f\x02\x1f\x24\x01\x02" + b"x" * 21)  # vertical scroll past the end
    assert screen.lines == ("x" * 20, "x" + " " * 19)
    screen.feed(b"\x1f\x24\x15\x01\xff")  # column 21 is off screen; 0xFF is not ASCII
    assert screen.errors == 4


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(st.text(max_size=40), max_size=3))
def test_any_text_encodes_to_exactly_what_the_screen_shows(lines: list[str]) -> None:
    data = INIT + encode_frame(lines)
    assert all(0x20 <= b <= 0x7E for b in data if b not in (0x1B, 0x1F, 0x0C, 0x01, 0x02, 0x24))
    screen = PoleScreen()
    screen.feed(data)
    assert screen.lines == display_lines(lines)
    assert screen.errors == 0
    assert all(len(line) == 20 for line in screen.lines)


# -- format_pole ---------------------------------------------------------------------------------


def test_format_pole_dealer_setting() -> None:
    result = PoleResult.dealer_setting(("As", "Ks"), ("Qh", "Qd", "9c", "9s", "4d"), "2P-77")
    assert format_pole(result) == ("FRONT As Ks    2P-77", "BACK  Qh Qd 9c 9s 4d")
    long_rule = PoleResult.dealer_setting(
        ("7h", "7d"), ("Jc", "Js", "Jh", "Jd", "2c"), "4K-JK-PAIR"
    )
    assert format_pole(long_rule) == ("F 7h 7d   4K-JK-PAIR", "BACK  Jc Js Jh Jd 2c")
    unicode_cards = PoleResult.dealer_setting(("A♠", "JK"), ("K♥", "K♦", "5♣", "5♠", "3♥"))
    assert format_pole(unicode_cards) == ("FRONT As JK".ljust(20), "BACK  Kh Kd 5c 5s 3h")


def test_format_pole_banners() -> None:
    assert format_pole(PoleResult.message("ALL HANDS DEAD")) == (
        "   ALL HANDS DEAD   ",
        " " * 20,
    )
    assert format_pole(PoleResult.message("DEALER 2 JACKS", "SIDE BET PAYS")) == (
        "   DEALER 2 JACKS   ",
        "   SIDE BET PAYS    ",
    )
    wrapped = format_pole(PoleResult.message("ALL HANDS DEAD - PACKET OF SIX CARDS"))
    assert wrapped == ("ALL HANDS DEAD -".center(20), "PACKET OF SIX CARDS".center(20))
    banner_wins = PoleResult(front=("As", "Ks"), banner="MISDEAL")
    assert format_pole(banner_wins)[0].strip() == "MISDEAL"


@settings(max_examples=200, deadline=None, database=None)
@given(
    st.lists(st.text(max_size=4), max_size=3),
    st.lists(st.text(max_size=4), max_size=6),
    st.none() | st.text(max_size=25),
    st.none() | st.text(max_size=50),
    st.text(max_size=30),
)
def test_format_pole_always_two_safe_lines(
    front: list[str], back: list[str], rule: str | None, banner: str | None, detail: str
) -> None:
    lines = format_pole(
        PoleResult(front=tuple(front), back=tuple(back), rule=rule, banner=banner, detail=detail)
    )
    assert len(lines) == 2
    assert all(len(line) == 20 and all(" " <= c <= "~" for c in line) for line in lines)


# -- the driver on a real pty --------------------------------------------------------------------


class Rig:
    def __init__(
        self, sim: PoleDisplaySimulator, pole: SerialPoleDisplay, events: asyncio.Queue[DeviceEvent]
    ) -> None:
        self.sim = sim
        self.pole = pole
        self.events = events


async def _run(sim: PoleDisplaySimulator, port: str) -> AsyncIterator[Rig]:
    pole = SerialPoleDisplay(name="pole", port=port, backoff=FAST, write_timeout=1.0)
    events: asyncio.Queue[DeviceEvent] = asyncio.Queue()
    task = asyncio.create_task(pole.run(events), name="test.pole")
    try:
        yield Rig(sim, pole, events)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, WAIT)


@pytest.fixture
async def rig(tmp_path: Path) -> AsyncIterator[Rig]:
    async with PoleDisplaySimulator(link=tmp_path / "pole") as sim:
        async for started in _run(sim, str(tmp_path / "pole")):
            await expect(started.events, DeviceOnline)
            yield started


async def test_pole_shows_exactly_two_lines(rig: Rig) -> None:
    await rig.pole.show(["FRONT As Ks    2P-77", "BACK  Qh Qd 9c 9s 4d"])
    await rig.sim.wait_for_lines(["FRONT As Ks    2P-77", "BACK  Qh Qd 9c 9s 4d"])
    await rig.pole.show(format_pole(PoleResult.message("ALL HANDS DEAD")))
    assert await rig.sim.wait_for_lines(["   ALL HANDS DEAD", ""]) == (
        "   ALL HANDS DEAD   ",
        " " * 20,
    )
    assert rig.sim.received.startswith(INIT)
    assert rig.sim.screen.errors == 0


async def test_long_and_unicode_text_is_cut_and_mapped(rig: Rig) -> None:
    await rig.pole.show(["Dealer: A♠ K♥ — “QUEENS” over sixes", "\x1b@ injected\x0c ✓ 龍"])
    shown = await rig.sim.wait_for(lambda lines: lines[0].startswith("Dealer"))
    assert shown == ('Dealer: As Kh - "QUE', " @ injected  ? ?    ")
    assert all(b < 0x80 for b in rig.sim.received)
    assert rig.sim.screen.errors == 0


async def test_latest_text_wins(rig: Rig) -> None:
    for n in range(50):
        await rig.pole.show([f"frame {n}", "stale"])
    await rig.pole.show(["the last one", "wins"])
    await rig.sim.wait_for_lines(["the last one", "wins"])
    assert not any(line[0].startswith("frame") for line in rig.sim.history)
    assert rig.sim.received.count(TOP_LEFT) == 1  # one frame: the fifty before it were dropped
    await rig.pole.show(["the last one", "wins"])  # the same text again: nothing to write
    await rig.pole.show(["next", ""])
    await rig.sim.wait_for_lines(["next", ""])
    assert rig.sim.received.count(TOP_LEFT) == 2


async def test_port_gone_and_back_redraws_the_latest_text(rig: Rig) -> None:
    await rig.pole.show(["before", "unplug"])
    await rig.sim.wait_for_lines(["before", "unplug"])
    await rig.sim.unplug()
    await expect(rig.events, DeviceOffline)
    await rig.pole.show(["while", "away"])
    await rig.pole.show(["shown after", "replug"])
    loop = asyncio.get_running_loop()
    replugged_at = loop.time()
    await rig.sim.replug()
    await expect(rig.events, DeviceOnline)
    await rig.sim.wait_for_lines(["shown after", "replug"])
    assert loop.time() - replugged_at < WAIT
    assert ("while".ljust(20), "away".ljust(20)) not in rig.sim.history


async def test_port_absent_at_start(tmp_path: Path) -> None:
    sim = PoleDisplaySimulator(link=tmp_path / "pole")
    async for started in _run(sim, str(tmp_path / "pole")):
        offline = await expect(started.events, DeviceOffline)
        assert "pole" in offline.reason
        await started.pole.show(["waiting", "for the port"])
        async with sim:
            await expect(started.events, DeviceOnline)
            await sim.wait_for_lines(["waiting", "for the port"])


async def test_pole_behind_a_serial_device_server() -> None:
    screen = PoleScreen()
    fed = asyncio.Event()

    async def display(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(256):
            screen.feed(data)
            fed.set()
        writer.close()

    server = await asyncio.start_server(display, "127.0.0.1", 0)
    address = server.sockets[0].getsockname()
    async with server:
        pole = SerialPoleDisplay(port=f"socket://127.0.0.1:{address[1]}", backoff=FAST)
        events: asyncio.Queue[DeviceEvent] = asyncio.Queue()
        task = asyncio.create_task(pole.run(events))
        await expect(events, DeviceOnline)
        await pole.show(["over TCP", "ser2net style"])
        async with asyncio.timeout(WAIT):
            while screen.lines != ("over TCP".ljust(20), "ser2net style".ljust(20)):
                fed.clear()
                await fed.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_simulator_main_prints_its_pty_and_the_screen() -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "simulators",
        "pole",
        "--pty",
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    try:
        path = (await asyncio.wait_for(proc.stdout.readline(), 10)).decode().strip()
        assert path.startswith("/dev/")
        events: asyncio.Queue[DeviceEvent] = asyncio.Queue()
        pole = SerialPoleDisplay(port=path, backoff=FAST)
        task = asyncio.create_task(pole.run(events))
        await pole.show(format_pole(PoleResult.message("DEALER 2 JACKS")))
        seen: list[str] = []
        async with asyncio.timeout(5):
            while "|   DEALER 2 JACKS   |" not in seen:
                seen.append((await proc.stdout.readline()).decode().rstrip("\n"))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 5) == 0
