"""The USB HID dice reader's input report: pure bytes ⇄ events (docs/protocols-dice-pole.md).

One report is eight bytes on the interrupt IN endpoint::

    0 report id   0x01
    1 sequence    1–255 for events (wraps 255 → 1); 0 only in the power-up status report
    2 status      0x00 idle, 0x01 roll, 0x02 misread, 0x03 hardware fault
    3 die 1       1–6 in a roll, else 0
    4 die 2       1–6 in a roll, else 0
    5 die 3       1–6 in a roll, else 0
    6 detail      vendor fault code in a hardware-fault report, else 0 (ignored by the host)
    7 checksum    CRC-8 (poly 0x07, init 0x00, no reflection, no final xor) of bytes 0–6

The decoder never raises: every report gives a (possibly empty) list of events, a rejected report
gives one ``FrameError``. A report repeating the last event's sequence number is the same event
reported twice and gives nothing. Each transfer is one report, so there is nothing to
resynchronise and nothing held between reports: a report that is not one (too short, too long, a
bad CRC) is reported with its length in ``FrameError.discarded``, from the first transfer on.
"""

from __future__ import annotations

from typing import Final, Literal

import structlog

from drivers.events import DeviceEvent, DeviceFault, FrameError, PositionDrawn

# pid.codes test VID:PID, for in-house testing only: a production reader has its maker's own,
# set in the driver's config (docs/protocols-dice-pole.md "Descriptors").
DEFAULT_VENDOR_ID: Final = 0x1209
DEFAULT_PRODUCT_ID: Final = 0x0001
ENDPOINT_IN: Final = 0x81
REPORT_ID: Final = 0x01
REPORT_SIZE: Final = 8

# HID report descriptor: one vendor-defined input report, id 1, seven data bytes (the id makes 8).
REPORT_DESCRIPTOR: Final = bytes.fromhex(
    "06 00 ff"  # Usage Page (Vendor Defined 0xFF00)
    "09 01"  # Usage (0x01: dice reader)
    "a1 01"  # Collection (Application)
    "85 01"  #   Report ID (1)
    "09 02"  #   Usage (0x02: dice report)
    "15 00"  #   Logical Minimum (0)
    "26 ff 00"  #   Logical Maximum (255)
    "75 08"  #   Report Size (8 bits)
    "95 07"  #   Report Count (7)
    "81 02"  #   Input (Data, Variable, Absolute)
    "c0"  # End Collection
)

STATUS_IDLE: Final = 0x00
STATUS_ROLL: Final = 0x01
STATUS_MISREAD: Final = 0x02
STATUS_HW_FAULT: Final = 0x03

_log = structlog.get_logger(__name__)

_Error = Literal["truncated", "oversize", "checksum", "unknown_type", "garbled", "sequence"]


def _crc8_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = ((crc << 1) ^ 0x07) & 0xFF if crc & 0x80 else (crc << 1) & 0xFF
        table.append(crc)
    return tuple(table)


_CRC8_TABLE: Final = _crc8_table()


def crc8(data: bytes) -> int:
    """CRC-8/SMBUS: poly 0x07, init 0x00, no reflection, no final xor (``b"123456789"`` → 0xF4)."""
    crc = 0
    for byte in data:
        crc = _CRC8_TABLE[crc ^ byte]
    return crc


def position_from_dice(dice: tuple[int, int, int]) -> int:
    """The position the dice name: sum s → ((s − 1) mod 7) + 1, dealer = 1, 8, 15 (docs/rules.md
    §6)."""
    return (sum(dice) - 1) % 7 + 1


def encode_report(
    *,
    seq: int,
    status: int,
    dice: tuple[int, int, int] = (0, 0, 0),
    detail: int = 0,
    report_id: int = REPORT_ID,
) -> bytes:
    """The eight-byte report a device sends (the device side; bytes are not range-checked beyond
    0–255, so a simulator can send out-of-range dice on purpose)."""
    body = bytes((report_id, seq, status, *dice, detail))
    return body + bytes((crc8(body),))


def encode_roll(seq: int, dice: tuple[int, int, int]) -> bytes:
    return encode_report(seq=seq, status=STATUS_ROLL, dice=dice)


class DiceHidCodec:
    """Decodes the dice reader's reports into events for the device named ``device``.

    Holds one piece of state, the sequence number of the last event, so that a report repeated after
    a USB glitch is not a second roll. It survives reconnects on purpose; the device's power-up
    status report (sequence 0) clears it, so a power-cycled reader's first roll counts."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.last_seq: int | None = None

    def decode(self, report: bytes) -> list[DeviceEvent]:
        """The events one report means; never raises."""
        try:
            return self._decode(bytes(report))
        except Exception as exc:  # a codec bug must not take the driver down; say what it was
            _log.exception("dice_decode_bug", device=self.device)
            raw = bytes(report) if isinstance(report, bytes | bytearray | memoryview) else b""
            return [self._error("garbled", f"decoder error: {exc!r}", raw, discarded=True)]

    def _error(
        self, error: _Error, detail: str, report: bytes, *, discarded: bool = False
    ) -> FrameError:
        """``discarded``: the report is not one (its bytes are thrown away), not a good report
        with a bad value."""
        return FrameError(
            device=self.device,
            error=error,
            detail=detail,
            raw_hex=report[:64].hex(),
            discarded=len(report) if discarded else 0,
        )

    def _decode(self, report: bytes) -> list[DeviceEvent]:
        if not report:
            return []  # a zero-length packet carries nothing
        frame_error = self._frame_error(report)
        if frame_error is not None:
            return [frame_error]
        report_id, seq, status, d1, d2, d3, detail_code = report[:7]
        if report_id != REPORT_ID:
            return [self._error("unknown_type", f"report id 0x{report_id:02x}", report)]
        if status == STATUS_IDLE:
            if seq == 0:
                self.last_seq = None  # the reader powered up: its sequence starts again
            return []
        dice = (d1, d2, d3)
        event_error = self._event_error(status, seq, dice, report)
        if event_error is not None:
            return [event_error]
        if not self._advance(seq):
            return []
        return [self._event(status, dice, detail_code)]

    def _frame_error(self, report: bytes) -> FrameError | None:
        """The error for a transfer that is not one report (wrong length, bad CRC), else None."""
        if len(report) < REPORT_SIZE:
            detail = f"{len(report)} bytes, expected 8"
            return self._error("truncated", detail, report, discarded=True)
        if len(report) > REPORT_SIZE:
            detail = f"{len(report)} bytes, expected 8"
            return self._error("oversize", detail, report, discarded=True)
        expected = crc8(report[:7])
        if report[7] != expected:
            detail = f"checksum 0x{report[7]:02x}, computed 0x{expected:02x}"
            return self._error("checksum", detail, report, discarded=True)
        return None

    def _event_error(
        self, status: int, seq: int, dice: tuple[int, int, int], report: bytes
    ) -> FrameError | None:
        """The error for an event report (not the status report) with a bad status, sequence
        number or die, else None."""
        if status not in (STATUS_ROLL, STATUS_MISREAD, STATUS_HW_FAULT):
            return self._error("unknown_type", f"status 0x{status:02x}", report)
        if seq == 0:
            return self._error("sequence", "sequence 0 is reserved for the status report", report)
        if status == STATUS_ROLL and not all(1 <= d <= 6 for d in dice):
            return self._error("garbled", f"die out of range 1-6: {dice}", report)
        return None

    def _advance(self, seq: int) -> bool:
        """Records an event's sequence number; False for a repeat of the last event."""
        if seq == self.last_seq:
            _log.debug("dice_duplicate_report", device=self.device, seq=seq)
            return False
        if self.last_seq is not None and seq != self.last_seq % 255 + 1:
            _log.warning("dice_sequence_gap", device=self.device, last=self.last_seq, seq=seq)
        self.last_seq = seq
        return True

    def _event(self, status: int, dice: tuple[int, int, int], detail_code: int) -> DeviceEvent:
        """The event a valid, new roll / misread / hardware-fault report means."""
        if status == STATUS_ROLL:
            return PositionDrawn(
                device=self.device,
                method="dice",
                dice=dice,
                number=position_from_dice(dice),
            )
        if status == STATUS_MISREAD:
            return DeviceFault(
                device=self.device,
                code="dice_misread",
                detail="a die could not be read (cocked or stacked); roll again",
            )
        return DeviceFault(
            device=self.device,
            code="dice_hardware",
            detail=f"reader fault code 0x{detail_code:02x}",
        )
