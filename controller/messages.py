"""What the controller says and hears: payload models of the MQTT feed, the journal and the display,
and the commands it accepts (docs/architecture.md "Messages on the wire and in the journal are
pydantic models with a schema version").

Outbound payloads are wrapped in an envelope (``envelope``) that carries the schema name and
version, the message id (stable across resends), the table id, the per-table sequence number and
the UTC time. Inbound commands are validated here; anything that does not validate is refused
with the validation's own words.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from controller.catalogue import ALARM_CODES
from controller.clock import iso

SeatLabel = Annotated[str, Field(min_length=1, max_length=8)]
Amount = Annotated[int, Field(ge=0, le=1_000_000, description="whole currency units")]
CardText = Annotated[str, Field(min_length=2, max_length=4)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Payload(_Model):
    """An outbound payload; SCHEMA and VERSION name it on the wire."""

    SCHEMA: ClassVar[str] = ""
    VERSION: ClassVar[int] = 1
    TOPIC: ClassVar[str] = ""


# --- round results --------------------------------------------------------------------------


class Problem(_Model):
    code: str = Field(description="machine-readable reason, e.g. short_packet, duplicate_card")
    detail: str = Field(description="the reason for a person")


class PositionDraw(_Model):
    method: Literal["rng", "software_rng", "dice", "dice_manual"]
    number: int | None = Field(default=None, ge=1, le=7, description="the RNG's number")
    dice: tuple[int, int, int] | None = None
    position: int = Field(ge=1, le=7, description="position that received the first packet")


class SettingOut(_Model):
    front: list[CardText]
    back: list[CardText]
    rule: str | None = Field(
        description="House Way rule id (docs/rules.md §7); null for a player's own"
    )
    front_hand: str
    back_hand: str


class DealerOut(_Model):
    cards: list[CardText]
    best_hand: str
    two_jacks: bool = Field(description="two or more natural Jacks: every Pai Gow wager loses")
    ace_high_pai_gow: bool
    setting: SettingOut | None = Field(description="null when the dealer has two Jacks")


class SideOut(_Model):
    line: str
    pays: int = Field(description='"to 1"; 0 push; -1 the wager loses')
    wager: Amount | None = None
    win: int | None = Field(
        None, description="net result in currency units when the wager is known"
    )


class EnvyAwardOut(_Model):
    from_seat: str
    line: str
    amount: int


class EnvyOut(_Model):
    qualifies: bool
    total: int
    awards: list[EnvyAwardOut]


class Wagers(_Model):
    pai_gow: Amount | None = None
    chan_chu: Amount | None = None
    jacks_beat: Amount | None = None
    push_ace_high: Amount | None = None


class SeatOut(_Model):
    seat: str
    position: int
    cards: list[CardText]
    best_hand: str
    wagers: Wagers | None = None
    chan_chu: SideOut
    jacks_beat: SideOut
    push_ace_high: SideOut
    envy: EnvyOut | None = None


class PositionCards(_Model):
    position: int = Field(
        description="position 1–7 (1 is the dealer); for a dead deal without a first-position "
        "draw, the packet number"
    )
    seat: str = Field(
        description='seat label, "dealer" for position 1, or "packet N" for a dead deal '
        "without a first-position draw"
    )
    cards: list[str]
    packet: int | None = Field(
        default=None,
        ge=1,
        description="the packet's number in dealing order, 1–7, as in the reasons' texts",
    )


class RoundPayload(Payload):
    """One round as settled (``status`` settled), or dead, misdealt or voided with its reasons."""

    SCHEMA: ClassVar[str] = "paigow.round"
    TOPIC: ClassVar[str] = "round"

    round_id: str
    round_seq: int = Field(description="per-table round number")
    status: Literal["settled", "dead", "misdeal", "void"]
    reasons: list[Problem] = []
    opened_at: datetime
    closed_at: datetime
    shuffle_id: str = ""
    card_source: str = ""
    dealer_id: str | None = Field(None, description="the dealer signed in when the round opened")
    first_position: PositionDraw | None = None
    positions: list[PositionCards] = []
    dealer: DealerOut | None = None
    seats: list[SeatOut] = []
    rules: dict[str, Any] = {}
    paytables: dict[str, Any] = {}

    @property
    def topic(self) -> str:
        return "round" if self.status == "settled" else "dead"


class PlayerPayload(Payload):
    """A player's own setting entered after the dealer's: foul test and the Pai Gow wager."""

    SCHEMA: ClassVar[str] = "paigow.player"
    TOPIC: ClassVar[str] = "player"

    round_id: str
    seat: str
    setting: SettingOut
    house_way: bool
    foul: bool
    pai_gow: dict[str, Any]
    wager: Amount | None = None
    win: int | None = None
    setting_id: str = Field(
        "", description="this entry's id: <round_id>/<seat>/<n>, n counting the seat's entries"
    )
    corrects: str | None = Field(
        None,
        description="the setting_id of the earlier entry for this seat and round that this one "
        "replaces (a correction); null for the first",
    )
    dealer_id: str | None = None
    by: str | None = Field(
        None,
        description="the supervisor who allowed this entry (every correction has one): a badge "
        "checked against the supervisors file, or a name typed under the shared void PIN when "
        "the table has no supervisors file, or as a signed command's sender gave it",
    )
    reason: str = Field("", description="why the setting was corrected (every correction has one)")


class AlarmPayload(Payload):
    SCHEMA: ClassVar[str] = "paigow.alarm"
    TOPIC: ClassVar[str] = "alarm"

    code: str = Field(
        description="what happened; every code, its severity, whether it latches and what to do "
        "are in docs/alarms.md (controller/catalogue.py)",
        json_schema_extra={"enum": list(ALARM_CODES)},
    )
    severity: Literal["info", "warning", "critical"]
    detail: str
    device: str | None = None
    round_id: str | None = None
    alarm_id: str = Field("", description="unique; an acknowledgement names it")
    raised_at: datetime | None = None
    ack_required: bool = Field(
        False,
        description="critical: latched until a named person acknowledges it (acknowledge_alarm); "
        "it survives restarts and stays in the status' alarms_unacknowledged",
    )
    by: str | None = Field(
        None,
        description="the supervisor whose action raised it (round_voided, setting_corrected): "
        "a badge, or a name typed under the shared void PIN",
    )


class AlarmAckPayload(Payload):
    """A latched alarm acknowledged by a named person (docs/audit.md)."""

    SCHEMA: ClassVar[str] = "paigow.alarm_ack"
    TOPIC: ClassVar[str] = "alarm_ack"

    alarm_id: str
    code: str
    raised_at: datetime | None = None
    acknowledged_at: datetime
    by: str = Field(
        description="who acknowledged it: the supervisor's badge, checked against the "
        "supervisors file; without one, the name typed under the shared void PIN, or as a "
        "signed command's sender gave it"
    )
    channel: str = Field(description="kiosk, display, mqtt or cli")
    identity: str = Field("", description="the channel's identity: key id, address, topic")
    note: str = ""


class ProtectionPayload(Payload):
    """Game protection (docs/protection.md): a statistical test of the shuffler, the RNG box or
    the dice passed its threshold. The same alarm is on ``alarm`` (code ``game_protection``),
    latched until a named person acknowledges it; acknowledging restarts the test."""

    SCHEMA: ClassVar[str] = "paigow.protection"
    TOPIC: ClassVar[str] = "protection"

    alarm_id: str
    test: str = Field(description="rng_number, dice_sum, card_packet, repeat_order, …")
    title: str
    detail: str
    statistic: float = Field(description="the test's CUSUM log-likelihood ratio")
    threshold: float = Field(description="the alarm threshold for the configured false-alarm rate")
    llr: float
    p_value: float = Field(
        ge=0, le=1, description="bound on the chance a fair device gets this far this soon"
    )
    since: datetime | None = Field(description="when the evidence window began")
    at: datetime
    rounds: int = Field(ge=0, description="rounds in the evidence window")
    rounds_seen: int = Field(ge=0, description="rounds the test has seen since its last reset")
    advice: str = Field(description="what to do: swap the device, call surveillance")
    severity: Literal["info", "warning", "critical"]
    reference: str = Field(
        "", description="what the test compared with: the exact null, or the earlier order"
    )
    alternative: str = Field("", description="the fault the alarmed CUSUM's ratio is against")
    evidence: str = Field("", description="the observation behind it, for surveillance")


class CheckpointPayload(Payload):
    """The journal's hash chain at a row, signed (docs/audit.md "Checkpoints"): keep them; a
    journal rewritten later no longer matches them."""

    SCHEMA: ClassVar[str] = "paigow.checkpoint"
    TOPIC: ClassVar[str] = "checkpoint"

    table_id: str
    event_id: int = Field(ge=1, description="the journal's newest chained event row")
    chain: str = Field(description="that row's chain hash (SHA-256 hex)")
    made_at: str = Field(description="when the checkpoint was made (ISO 8601, UTC)")
    prev_event_id: int | None = Field(
        None,
        ge=1,
        description="the event_id of the checkpoint before this one (null: none before it), so "
        "the checkpoints are a chain: a history rewritten or cut shows at the next one",
    )
    prev_chain: str | None = Field(
        None,
        description="the chain hash the journal holds now at prev_event_id (null: that row is "
        "gone); equal to that checkpoint's chain unless the journal was rewritten",
    )
    key_id: str = Field("", description="which checkpoint key signed it (the key file's name)")
    hmac: str = Field(
        description="HMAC-SHA256 (hex) under the checkpoint key over the JSON of table_id, "
        "event_id, chain and made_at, and prev_event_id and prev_chain when either is set, with "
        "sorted keys and no spaces"
    )


IdentityText = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[ -~]+$")]


class DeviceIdentity(_Model):
    """What a device is, as the table's config names it ([devices.<name>.identity]): the
    floor pools game protection's evidence by model and firmware, and keeps each table's
    device history by serial (a swap is a new identity)."""

    make: IdentityText | None = None
    model: IdentityText | None = None
    firmware: IdentityText | None = None
    serial: IdentityText | None = None
    role: Literal["cards", "position", "pole"] | None = Field(
        None,
        description="what the table uses it for (its config's role): cards, the shuffler or "
        "shoe; position, the RNG box or dice reader; the floor pools each role's tests",
    )


class DevicePayload(Payload):
    SCHEMA: ClassVar[str] = "paigow.device"
    TOPIC: ClassVar[str] = "device"

    device: str
    online: bool
    identity: DeviceIdentity | None = Field(
        None,
        description="make, model, firmware and serial from the table's config (null: not "
        "configured); a new one for the same device is a swap",
    )
    detail: str = ""


class FaultOut(BaseModel):
    """Why the table is in its fault state (tilt): the journal cannot be written, so no result
    is shown or sent as settled until it can (docs/faults.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str = Field(description="journal_write_failed")
    detail: str = Field(description="the error, e.g. 'database or disk is full'")
    since: datetime
    events_lost: int = Field(0, ge=0, description="device events not applied since the fault")


class StatusPayload(Payload):
    SCHEMA: ClassVar[str] = "paigow.status"
    TOPIC: ClassVar[str] = "status"

    state: Literal["online", "offline", "fault"]
    table_open: bool
    devices: dict[str, bool]
    round_id: str | None = None
    software_version: str = ""
    config_digest: str = ""
    software_digest: str = Field(
        "", description="SHA-256 over the installed files and their hashes (docs/audit.md)"
    )
    software_verified: bool | None = Field(
        None, description="every installed file matched the package at start; null: a dev install"
    )
    house_way: str = Field(
        "", description="the House Way the dealer is set by ([rules] house_way; docs/house-way.md)"
    )
    house_way_digest: str = Field("", description="SHA-256 of the way's canonical rules")
    fault: FaultOut | None = Field(
        None, description="set while state is fault: do not settle by the display"
    )
    clock_synchronized: bool | None = Field(
        None,
        description="whether a time service synchronises the computer's clock (null: not "
        "checked or cannot tell); signed commands and every record depend on it",
    )
    alarms_unacknowledged: list[AlarmPayload] = Field(
        [],
        description="critical alarms not yet acknowledged, oldest first (latched); at most "
        "STATUS_ALARMS of them (the oldest), the rest counted in alarms_unacknowledged_total",
    )
    alarms_unacknowledged_total: int = Field(
        0, ge=0, description="how many latched alarms wait, listed or not"
    )
    dealer_id: str | None = Field(None, description="the dealer signed in at the table")


class Signature(_Model):
    """``sig``: the table's Ed25519 signature of the message without it, as canonical JSON
    (controller/feed_signature.py)."""

    alg: Literal["ed25519"]
    key_id: str = Field(
        pattern=r"^ed25519:[0-9a-f]{32}$", description="which key: paigow-table feed-key show"
    )
    value: str = Field(pattern=r"^[0-9a-f]{128}$", description="the signature, 64 bytes in hex")


class Envelope(BaseModel):
    """The header every feed message carries around its payload, as :func:`envelope` writes it
    and the pit reads it (``pit.judge.read``: one model for both ends). Strict: a seq of
    ``true`` or ``"3"`` is no seq. Fields beyond these are the payload's business, not the
    header's, and are left alone (the signature is checked over the whole message first)."""

    model_config = ConfigDict(strict=True, frozen=True, extra="ignore", populate_by_name=True)

    schema_: str = Field(alias="schema", min_length=1, max_length=64)
    version: int
    msg_id: str = Field(min_length=1, max_length=128)
    table_id: str = Field(min_length=1, max_length=64)
    seq: int = Field(ge=0)
    time: str = Field(max_length=64)
    replayed: bool = False
    payload: dict[str, Any]


def envelope(
    payload: Payload,
    *,
    msg_id: str,
    table_id: str,
    seq: int,
    time: datetime,
    replayed: bool = False,
) -> dict[str, Any]:
    """The wire form of a message: header fields and the payload under ``payload``."""
    return {
        "schema": payload.SCHEMA,
        "version": payload.VERSION,
        "msg_id": msg_id,
        "table_id": table_id,
        "seq": seq,
        "time": iso(time, "microseconds"),
        "replayed": replayed,
        "payload": payload.model_dump(mode="json"),
    }


# --- commands -------------------------------------------------------------------------------


class _Command(_Model):
    request_id: str | None = Field(default=None, max_length=128)


class OpenTable(_Command):
    kind: Literal["open_table"] = "open_table"


class CloseTable(_Command):
    kind: Literal["close_table"] = "close_table"


class VoidRound(_Command):
    kind: Literal["void_round"] = "void_round"
    round_id: str | None = Field(
        default=None,
        description="the round to void, which must be the table's newest round; defaults to it "
        "(a signed void_round must name it)",
    )
    reason: str = Field(default="voided by dealer", max_length=200)
    by: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="the supervisor who voids it: a badge (or, without a supervisors file, a name)",
    )


class SetSeats(_Command):
    kind: Literal["set_seats"] = "set_seats"
    occupied: dict[SeatLabel, bool]


class SetWagers(_Command):
    kind: Literal["set_wagers"] = "set_wagers"
    seat: SeatLabel
    wagers: Wagers


class EnterDice(_Command):
    kind: Literal["enter_dice"] = "enter_dice"
    dice: tuple[
        Annotated[int, Field(ge=1, le=6)],
        Annotated[int, Field(ge=1, le=6)],
        Annotated[int, Field(ge=1, le=6)],
    ]
    round_id: str | None = Field(
        default=None,
        description="the round being dealt that the dice are for, or null between deals (the "
        "dice wait for the next deal); when given it must be so (a signed enter_dice must give "
        "it)",
    )


class PlayerSetting(_Command):
    kind: Literal["player_setting"] = "player_setting"
    seat: SeatLabel
    front: tuple[CardText, CardText] | None = Field(default=None, description="the two front cards")
    house_way: bool = Field(
        default=False, description="set the player's hand by the House Way instead"
    )
    round_id: str | None = Field(
        default=None,
        description="the settled round the setting is for, which must be the table's newest "
        "round; defaults to it (a signed player_setting must name it)",
    )
    by: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="the supervisor who allows it: a correction (the seat's setting entered "
        "again) needs one, a badge (or, without a supervisors file, a name)",
    )
    reason: str = Field(
        default="", max_length=200, description="why: a correction needs one (not blank)"
    )


class StatusRequest(_Command):
    kind: Literal["status_request"] = "status_request"


#: The most seqs one ``resend`` may name.
RESEND_MAX = 1000


class Resend(_Command):
    """A consumer (the pit) lost messages downstream of the broker: the table publishes its
    kept copies of seqs ``from_seq``..``to_seq`` again, marked replayed (docs/mqtt.md §3)."""

    kind: Literal["resend"] = "resend"
    from_seq: int = Field(ge=1, le=2**53)
    to_seq: int = Field(ge=1, le=2**53, description=f"at most {RESEND_MAX - 1} after from_seq")

    @model_validator(mode="after")
    def _range(self) -> Resend:
        if not 0 <= self.to_seq - self.from_seq < RESEND_MAX:
            raise ValueError(f"to_seq must be from_seq to from_seq + {RESEND_MAX - 1}")
        return self


class AcknowledgeAlarm(_Command):
    kind: Literal["acknowledge_alarm"] = "acknowledge_alarm"
    alarm_id: str = Field(min_length=1, max_length=128)
    by: str = Field(
        min_length=1,
        max_length=64,
        description="who acknowledges: a supervisor's badge (or, without a supervisors file, a "
        "name)",
    )
    note: str = Field(default="", max_length=200)


class SignIn(_Command):
    """A dealer takes the table (at the kiosk after a badge and PIN check, or a signed command
    from the casino's system); another dealer signed in is a rotation."""

    kind: Literal["sign_in"] = "sign_in"
    dealer_id: str = Field(min_length=1, max_length=32, pattern=r"^[A-Za-z0-9_.-]+$")


class SignOut(_Command):
    kind: Literal["sign_out"] = "sign_out"


class Authenticate(_Command):
    """A regulator's challenge (docs/audit.md, software authentication): the reply's data holds
    the HMAC-SHA256 keyed by the nonce over every installed file and the config's digest."""

    kind: Literal["authenticate"] = "authenticate"
    nonce: str = Field(min_length=8, max_length=256)


Command = Annotated[
    OpenTable
    | CloseTable
    | VoidRound
    | SetSeats
    | SetWagers
    | EnterDice
    | PlayerSetting
    | StatusRequest
    | Resend
    | AcknowledgeAlarm
    | SignIn
    | SignOut
    | Authenticate,
    Field(discriminator="kind"),
]
COMMAND_ADAPTER: TypeAdapter[Command] = TypeAdapter(Command)
COMMAND_KINDS = (
    "open_table",
    "close_table",
    "void_round",
    "set_seats",
    "set_wagers",
    "enter_dice",
    "player_setting",
    "status_request",
    "resend",
    "acknowledge_alarm",
    "sign_in",
    "sign_out",
    "authenticate",
)


def parse_command(data: str | bytes | dict[str, Any]) -> Command:
    """Validate a command (raises pydantic.ValidationError with precise messages)."""
    if isinstance(data, dict):
        return COMMAND_ADAPTER.validate_python(data)
    return COMMAND_ADAPTER.validate_json(data)
