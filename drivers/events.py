"""Typed events that drivers put on the table's one event queue (docs/architecture.md "One event
stream").

Every event is a frozen pydantic model with a ``kind`` discriminator, so the journal can store it as
JSON and read it back as the same type (``parse_event``). Cards travel as canonical card text
(``"As"``, ``"JK"``); a card code the codec does not know travels as ``"?"`` followed by the raw
code in hex (``"?7f"``), so the deal check can call it a foreign card (docs/rules.md §6) and the
round can be reconstructed from the journal."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class DeviceEventBase(BaseModel):
    """What every device event has: the config name of the device that produced it."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    device: str = Field(description="config name of the device that produced the event")


class DeviceOnline(DeviceEventBase):
    kind: Literal["device_online"] = "device_online"
    detail: str = ""


class DeviceOffline(DeviceEventBase):
    kind: Literal["device_offline"] = "device_offline"
    reason: str = ""


class DealStarted(DeviceEventBase):
    """A shuffler or shoe begins a new deal (a new deck)."""

    kind: Literal["deal_started"] = "deal_started"
    shuffle_id: str = ""


class PacketDealt(DeviceEventBase):
    """A whole packet from a packet-mode shuffler. ``index`` counts packets of this deal from 0."""

    kind: Literal["packet_dealt"] = "packet_dealt"
    index: int
    cards: tuple[str, ...]


class CardDealt(DeviceEventBase):
    """One card from a card-mode shoe; the controller forms packets of seven."""

    kind: Literal["card_dealt"] = "card_dealt"
    card: str


class StubVerified(DeviceEventBase):
    """The cards left after the deal (four for a whole deck), as the device read them."""

    kind: Literal["stub_verified"] = "stub_verified"
    cards: tuple[str, ...]


class DealEnded(DeviceEventBase):
    kind: Literal["deal_ended"] = "deal_ended"


class PositionDrawn(DeviceEventBase):
    """Which position receives the first packet: an RNG number 1–7 or three dice (docs/rules.md
    §6)."""

    kind: Literal["position_drawn"] = "position_drawn"
    method: Literal["rng", "software_rng", "dice", "dice_manual"]
    number: int | None = None
    dice: tuple[int, int, int] | None = None


class DeviceFault(DeviceEventBase):
    """A fault the device itself reports (jam, door open, card misread, ...)."""

    kind: Literal["device_fault"] = "device_fault"
    code: str
    detail: str = ""


class FrameError(DeviceEventBase):
    """Bytes the codec rejected: bad checksum, unknown card code, oversize, truncated, garbled.

    ``discarded`` counts the bytes thrown away that were in no good frame (line noise, a bad
    frame); it is 0 when the error is about the content of a good frame (sequence, type, payload,
    card code), whose bytes were read as a frame."""

    kind: Literal["frame_error"] = "frame_error"
    error: Literal[
        "checksum", "unknown_card", "oversize", "truncated", "garbled", "sequence", "unknown_type"
    ]
    detail: str = ""
    raw_hex: str = ""
    discarded: int = Field(default=0, ge=0, description="bytes thrown away, in no good frame")


DeviceEvent = Annotated[
    DeviceOnline
    | DeviceOffline
    | DealStarted
    | PacketDealt
    | CardDealt
    | StubVerified
    | DealEnded
    | PositionDrawn
    | DeviceFault
    | FrameError,
    Field(discriminator="kind"),
]

_ADAPTER: TypeAdapter[DeviceEvent] = TypeAdapter(DeviceEvent)


def parse_event(data: str | bytes | dict[str, object]) -> DeviceEvent:
    """Read back an event from its JSON text or dict (as journaled)."""
    if isinstance(data, dict):
        return _ADAPTER.validate_python(data)
    return _ADAPTER.validate_json(data)


def foreign_code(raw: int) -> str:
    """The text a codec gives an unknown card code."""
    return f"?{raw:02x}"
