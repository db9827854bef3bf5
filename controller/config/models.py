"""The config's sections as frozen pydantic models (unknown keys and loose types refused)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    model_validator,
)

from controller.config.fields import (
    CREDENTIAL_NAME,
    DEFAULT_JOURNAL_PATH,
    DEFAULT_SEATS,
    DEFAULT_TOPIC_PREFIX,
    DRIVER_NAME,
    ConfigPath,
    Endpoint,
    IpPort,
    ListenPort,
    Position,
    ReadableFile,
    Role,
    SeatLabel,
    Slug,
    UsbId,
    WayRef,
    file_problem,
    log_level,
    option_value,
    read_secret,
    stopbits_value,
    validation_context,
)
from controller.config.issues import ConfigError, ConfigIssue, KeyedValueError, choices
from controller.game.setting import Rules, WheelRank


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


# --- sections --------------------------------------------------------------------------------


class TableConfig(_Model):
    """``[table]``: who this table is and which seat label each position carries (docs/rules.md
    §6)."""

    id: Slug = Field(description="table id, e.g. PG-07; in round ids and MQTT topics")
    site: Slug = Field(description="site (casino) id; in MQTT topics")
    name: str = Field(default="", max_length=64, description="display name; defaults to id")
    seats: dict[Position, SeatLabel] = Field(
        default_factory=lambda: dict(DEFAULT_SEATS),
        description="position 2–7 → seat label; positions left out have no seat",
    )
    time_sync: bool = Field(
        default=True,
        description="check every minute that a time service synchronises the clock; alarm "
        "clock_unsynchronized when none does (off: a lab or demo computer without one)",
    )

    @model_validator(mode="before")
    @classmethod
    def _default_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("name") and isinstance(data.get("id"), str):
            return {**data, "name": data["id"]}
        return data

    @model_validator(mode="after")
    def _unique_labels(self) -> TableConfig:
        if not self.seats:
            raise KeyedValueError("seats", "expected at least one seat (position 2–7 → label)")
        seen: dict[str, int] = {}
        for position, label in sorted(self.seats.items()):
            if label in seen:
                raise KeyedValueError(
                    f"seats.{position}",
                    f"seat label {label!r} is already used by position {seen[label]}: "
                    f"expected a label unique at this table",
                )
            seen[label] = position
        return self

    def seat_of(self, position: int) -> str | None:
        """The seat label at ``position`` (None for the dealer and unseated positions)."""
        return self.seats.get(position)

    def position_of(self, seat: str) -> int | None:
        return next((p for p, label in self.seats.items() if label == seat), None)


class RulesConfig(_Model):
    """``[rules]``: the switches of docs/rules.md §3 and §5."""

    wheel_rank: WheelRank = "second_highest"
    ace_high_pushes_pai_gow: bool = False
    house_way: WayRef = Field(
        default="dealer-open",
        description="the House Way the dealer is set by: a shipped way (dealer-open, the filed "
        "way of docs/rules.md §7; classic) or a way file that passed `paigow-table house-way "
        "check` (docs/house-way.md)",
    )

    def to_rules(self) -> Rules:
        return Rules(
            wheel_rank=self.wheel_rank, ace_high_pushes_pai_gow=self.ace_high_pushes_pai_gow
        )


class PaytablesConfig(_Model):
    """``[paytables]``: the side-wager paytables of docs/rules.md §8."""

    chan_chu: Literal["PT1", "PT2", "PT3", "PT4", "PT5"] = "PT1"
    jacks_beat: Literal["A", "B", "C", "D"] = "A"
    envy: bool = False

    @model_validator(mode="after")
    def _envy_needs_pt3_to_pt5(self) -> PaytablesConfig:
        if self.envy and self.chan_chu not in ("PT3", "PT4", "PT5"):
            raise KeyedValueError(
                "envy",
                f"the envy bonus is paid only with Chan Chu paytables PT3–PT5 (docs/rules.md §8), "
                f"but chan_chu is {self.chan_chu!r}: expected envy = false or chan_chu PT3–PT5",
            )
        return self


IdentityText = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[ -~]+$")]


class DeviceIdentityConfig(_Model):
    """``[devices.<name>.identity]``: what the device is, as its maker labels it (printable
    ASCII, up to 64 characters each). Sent in the device's signed status; the pit keeps each
    table's device history and pools game protection by model and firmware."""

    make: IdentityText | None = None
    model: IdentityText | None = None
    firmware: IdentityText | None = None
    serial: IdentityText | None = None


class _DeviceBase(_Model):
    driver: str = Field(description="driver name, e.g. reference_shuffler")
    role: Role
    identity: DeviceIdentityConfig | None = Field(
        default=None, description="make, model, firmware and serial (docs/configuration.md)"
    )
    options: dict[str, Annotated[Any, AfterValidator(option_value)]] = Field(
        default_factory=dict, description="driver-specific settings, validated by the driver"
    )

    @model_validator(mode="after")
    def _known_driver(self, info: ValidationInfo) -> _DeviceBase:
        if not DRIVER_NAME.match(self.driver):
            raise KeyedValueError(
                "driver", f"expected a driver name in lower_snake_case, got {self.driver!r}"
            )
        known = validation_context(info).get("known_drivers")
        if isinstance(known, Mapping):
            if self.driver not in known:
                raise KeyedValueError(
                    "driver",
                    f"unknown driver {self.driver!r}: expected one of {choices(sorted(known))}",
                )
            roles = known[self.driver]
            if isinstance(roles, Collection) and self.role not in roles:
                raise KeyedValueError(
                    "role",
                    f"driver {self.driver!r} serves role {choices(sorted(roles))}, "
                    f"not {self.role!r}",
                )
        return self


class SerialDevice(_DeviceBase):
    """A device on a serial port (USB-serial adapters included)."""

    transport: Literal["serial"]
    port: ConfigPath = Field(description="device node, e.g. /dev/paigow-shuffler")
    baudrate: int = Field(default=38400, ge=50, le=4_000_000)
    bytesize: Literal[5, 6, 7, 8] = 8
    parity: Literal["N", "E", "O", "M", "S"] = "N"
    stopbits: Annotated[float, BeforeValidator(stopbits_value)] = 1

    def settings(self) -> dict[str, Any]:
        """Keyword settings for the driver: the port's line settings, then ``options``."""
        return {
            "port": str(self.port),
            "baudrate": self.baudrate,
            "bytesize": self.bytesize,
            "parity": self.parity,
            "stopbits": self.stopbits,
            **self.options,
        }


class TcpDevice(_DeviceBase):
    """A device behind a TCP socket (a serial-device server, or a networked pole display)."""

    transport: Literal["tcp"]
    host: str = Field(min_length=1)
    port: IpPort
    connect_timeout: float = Field(default=5.0, gt=0, le=120)

    def settings(self) -> dict[str, Any]:
        """Keyword settings for the driver: host, port, connect_timeout, then ``options``."""
        return {
            "host": self.host,
            "port": self.port,
            "connect_timeout": self.connect_timeout,
            **self.options,
        }


class UsbDevice(_DeviceBase):
    """A device read through pyusb (the HID dice reader)."""

    transport: Literal["usb"]
    vendor_id: UsbId
    product_id: UsbId
    interface: int = Field(default=0, ge=0, le=255)
    endpoint_in: Endpoint = 0x81
    packet_size: int = Field(default=8, ge=1, le=1024)
    timeout_ms: int = Field(default=250, ge=1, le=60_000)

    def settings(self) -> dict[str, Any]:
        """Keyword settings for the driver (``timeout_ms`` as ``read_timeout_ms``), then
        ``options``."""
        return {
            "vendor_id": self.vendor_id,
            "product_id": self.product_id,
            "interface": self.interface,
            "endpoint_in": self.endpoint_in,
            "packet_size": self.packet_size,
            "read_timeout_ms": self.timeout_ms,
            **self.options,
        }


class SoftwareDevice(_DeviceBase):
    """A device with no transport (the software RNG)."""

    transport: Literal["none"]

    def settings(self) -> dict[str, Any]:
        """Keyword settings for the driver: ``options`` only."""
        return dict(self.options)


AnyDevice = SerialDevice | TcpDevice | UsbDevice | SoftwareDevice
DeviceConfig = Annotated[AnyDevice, Field(discriminator="transport")]


class TlsConfig(_Model):
    """``[mqtt.tls]``: present means TLS; without ``ca_file`` the system CA store is used."""

    ca_file: ReadableFile | None = None
    cert_file: ReadableFile | None = None
    key_file: ReadableFile | None = None

    @model_validator(mode="after")
    def _cert_and_key(self) -> TlsConfig:
        if (self.cert_file is None) != (self.key_file is None):
            missing = "key_file" if self.key_file is None else "cert_file"
            raise KeyedValueError(missing, "a client certificate needs both cert_file and key_file")
        return self


class ReconnectConfig(_Model):
    """``[mqtt.reconnect]``: capped exponential backoff between connection attempts (seconds)."""

    initial: float = Field(default=0.5, gt=0, le=60)
    # 5 s: on a LAN a restarted broker is back in seconds; a table must not sit on its backlog.
    cap: float = Field(default=5.0, gt=0, le=3600)

    @model_validator(mode="after")
    def _cap_not_below_initial(self) -> ReconnectConfig:
        if self.cap < self.initial:
            raise KeyedValueError("cap", f"expected cap ≥ initial ({self.initial}), got {self.cap}")
        return self


class MqttConfig(_Model):
    """``[mqtt]``: the broker results and alarms are published to (absent: MQTT off).

    After the whole config is validated, ``port``, ``client_id`` and ``topic_prefix`` are always
    filled in (1883 or 8883 with TLS; ``paigow-<table id>``; the prefix template formatted with
    ``{site}`` and ``{table}``, ending in ``/``).
    """

    enabled: bool = True
    host: str = Field(default="localhost", min_length=1)
    port: IpPort = 0
    client_id: str = Field(default="", max_length=64)
    topic_prefix: str = DEFAULT_TOPIC_PREFIX
    protocol: Literal["3.1.1", "5"] = "3.1.1"
    keepalive: int = Field(default=30, ge=5, le=3600)
    tls: TlsConfig | None = None
    username: str | None = None
    password_file: ReadableFile | None = None
    password_credential: str | None = Field(
        default=None, description="name of a systemd credential (LoadCredential=) holding it"
    )
    reconnect: ReconnectConfig = Field(default_factory=ReconnectConfig)
    command_keys_file: ReadableFile | None = Field(
        default=None,
        description="keys of signed commands, 'key_id hmac-sha256 secret_hex' or 'key_id "
        "ed25519 public_key_hex' a line; set: commands must be signed (docs/mqtt.md)",
    )
    command_window: float = Field(
        default=60.0, ge=5, le=3600, description="seconds a signed command's issued_at may be off"
    )
    unsigned_read_only: bool = Field(
        default=True,
        description="accept status_request and resend unsigned when commands are signed",
    )
    reply_prefixes: list[str] = Field(
        default_factory=list,
        description="topic prefixes an MQTT 5 response topic may name besides <prefix>reply/",
    )
    feed_key_file: ReadableFile | None = Field(
        default=None,
        description="the table's Ed25519 key that signs every message it publishes (made by "
        "'paigow-table feed-key init'; docs/mqtt.md); unset: feed.key beside the journal, made "
        "at the first start",
    )
    checkpoint_key_file: ReadableFile | None = Field(
        default=None,
        description="HMAC key (hex, at least 32 bytes) of the signed checkpoints of the journal's "
        "hash chain, published on <prefix>checkpoint (docs/audit.md)",
    )
    checkpoint_interval: float = Field(
        default=300.0, ge=1, le=86_400, description="seconds between checkpoints while events come"
    )

    @model_validator(mode="before")
    @classmethod
    def _default_port(cls, data: Any) -> Any:
        if isinstance(data, dict) and "port" not in data:
            return {**data, "port": 8883 if data.get("tls") is not None else 1883}
        return data

    @model_validator(mode="after")
    def _password(self, info: ValidationInfo) -> MqttConfig:
        if self.password_file is not None and self.password_credential is not None:
            raise KeyedValueError(
                "password_credential",
                "expected either password_file or password_credential, not both",
            )
        has_password = self.password_file is not None or self.password_credential is not None
        if has_password and not self.username:
            raise KeyedValueError("username", "a password needs a username: expected username")
        if self.password_credential is not None:
            if not CREDENTIAL_NAME.match(self.password_credential):
                raise KeyedValueError(
                    "password_credential",
                    f"expected a systemd credential name, got {self.password_credential!r}",
                )
            directory = os.environ.get("CREDENTIALS_DIRECTORY")
            if validation_context(info).get("check_files") and directory:
                problem = file_problem(Path(directory) / self.password_credential)
                if problem:
                    raise KeyedValueError("password_credential", f"systemd credential: {problem}")
        if "{" in self.topic_prefix or "}" in self.topic_prefix:
            try:
                self.topic_prefix.format(site="site", table="table")
            except (KeyError, IndexError, ValueError):
                raise KeyedValueError(
                    "topic_prefix",
                    f"expected a topic with at most the placeholders {{site}} and {{table}}, "
                    f"got {self.topic_prefix!r}",
                ) from None
        return self

    def read_password(self) -> str | None:
        """The MQTT password from ``password_file`` or the systemd credential (None without one).

        Raises ConfigError when it cannot be read.
        """
        if self.password_file is not None:
            return read_secret(self.password_file)
        if self.password_credential is not None:
            directory = os.environ.get("CREDENTIALS_DIRECTORY")
            if not directory:
                raise ConfigError(
                    [
                        ConfigIssue(
                            "(environment)",
                            "mqtt.password_credential",
                            "$CREDENTIALS_DIRECTORY is not set: expected the daemon to run "
                            "under systemd with LoadCredential=",
                        )
                    ]
                )
            return read_secret(Path(directory) / self.password_credential)
        return None


class DisplayConfig(_Model):
    """``[display]``: the dealer and supervisor pages.

    Remote clients reach the supervisor page only with the token from ``supervisor_token_file``;
    without one it answers on the loopback address only.
    """

    enabled: bool = True
    host: str = Field(default="127.0.0.1", min_length=1)
    port: ListenPort = 8080
    supervisor_token_file: ReadableFile | None = None
    void_pin_file: ReadableFile | None = None
    dealers_file: ReadableFile | None = Field(
        default=None,
        description="badges and PIN hashes of the dealers who may sign in at the kiosk "
        "('paigow-table dealer-pin BADGE' makes a line)",
    )
    supervisors_file: ReadableFile | None = Field(
        default=None,
        description="badges and PIN hashes of the supervisors who may void a round, acknowledge "
        "an alarm or correct a player's setting at the display, each named by badge "
        "('paigow-table supervisor-pin BADGE' makes a line); without it the shared void PIN "
        "does, under a typed name",
    )
    remote_dealer_input: bool = Field(
        default=False,
        description="accept dealer input (dice, seats, settings, void) from other hosts",
    )
    kiosk_token_file: ReadableFile | None = Field(
        default=None,
        description="the kiosk's token (at least 32 characters): the kiosk launcher "
        "('paigow-table kiosk') buys the kiosk's credential with it, which keeps the kiosk "
        "served under a flood; without it a random token is made at start, known to no launcher",
    )
    allowed_hosts: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9.-]{1,253}$")]] = Field(
        default_factory=list,
        max_length=64,
        description="further host names the pages may be reached by (what a browser puts in "
        "Host, without the port), besides localhost, addresses and host: any other name is "
        "refused, as DNS rebinding",
    )
    max_connections: int = Field(
        default=256,
        ge=8,
        le=4096,
        description="open connections at most; beyond it the oldest idle one is closed for a "
        "new one, never the kiosk's",
    )
    max_streams: int = Field(
        default=64,
        ge=2,
        le=2048,
        description="live streams at most; the oldest one not the kiosk's is closed to admit a "
        "new one",
    )
    request_timeout: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="seconds a new connection has to send a whole request head",
    )
    idle_timeout: float = Field(
        default=30.0, gt=0, le=3600, description="seconds an idle keep-alive connection is kept"
    )

    @property
    def loopback_only(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    def read_supervisor_token(self) -> str | None:
        return (
            None if self.supervisor_token_file is None else read_secret(self.supervisor_token_file)
        )

    def read_void_pin(self) -> str | None:
        return None if self.void_pin_file is None else read_secret(self.void_pin_file)


class JournalConfig(_Model):
    """``[journal]``: the SQLite journal (controller/journal/), its free space and retention."""

    path: ConfigPath = DEFAULT_JOURNAL_PATH
    synchronous: Literal["FULL", "NORMAL"] = "FULL"
    min_free_mb: int = Field(
        default=512,
        ge=1,
        le=1_000_000,
        description="alarm when the journal's filesystem has less free space than this (MB)",
    )
    reserve_mb: int = Field(
        default=16,
        ge=0,
        le=1024,
        description="space kept on the journal's filesystem (a file beside it) and released to "
        "record a full disk: the fault and every deal seen during it reach the journal; 0: none",
    )
    retention_days: int = Field(
        default=90,
        ge=0,
        le=36_500,
        description="closed rounds older than this are archived and removed; 0 keeps all",
    )
    archive_dir: ConfigPath | None = Field(
        default=None,
        description="where archives of old rounds go; default: 'archive' beside the journal",
    )

    @property
    def archive_directory(self) -> Path:
        return self.archive_dir or Path(self.path).parent / "archive"

    @property
    def reserve_path(self) -> Path:
        return Path(f"{self.path}.reserve")


class LimitsConfig(_Model):
    """``[limits]``: how much a noisy or flooding device may cost (docs/faults.md)."""

    alarm_interval: float = Field(
        default=60.0,
        ge=1,
        le=3600,
        description="seconds: repeated frame errors and faults of a device make one alarm each",
    )
    device_events_per_minute: int = Field(
        default=600,
        ge=60,
        le=100_000,
        description="events a device may send a minute; beyond this they are counted, not applied",
    )
    refusals_before_alarm: int = Field(
        default=3,
        ge=1,
        le=1000,
        description="refused commands (wrong PIN, bad signature, over the rate) from one source "
        "within 10 minutes that raise a critical command_refused alarm",
    )
    mqtt_commands_per_minute: int = Field(
        default=120,
        ge=1,
        le=60_000,
        description="MQTT commands the table takes a minute; beyond it they are refused (one "
        "journal record and alarm per minute), never dropped silently",
    )
    mqtt_unsigned_per_minute: int = Field(
        default=30,
        ge=1,
        le=60_000,
        description="on a table that takes signed commands: unsigned read-only commands and "
        "refused ones it looks at a minute, a budget of their own (the casino's signed commands "
        "keep theirs); beyond it they are counted, one warning a minute (docs/mqtt.md)",
    )
    corrections_per_round: int = Field(
        default=2,
        ge=0,
        le=100,
        description="corrections of players' settings a round may have (each needs a supervisor "
        "and a reason and raises an alarm); more are refused; 0: none",
    )
    corrections_per_hour: int = Field(
        default=6,
        ge=0,
        le=1000,
        description="corrections of players' settings the table takes in any hour; more are "
        "refused; 0: none",
    )


class ProtectionSettings(_Model):
    """``[protection]``: the statistical watch over the shuffler, RNG box and dice
    (docs/protection.md)."""

    enabled: bool = True
    false_alarms_per_year: float = Field(
        default=0.1,
        gt=0,
        le=100,
        description="false alarms a table may raise a year, all tests together (a bound)",
    )
    rounds_per_year: int = Field(
        default=300_000,
        ge=1_000,
        le=10_000_000,
        description="rounds a busy table deals a year: the year the rate above is spread over",
    )
    recent_deals: int = Field(
        default=10, ge=1, le=1000, description="deals a repeated order is looked for among"
    )


class LoggingConfig(_Model):
    """``[logging]``: level, and JSON lines or readable console output ("auto" picks)."""

    level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(log_level)
    ] = "INFO"
    format: Literal["auto", "json", "console"] = "auto"


class Config(_Model):
    """The whole table configuration."""

    table: TableConfig
    rules: RulesConfig = Field(default_factory=RulesConfig)
    paytables: PaytablesConfig = Field(default_factory=PaytablesConfig)
    devices: dict[Slug, DeviceConfig]
    mqtt: MqttConfig = Field(default_factory=lambda: MqttConfig(enabled=False))
    display: DisplayConfig = Field(default_factory=DisplayConfig)
    journal: JournalConfig = Field(default_factory=JournalConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    protection: ProtectionSettings = Field(default_factory=ProtectionSettings)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)

    @model_validator(mode="after")
    def _roles_and_defaults(self) -> Config:
        cards = self.devices_with_role("cards")
        if len(cards) != 1:
            found = f"found {len(cards)}: {', '.join(cards)}" if cards else "found none"
            raise KeyedValueError(
                "devices",
                f'expected exactly one device with role = "cards" (shuffler or shoe), {found}',
            )
        poles = self.devices_with_role("pole")
        if len(poles) > 1:
            raise KeyedValueError(
                "devices",
                f'expected at most one device with role = "pole", found {len(poles)}: '
                f"{', '.join(poles)}",
            )
        prefix = self.mqtt.topic_prefix.format(site=self.table.site, table=self.table.id)
        if not prefix.endswith("/"):
            prefix += "/"
        if "+" in prefix or "#" in prefix or prefix.startswith("/"):
            raise KeyedValueError(
                "mqtt.topic_prefix",
                f"expected a topic without wildcards or a leading '/', got {prefix!r}",
            )
        # Derived defaults need the table section; the instance is new and not yet shared.
        mqtt = self.mqtt.model_copy(
            update={
                "client_id": self.mqtt.client_id or f"paigow-{self.table.id}",
                "topic_prefix": prefix,
            }
        )
        object.__setattr__(self, "mqtt", mqtt)
        return self

    def devices_with_role(self, role: Role) -> list[str]:
        """Names of the devices with ``role``, in file order."""
        return [name for name, device in self.devices.items() if device.role == role]

    @property
    def cards_device(self) -> tuple[str, AnyDevice]:
        name = self.devices_with_role("cards")[0]
        return name, self.devices[name]

    @property
    def pole_device(self) -> tuple[str, AnyDevice] | None:
        names = self.devices_with_role("pole")
        return (names[0], self.devices[names[0]]) if names else None
