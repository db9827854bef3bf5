"""Every reference codec round-trips with its simulator; the fault plans; the dispatcher."""

from __future__ import annotations

import pytest

from drivers.codecs.rng import ReferenceRngCodec
from drivers.codecs.shoe import ReferenceShoeCodec
from drivers.codecs.shuffler import ReferenceShufflerCodec
from drivers.events import (
    CardDealt,
    DealEnded,
    DealStarted,
    FrameError,
    PacketDealt,
    PositionDrawn,
    StubVerified,
)
from simulators import __main__ as dispatcher
from simulators.faults import FAULTS, Fault, parse_faults
from simulators.pty import PtyPort
from simulators.rng import RngSimulator
from simulators.shoe import ShoeSimulator
from simulators.shuffler import ShufflerSimulator
from tests.drivers.conftest import ALL_CARDS, MemoryPort


async def test_shuffler_round_trip() -> None:
    port = MemoryPort()
    sim = ShufflerSimulator(port, seed=7)
    codec = ReferenceShufflerCodec("shuffler")
    for _ in range(3):
        plan = await sim.deal()
        out = codec.feed(port.take())
        assert out[0] == DealStarted(device="shuffler", shuffle_id=plan.shuffle_id)
        packets = [e for e in out if isinstance(e, PacketDealt)]
        assert [p.index for p in packets] == list(range(7))
        assert all(len(p.cards) == 7 for p in packets)
        [stub] = [e for e in out if isinstance(e, StubVerified)]
        dealt = [c for p in packets for c in p.cards] + list(stub.cards)
        assert len(dealt) == 53 and set(dealt) == ALL_CARDS
        assert out[-1] == DealEnded(device="shuffler")
        assert len(out) == 10


async def test_shuffles_are_seeded() -> None:
    first = await ShufflerSimulator(MemoryPort(), seed=3).deal()
    again = await ShufflerSimulator(MemoryPort(), seed=3).deal()
    other = await ShufflerSimulator(MemoryPort(), seed=4).deal()
    assert first.packets == again.packets and first.packets != other.packets


async def test_shoe_round_trip() -> None:
    port = MemoryPort()
    sim = ShoeSimulator(port, seed=11)
    codec = ReferenceShoeCodec("shoe")
    for _ in range(2):
        plan = await sim.deal()
        out = codec.feed(port.take())
        assert out[0] == DealStarted(device="shoe", shuffle_id=plan.shuffle_id)
        cards = [e.card for e in out if isinstance(e, CardDealt)]
        assert len(cards) == 49
        [stub] = [e for e in out if isinstance(e, StubVerified)]
        assert set(cards) | set(stub.cards) == ALL_CARDS
        assert out[-1] == DealEnded(device="shoe")


async def test_rng_round_trip() -> None:
    port = MemoryPort()
    sim = RngSimulator(port, seed=5)
    codec = ReferenceRngCodec("rng")
    numbers = [await sim.press() for _ in range(50)] + [await sim.press(4)]
    out = codec.feed(port.take())
    assert out == [PositionDrawn(device="rng", method="rng", number=n) for n in numbers]
    assert set(numbers) == set(range(1, 8))


async def test_rng_line_faults() -> None:
    port = MemoryPort()
    sim = RngSimulator(port, seed=5)
    codec = ReferenceRngCodec("rng")
    await sim.press(3, faults="garbled_bytes")
    await sim.press(5, faults="checksum_error")
    await sim.press(6)
    out = codec.feed(port.take())
    assert [type(e).__name__ for e in out] == [
        "FrameError",
        "PositionDrawn",
        "FrameError",
        "FrameError",
        "PositionDrawn",
    ]
    assert [e.error for e in out if isinstance(e, FrameError)] == [
        "garbled",
        "checksum",
        "sequence",
    ]
    with pytest.raises(ValueError, match="no card faults"):
        await sim.press(faults="eight_cards")


async def test_a_simulator_opens_its_own_pty_by_default() -> None:
    async with ShufflerSimulator(seed=1) as sim:
        assert isinstance(sim.port, PtyPort) and sim.port.is_open
        assert sim.port.path.startswith("/dev/pts/")
        plan = await sim.deal()  # nobody listens: the pty keeps the bytes
        assert len(plan.cards) == 49
    assert not sim.port.is_open


def test_fault_names() -> None:
    assert parse_faults("short_packet, eight_cards") == {Fault.SHORT_PACKET, Fault.EIGHT_CARDS}
    assert len(FAULTS) == 10
    with pytest.raises(ValueError, match="unknown fault 'jam'"):
        parse_faults(["jam"])


def test_dispatcher(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert dispatcher.main([]) == 2
    assert "devices: shuffler, shoe, rng, dice, pole" in capsys.readouterr().out
    assert dispatcher.main(["toaster"]) == 2
    assert "unknown device 'toaster'" in capsys.readouterr().err
    monkeypatch.setitem(dispatcher.DEVICES, "abacus", "simulators.no_such_module")
    assert dispatcher.main(["abacus", "--pty"]) == 2
    assert "the abacus simulator is not available" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        dispatcher.main(["shuffler", "--help"])
    assert exit_info.value.code == 0
    assert "--faults" in capsys.readouterr().out
