"""The reference framing and codecs, byte by byte (docs/protocols.md)."""

from __future__ import annotations

import pytest

from drivers.codecs.rng import ReferenceRngCodec, msg_draw
from drivers.codecs.shoe import ReferenceShoeCodec, msg_card
from drivers.codecs.shuffler import ReferenceShufflerCodec, msg_packet
from drivers.events import (
    CardDealt,
    DealEnded,
    DealStarted,
    DeviceFault,
    FrameError,
    PacketDealt,
    PositionDrawn,
    StubVerified,
)
from drivers.framing import (
    MAX_PAYLOAD,
    RAW_HEX_LIMIT,
    DeviceState,
    FaultCode,
    Frame,
    FrameDecoder,
    FrameEncoder,
    FrameProblem,
    MsgType,
    crc16_ccitt,
    encode_frame,
    msg_deal_end,
    msg_deal_start,
    msg_fault,
    msg_status,
    msg_stub,
)

PACKET_0 = [51, 47, 52, 0, 1, 2, 12]  # As Ks JK 2c 2d 2h 5c


def frames(*messages: tuple[MsgType, bytes], first_seq: int = 0) -> bytes:
    encoder = FrameEncoder(first_seq)
    return b"".join(encoder.encode(*message) for message in messages)


def _crc_bitwise(data: bytes) -> int:
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def test_crc_check_value_and_worked_example() -> None:
    assert crc16_ccitt(b"123456789") == 0x29B1
    for data in (b"", b"\x00", b"\xff" * 70, bytes(range(256))):
        assert crc16_ccitt(data) == _crc_bitwise(data)
    # docs/protocols.md "Worked example": PACKET index 0, seq 5
    frame = encode_frame(5, MsgType.PACKET, bytes([0, *PACKET_0]))
    assert frame.hex(" ") == "02 08 05 21 00 33 2f 34 00 01 02 0c 9c 1c"
    assert crc16_ccitt(frame[1:-2]) == 0x9C1C
    # docs/protocols.md: the host's greeting, and a DEAL_END
    assert encode_frame(0, MsgType.STATUS_REQUEST).hex(" ") == "02 00 00 01 dc bd"
    assert encode_frame(9, MsgType.DEAL_END).hex(" ") == "02 00 09 23 62 05"


def test_decoder_takes_frames_a_byte_at_a_time() -> None:
    stream = frames(msg_deal_start("s-1"), msg_packet(0, PACKET_0), msg_deal_end())
    decoder = FrameDecoder()
    out = [item for byte in stream for item in decoder.feed(bytes([byte]))]
    assert out == [
        Frame(0, MsgType.DEAL_START, b"s-1"),
        Frame(1, MsgType.PACKET, bytes([0, *PACKET_0])),
        Frame(2, MsgType.DEAL_END, b""),
    ]
    assert not decoder.pending


@pytest.mark.parametrize(
    ("damage", "error"),
    [
        (lambda f: f[:6] + bytes([f[6] ^ 1]) + f[7:], "checksum"),
        (lambda f: f[:-1], "truncated"),
        (lambda f: b"\x02\x41" + f[2:], "oversize"),
        (lambda f: b"\x99\x98\x97" + f, "garbled"),
    ],
    ids=["checksum", "truncated", "oversize", "garbled"],
)
def test_decoder_rejects_and_resynchronises(damage: object, error: str) -> None:
    good = encode_frame(1, MsgType.PACKET, bytes([0, *PACKET_0]))
    after = encode_frame(2, MsgType.DEAL_END)
    decoder = FrameDecoder()
    assert callable(damage)
    out = decoder.feed(damage(good) + after) + decoder.flush()
    problems = [item for item in out if isinstance(item, FrameProblem)]
    assert problems and problems[0].error == error
    assert out[-1] == Frame(2, MsgType.DEAL_END, b"")


def test_decoder_waits_for_the_rest_of_a_frame_then_flush_calls_it_truncated() -> None:
    frame = encode_frame(0, MsgType.PACKET, bytes([0, *PACKET_0]))
    decoder = FrameDecoder()
    assert decoder.feed(frame[:5]) == []
    assert decoder.pending
    [problem] = decoder.flush()
    assert isinstance(problem, FrameProblem) and problem.error == "truncated"
    assert problem.raw == frame[:5]
    assert not decoder.pending


def test_endless_noise_is_reported_as_it_comes() -> None:
    decoder = FrameDecoder()
    out = [item for _ in range(100) for item in decoder.feed(b"\xff" * 100)]
    assert len(out) == 33  # every 300 bytes (256 or more held), not at the end
    out += decoder.flush()
    assert all(isinstance(p, FrameProblem) and p.error == "garbled" for p in out)
    assert sum(p.discarded for p in out if isinstance(p, FrameProblem)) == 10_000
    assert all(len(p.raw) <= RAW_HEX_LIMIT for p in out if isinstance(p, FrameProblem))


def test_oversize_limit() -> None:
    assert len(encode_frame(0, MsgType.STUB, bytes(MAX_PAYLOAD))) == MAX_PAYLOAD + 6
    with pytest.raises(ValueError, match="over the limit"):
        encode_frame(0, MsgType.STUB, bytes(MAX_PAYLOAD + 1))


def test_shuffler_codec_deal() -> None:
    codec = ReferenceShufflerCodec("shuffler")
    stream = frames(
        msg_deal_start("abc-1"), msg_packet(0, PACKET_0), msg_stub([3, 4, 5, 6]), msg_deal_end()
    )
    assert codec.feed(stream) == [
        DealStarted(device="shuffler", shuffle_id="abc-1"),
        PacketDealt(device="shuffler", index=0, cards=("As", "Ks", "JK", "2c", "2d", "2h", "5c")),
        StubVerified(device="shuffler", cards=("2s", "3c", "3d", "3h")),
        DealEnded(device="shuffler"),
    ]


def test_unknown_card_is_an_error_and_a_foreign_card_in_the_packet() -> None:
    codec = ReferenceShufflerCodec("shuffler")
    out = codec.feed(frames(msg_packet(2, [0, 0x7F, 5])))
    assert isinstance(out[0], FrameError) and out[0].error == "unknown_card"
    assert "0x7f" in out[0].detail
    assert out[1] == PacketDealt(device="shuffler", index=2, cards=("2c", "?7f", "3d"))


def test_sequence_gap_is_reported_and_the_frame_still_used() -> None:
    codec = ReferenceShufflerCodec("shuffler")
    encoder = FrameEncoder(250)
    first = encoder.encode(*msg_deal_start("x"))
    encoder.seq = 2  # 251 … 1 lost, across the wrap
    second = encoder.encode(*msg_deal_end())
    out = codec.feed(first + second)
    assert isinstance(out[1], FrameError) and out[1].error == "sequence"
    assert "expected seq 251, got 2: 7 frame(s) lost" in out[1].detail
    assert out[2] == DealEnded(device="shuffler")
    [repeat] = codec.feed(second)
    assert isinstance(repeat, FrameError) and repeat.error == "sequence"
    assert repeat.detail == "repeated frame (seq 2) ignored"
    encoder.seq = 2  # the same number, other content: used, and the gap reported
    again = codec.feed(encoder.encode(*msg_deal_start("y")))
    assert isinstance(again[0], FrameError) and "255 frame(s) lost" in again[0].detail
    assert again[1] == DealStarted(device="shuffler", shuffle_id="y")
    codec.reset()
    assert codec.feed(frames(msg_deal_end(), first_seq=77)) == [DealEnded(device="shuffler")]


def test_a_type_another_device_sends_is_unknown_here() -> None:
    out = ReferenceShufflerCodec("shuffler").feed(frames(msg_card(3)))
    assert len(out) == 1 and isinstance(out[0], FrameError) and out[0].error == "unknown_type"


def test_status_and_fault() -> None:
    codec = ReferenceShufflerCodec("shuffler")
    status = msg_status(DeviceState.FAULT, frozenset({FaultCode.JAM, FaultCode.DOOR_OPEN}))
    out = codec.feed(frames(status, msg_fault(FaultCode.CARD_MISREAD, "slot 4"), msg_fault(0x66)))
    assert out == [
        DeviceFault(device="shuffler", code="jam", detail="status fault"),
        DeviceFault(device="shuffler", code="door_open", detail="status fault"),
        DeviceFault(device="shuffler", code="card_misread", detail="slot 4"),
        DeviceFault(device="shuffler", code="fault_66", detail=""),
    ]
    assert codec.feed(frames(msg_status(DeviceState.IDLE), first_seq=3)) == []


def test_bad_payloads_are_garbled() -> None:
    codec = ReferenceShufflerCodec("shuffler")
    out = codec.feed(
        frames((MsgType.PACKET, b""), (MsgType.STATUS, b"\x00"), (MsgType.DEAL_END, b"\x01"))
    )
    assert [e.error for e in out if isinstance(e, FrameError)] == ["garbled"] * 3


def test_shoe_codec_cards() -> None:
    codec = ReferenceShoeCodec("shoe")
    out = codec.feed(frames(msg_card(52), msg_card(200), (MsgType.CARD, b"\x01\x02")))
    assert out[0] == CardDealt(device="shoe", card="JK")
    assert isinstance(out[1], FrameError) and out[1].error == "unknown_card"
    assert out[2] == CardDealt(device="shoe", card="?c8")
    assert isinstance(out[3], FrameError) and out[3].error == "garbled"


def test_rng_codec_draws() -> None:
    codec = ReferenceRngCodec("rng")
    out = codec.feed(frames(msg_draw(1), msg_draw(7), msg_draw(0), msg_draw(8)))
    assert out[:2] == [
        PositionDrawn(device="rng", method="rng", number=1),
        PositionDrawn(device="rng", method="rng", number=7),
    ]
    assert [e.error for e in out[2:] if isinstance(e, FrameError)] == ["garbled", "garbled"]


def test_greeting_is_a_status_request() -> None:
    decoder = FrameDecoder()
    [frame] = decoder.feed(ReferenceRngCodec("rng").greeting())
    assert isinstance(frame, Frame) and frame.type == MsgType.STATUS_REQUEST
