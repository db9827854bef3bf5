"""Framing of the reference device protocol (docs/protocols.md), pure bytes in and out.

A frame is ``STX LEN SEQ TYPE PAYLOAD[LEN] CRC_HI CRC_LO`` with STX = 0x02, LEN = 0–64 and the
CRC-16/CCITT-FALSE of ``LEN SEQ TYPE PAYLOAD`` sent big-endian. ``FrameDecoder`` cuts a byte
stream into frames and problems and resynchronises at the next STX after a bad frame, like
zigpy-znp's ``uart.py``; nothing here raises on any input. Every byte fed ends up in exactly
one good frame or one reported problem (``FrameProblem.discarded``), and the decoder holds at
most a few frames' worth of bytes whatever arrives.
"""

from __future__ import annotations

import binascii
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar, Final, Literal, Protocol

import structlog

from controller.game.cards import DECK
from drivers.events import (
    DealEnded,
    DealStarted,
    DeviceEvent,
    DeviceFault,
    FrameError,
    StubVerified,
    foreign_code,
)

STX: Final = 0x02
MAX_PAYLOAD: Final = 64
HEADER_SIZE: Final = 4  # STX LEN SEQ TYPE
TRAILER_SIZE: Final = 2  # CRC_HI CRC_LO
OVERHEAD: Final = HEADER_SIZE + TRAILER_SIZE
MAX_FRAME: Final = MAX_PAYLOAD + OVERHEAD
RAW_HEX_LIMIT: Final = 64  # bytes of a rejected frame kept in FrameError.raw_hex
MAX_JUNK: Final = 256  # bytes outside a frame counted before they are reported


def crc16_ccitt(data: bytes | bytearray | memoryview, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no final xor.

    ``crc16_ccitt(b"123456789") == 0x29B1`` (the catalogue check value). Pass a previous result
    as ``crc`` to continue over more data. ``binascii.crc_hqx`` is this very CRC, in C.
    """
    return binascii.crc_hqx(data, crc)


class MsgType(IntEnum):
    """Message types of the reference protocol; each device accepts a subset."""

    STATUS_REQUEST = 0x01  # host → device
    STATUS = 0x10
    DEAL_START = 0x20
    PACKET = 0x21
    STUB = 0x22
    DEAL_END = 0x23
    CARD = 0x24
    FAULT = 0x30
    DRAW = 0x40


def encode_frame(seq: int, msg_type: int, payload: bytes = b"", *, check: bool = True) -> bytes:
    """One whole frame. ``check=False`` lets a test build an oversize frame (LEN up to 255)."""
    limit = MAX_PAYLOAD if check else 255
    if len(payload) > limit:
        raise ValueError(f"payload of {len(payload)} bytes is over the limit of {limit}")
    body = bytes((len(payload), seq & 0xFF, msg_type & 0xFF)) + payload
    crc = crc16_ccitt(body)
    return bytes((STX,)) + body + bytes((crc >> 8, crc & 0xFF))


class FrameEncoder:
    """Frames messages with a sequence number that counts 0–255 and wraps."""

    def __init__(self, first_seq: int = 0) -> None:
        self.seq = first_seq & 0xFF

    def encode(self, msg_type: int, payload: bytes = b"") -> bytes:
        frame = encode_frame(self.seq, msg_type, payload)
        self.seq = (self.seq + 1) & 0xFF
        return frame


@dataclass(frozen=True, slots=True)
class Frame:
    """A frame whose checksum was good."""

    seq: int
    type: int
    payload: bytes


FrameProblemKind = Literal["checksum", "oversize", "truncated", "garbled"]


@dataclass(frozen=True, slots=True)
class FrameProblem:
    """Bytes the decoder threw away, and why: ``discarded`` of them, the first of which are
    ``raw`` (all of a rejected frame; at most ``RAW_HEX_LIMIT`` of a run of noise)."""

    error: FrameProblemKind
    detail: str
    raw: bytes
    discarded: int

    @property
    def raw_hex(self) -> str:
        return self.raw[:RAW_HEX_LIMIT].hex()


def _frame_ok(buf: bytearray, start: int) -> bool | None:
    """Whether a good frame starts at ``start``: True, False, or None when it is not all here."""
    if start + 2 > len(buf):
        return None
    length = buf[start + 1]
    if length > MAX_PAYLOAD:
        return False
    end = start + length + OVERHEAD
    if end > len(buf):
        return None
    crc = crc16_ccitt(memoryview(buf)[start + 1 : end - 2])
    return crc == (buf[end - 2] << 8 | buf[end - 1])


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes, get frames and problems, in stream order.

    Resynchronisation (docs/protocols.md "Errors and resynchronisation"): bytes before an STX are
    one ``garbled`` problem; a LEN over 64 is ``oversize``, and the bytes up to the next STX
    belong to it; a frame with a bad CRC is ``truncated`` when a good frame starts at an STX
    inside it (the device was cut off and started again), else ``checksum`` and the whole frame
    is dropped. ``flush`` (the host calls it after an inter-byte timeout) gives up on a partial
    frame.

    Nothing is dropped silently: every byte fed is in one ``Frame`` (``LEN + 6`` bytes) or counted
    in one ``FrameProblem.discarded``, whether or not a good frame came before it. A run of noise
    is counted, not kept (its first ``RAW_HEX_LIMIT`` bytes are, for the report), and reported
    at the next STX, at ``flush``, or at the end of a ``feed`` once ``MAX_JUNK`` bytes or more
    are counted; so a line that sends nothing but noise is reported as it comes and costs no
    memory.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._junk = 0  # bytes of the current run of noise, counted
        self._junk_head = bytearray()  # its first RAW_HEX_LIMIT bytes
        self._junk_error: FrameProblemKind = "garbled"
        self._junk_detail = ""  # set for an oversize run: its LEN

    @property
    def pending(self) -> bool:
        """True while bytes are held that are not yet a frame or a reported problem."""
        return bool(self._buf or self._junk)

    @property
    def held(self) -> int:
        """How many bytes fed are not yet in a frame or a reported problem."""
        return len(self._buf) + self._junk

    def reset(self) -> None:
        self._buf.clear()
        self._junk = 0
        self._junk_head.clear()
        self._junk_error = "garbled"
        self._junk_detail = ""

    def feed(self, data: bytes | bytearray | memoryview) -> list[Frame | FrameProblem]:
        self._buf += data
        return self._drain(final=False)

    def flush(self) -> list[Frame | FrameProblem]:
        """Decide on everything held: complete frames, then a partial one as ``truncated``."""
        out = self._drain(final=True)
        self._report_junk(out)
        if self._buf:
            raw = bytes(self._buf)
            self._buf.clear()
            out.append(
                FrameProblem("truncated", f"partial frame of {len(raw)} bytes", raw, len(raw))
            )
        return out

    def _discard(self, end: int) -> None:
        """Count the first ``end`` bytes held into the current run of noise, and drop them."""
        room = RAW_HEX_LIMIT - len(self._junk_head)
        if room > 0:
            self._junk_head += self._buf[: min(room, end)]
        self._junk += end
        del self._buf[:end]

    def _report_junk(self, out: list[Frame | FrameProblem]) -> None:
        if not self._junk:
            return
        count = self._junk
        if self._junk_error == "oversize":
            detail = f"{self._junk_detail}: {count} bytes discarded"
        else:
            detail = f"{count} bytes outside a frame"
        out.append(FrameProblem(self._junk_error, detail, bytes(self._junk_head), count))
        self._junk = 0
        self._junk_head.clear()
        self._junk_error = "garbled"
        self._junk_detail = ""

    def _drain(self, *, final: bool) -> list[Frame | FrameProblem]:
        out: list[Frame | FrameProblem] = []
        while self._buf:
            if not self._drain_one(out, final=final):
                break
        return out

    def _drain_one(self, out: list[Frame | FrameProblem], *, final: bool) -> bool:
        """Take one frame or problem off the front of the bytes held, into ``out``; False when
        nothing more can be decided until more bytes come."""
        if not self._skip_to_stx(out):
            return False
        buf = self._buf
        if len(buf) < 2:
            return False
        length = buf[1]
        if length > MAX_PAYLOAD:
            # STX LEN and the bytes up to the next STX: one oversize problem, reported
            # with its count when that STX (or the end) comes
            self._junk_error = "oversize"
            self._junk_detail = f"LEN {length} is over {MAX_PAYLOAD}"
            self._discard(2)
            return True
        total = length + OVERHEAD
        if len(buf) < total:
            return self._partial_frame(out, final=final)
        return self._whole_frame(out, total, final=final)

    def _skip_to_stx(self, out: list[Frame | FrameProblem]) -> bool:
        """Discard the noise before the first STX; False when no STX is held."""
        start = self._buf.find(STX)
        if start < 0:
            self._discard(len(self._buf))
            if self._junk >= MAX_JUNK:
                # a line that only ever sends noise is reported now, not at its end
                self._report_junk(out)
            return False
        if start:
            self._discard(start)
        self._report_junk(out)
        return True

    def _partial_frame(self, out: list[Frame | FrameProblem], *, final: bool) -> bool:
        """The frame at the front has not all arrived: wait, or (``final``) cut it short at a
        good frame inside it."""
        if not final:
            return False
        restart = self._good_frame_inside(len(self._buf), final=True)
        if restart is None:
            return False
        out.append(self._cut("truncated", restart, "frame cut short"))
        return True

    def _whole_frame(self, out: list[Frame | FrameProblem], total: int, *, final: bool) -> bool:
        """The ``total`` bytes of the frame at the front have arrived: a frame, or a problem."""
        buf = self._buf
        crc = crc16_ccitt(memoryview(buf)[1 : total - 2])
        if crc == (buf[total - 2] << 8 | buf[total - 1]):
            out.append(Frame(buf[2], buf[3], bytes(buf[HEADER_SIZE : total - 2])))
            del buf[:total]
            return True
        restart = self._good_frame_inside(total, final=final)
        if restart == -1:
            return False
        if restart is not None:
            out.append(self._cut("truncated", restart, "frame cut short"))
        else:
            out.append(self._cut("checksum", total, f"CRC mismatch (computed {crc:04x})"))
        return True

    def _cut(self, error: FrameProblemKind, end: int, detail: str) -> FrameProblem:
        raw = bytes(self._buf[:end])
        del self._buf[:end]
        return FrameProblem(error, detail, raw, len(raw))

    def _good_frame_inside(self, end: int, *, final: bool) -> int | None:
        """Offset of the first STX in ``buf[1:end]`` that starts a good frame.

        None when there is none; -1 when one might, but its bytes have not all arrived yet (and
        ``final`` is false), so the caller waits for more.
        """
        buf = self._buf
        pos = buf.find(STX, 1, end)
        while pos >= 0:
            ok = _frame_ok(buf, pos)
            if ok:
                return pos
            if ok is None and not final:
                return -1
            pos = buf.find(STX, pos + 1, end)
        return None


# --- The reference protocol's messages and the codec base every reference codec shares ---------


class FaultCode(IntEnum):
    """Fault codes of FAULT messages; STATUS carries them as bits (bit n is code n + 1)."""

    JAM = 0x01
    DOOR_OPEN = 0x02
    CARD_MISREAD = 0x03
    CARD_COUNT = 0x04
    EMPTY = 0x05
    HARDWARE = 0x06


FAULT_NAMES: Final[dict[int, str]] = {code: code.name.lower() for code in FaultCode}


class DeviceState(IntEnum):
    """The state byte of a STATUS message."""

    IDLE = 0x00
    SHUFFLING = 0x01
    READY = 0x02
    DEALING = 0x03
    FAULT = 0x04


STATE_NAMES: Final[dict[int, str]] = {state: state.name.lower() for state in DeviceState}
MAX_SHUFFLE_ID: Final = 32
MAX_FAULT_DETAIL: Final = 48

Message = tuple[MsgType, bytes]
"""A message before framing: its type and payload (the device side of the protocol)."""


def fault_name(code: int) -> str:
    return FAULT_NAMES.get(code, f"fault_{code:02x}")


def msg_status_request() -> Message:
    return MsgType.STATUS_REQUEST, b""


def msg_status(state: DeviceState, faults: frozenset[FaultCode] = frozenset()) -> Message:
    flags = 0
    for code in faults:
        flags |= 1 << (code - 1)
    return MsgType.STATUS, bytes((state, flags))


def msg_deal_start(shuffle_id: str) -> Message:
    raw = shuffle_id.encode("ascii", "replace")
    if len(raw) > MAX_SHUFFLE_ID:
        raise ValueError(f"shuffle id {shuffle_id!r} is over {MAX_SHUFFLE_ID} bytes")
    return MsgType.DEAL_START, raw


def msg_stub(codes: bytes | list[int]) -> Message:
    return MsgType.STUB, bytes(codes)


def msg_deal_end() -> Message:
    return MsgType.DEAL_END, b""


def msg_fault(code: int, detail: str = "") -> Message:
    return MsgType.FAULT, bytes((code,)) + detail.encode("ascii", "replace")[:MAX_FAULT_DETAIL]


def card_texts(codes: bytes) -> tuple[tuple[str, ...], list[int]]:
    """Card texts of card code bytes (the code is the Card int, 0–52) and the unknown codes.

    An unknown code travels as ``foreign_code(raw)`` (``"?7f"``) so that the deal check calls it a
    foreign card (docs/rules.md §6).
    """
    texts = []
    unknown = []
    for code in codes:
        if code < len(DECK):
            texts.append(str(DECK[code]))
        else:
            texts.append(foreign_code(code))
            unknown.append(code)
    return tuple(texts), unknown


class Codec(Protocol):
    """Bytes ⇄ typed events for one device; pure, incremental, and never raises."""

    device: str

    @property
    def pending(self) -> bool:
        """True while it holds bytes of a frame not yet complete."""
        ...

    @property
    def frames(self) -> int:
        """Well-formed frames decoded since the last reset: the device is really there."""
        ...

    def feed(self, data: bytes) -> list[DeviceEvent]:
        """Events of the bytes that arrived (possibly none, possibly a part of a frame).

        No byte is dropped silently: bytes in no good frame come out as ``FrameError`` events
        whose ``discarded`` counts them, before the first good frame as after it; and what the
        codec holds between calls stays bounded whatever arrives."""
        ...

    def flush(self) -> list[DeviceEvent]:
        """Give up on what is held (inter-byte timeout or link lost): FrameError events."""
        ...

    def reset(self) -> None:
        """Forget held bytes and the expected sequence number (a new connection)."""
        ...

    def greeting(self) -> bytes:
        """Bytes the host sends when it connects (may be empty)."""
        ...


_log = structlog.get_logger(__name__)


class ReferenceCodec:
    """Host side of the reference protocol: framing, sequence check and the common messages.

    A subclass names the message types its device sends in ``accepts`` and decodes its own
    types in ``_decode``. ``feed`` and ``flush`` never raise: a bug in a decoder becomes a
    ``FrameError(error="garbled", detail="internal codec error …")`` and the codec starts afresh.
    """

    accepts: ClassVar[frozenset[MsgType]] = frozenset({MsgType.STATUS, MsgType.FAULT})

    def __init__(self, device: str) -> None:
        self.device = device
        self._decoder = FrameDecoder()
        self._expect: int | None = None
        self._last: Frame | None = None
        self._host = FrameEncoder()
        self.last_status: tuple[int, int] | None = None
        self._frames = 0

    @property
    def pending(self) -> bool:
        return self._decoder.pending

    @property
    def frames(self) -> int:
        return self._frames

    def feed(self, data: bytes) -> list[DeviceEvent]:
        try:
            return self._events(self._decoder.feed(data))
        except Exception as exc:
            return self._internal_error(exc)

    def flush(self) -> list[DeviceEvent]:
        try:
            return self._events(self._decoder.flush())
        except Exception as exc:
            return self._internal_error(exc)

    def reset(self) -> None:
        self._decoder.reset()
        self._expect = None
        self._last = None
        self._frames = 0

    def greeting(self) -> bytes:
        return self._host.encode(*msg_status_request())

    def _internal_error(self, exc: Exception) -> list[DeviceEvent]:
        _log.error("codec_internal_error", device=self.device, exc_info=exc)
        held = self._decoder.held
        self.reset()
        return [
            FrameError(
                device=self.device,
                error="garbled",
                detail=f"internal codec error: {exc!r}",
                discarded=held,
            )
        ]

    def _events(self, items: list[Frame | FrameProblem]) -> list[DeviceEvent]:
        events: list[DeviceEvent] = []
        for item in items:
            if isinstance(item, FrameProblem):
                events.append(
                    FrameError(
                        device=self.device,
                        error=item.error,
                        detail=item.detail,
                        raw_hex=item.raw_hex,
                        discarded=item.discarded,
                    )
                )
            else:
                events.extend(self._frame(item))
        return events

    def _frame(self, frame: Frame) -> list[DeviceEvent]:
        self._frames += 1
        events: list[DeviceEvent] = []
        if frame == self._last:
            # the same frame twice (an echo or a retransmission): using it would deal twice
            return [self._error(frame, "sequence", f"repeated frame (seq {frame.seq}) ignored")]
        self._last = frame
        if self._expect is not None and frame.seq != self._expect:
            lost = (frame.seq - self._expect) & 0xFF
            detail = f"expected seq {self._expect}, got {frame.seq}: {lost} frame(s) lost"
            events.append(self._error(frame, "sequence", detail))
        self._expect = (frame.seq + 1) & 0xFF
        if frame.type not in self.accepts:
            events.append(self._error(frame, "unknown_type", f"message type 0x{frame.type:02x}"))
            return events
        events.extend(self._decode(MsgType(frame.type), frame))
        return events

    def _error(
        self,
        frame: Frame,
        error: Literal["garbled", "sequence", "unknown_type", "unknown_card"],
        detail: str,
    ) -> FrameError:
        raw = encode_frame(frame.seq, frame.type, frame.payload)
        return FrameError(device=self.device, error=error, detail=detail, raw_hex=raw.hex())

    def _bad_payload(self, frame: Frame, expected: str) -> list[DeviceEvent]:
        name = MsgType(frame.type).name
        shown = frame.payload[:16].hex(" ") or "empty"
        detail = f"{name} payload {shown} ({len(frame.payload)} bytes): expected {expected}"
        return [self._error(frame, "garbled", detail)]

    def _cards(
        self, frame: Frame, codes: bytes, where: str
    ) -> tuple[tuple[str, ...], list[DeviceEvent]]:
        texts, unknown = card_texts(codes)
        errors: list[DeviceEvent] = [
            self._error(frame, "unknown_card", f"{where}: card code 0x{code:02x}")
            for code in unknown
        ]
        return texts, errors

    def _decode(self, msg_type: MsgType, frame: Frame) -> list[DeviceEvent]:
        """Events of one accepted message; a subclass handles its own types, then calls this."""
        payload = frame.payload
        device = self.device
        if msg_type is MsgType.STATUS:
            if len(payload) != 2:
                return self._bad_payload(frame, "2 (state, fault bits)")
            state, flags = payload
            self.last_status = (state, flags)
            state_name = STATE_NAMES.get(state, f"0x{state:02x}")
            return [
                DeviceFault(device=device, code=fault_name(bit + 1), detail=f"status {state_name}")
                for bit in range(8)
                if flags >> bit & 1
            ]
        if msg_type is MsgType.FAULT:
            if not payload:
                return self._bad_payload(frame, "at least 1 (fault code)")
            detail = payload[1:].decode("ascii", "backslashreplace")
            return [DeviceFault(device=device, code=fault_name(payload[0]), detail=detail)]
        if msg_type is MsgType.DEAL_START:
            if len(payload) > MAX_SHUFFLE_ID:
                return self._bad_payload(frame, f"at most {MAX_SHUFFLE_ID} (shuffle id)")
            return [
                DealStarted(device=device, shuffle_id=payload.decode("ascii", "backslashreplace"))
            ]
        if msg_type is MsgType.STUB:
            cards, errors = self._cards(frame, payload, "stub")
            return [*errors, StubVerified(device=device, cards=cards)]
        if msg_type is MsgType.DEAL_END:
            if payload:
                return self._bad_payload(frame, "0")
            return [DealEnded(device=device)]
        return [self._error(frame, "unknown_type", f"{msg_type.name} has no decoder here")]
