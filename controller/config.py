"""The table's configuration: one TOML file read into frozen pydantic models.

Every model forbids unknown keys and validates strictly (TOML has real types, so ``port = "1883"``
is an error, not a silent conversion). ``load_config`` turns every problem into a
:class:`ConfigIssue` naming the file, the dotted key and what was expected; the daemon refuses to
start on any of them (docs/architecture.md "Conventions").

Paths in the file are relative to the file's directory. When a file is loaded with
``load_config`` the files it references (password, token, PIN, TLS files) must exist and be
readable by the current user; models built in code (the demo, tests) skip that check.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import tomllib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from controller.game.setting import Rules, WheelRank
from drivers.base import Backoff

#: Exit status for "configuration error" (sysexits.h EX_CONFIG); the unit file does not restart
#: the daemon on it (RestartPreventExitStatus=78).
EXIT_CONFIG_ERROR = 78

Role = Literal["cards", "position", "pole"]
TRANSPORTS: tuple[str, ...] = ("serial", "tcp", "usb", "none")

DEFAULT_SEATS: dict[int, str] = {position: str(position - 1) for position in range(2, 8)}
DEFAULT_TOPIC_PREFIX = "casino/{site}/paigow/{table}/"
DEFAULT_JOURNAL_PATH = Path("/var/lib/paigow-table/journal.sqlite3")

_SLUG = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,30}[A-Za-z0-9])?$")
_DRIVER = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_CREDENTIAL = re.compile(r"^[A-Za-z0-9_.@-]{1,255}$")


class KeyedValueError(ValueError):
    """A validation error about one key below the model that raised it (``key`` is appended to
    the model's location when the error is reported)."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class ConfigIssue(NamedTuple):
    """One problem in a config file: ``file``, dotted ``key`` and a message saying what was
    expected."""

    file: str
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.key}: {self.message}"


class ConfigError(Exception):
    """The config cannot be used; ``errors`` lists every problem found."""

    def __init__(self, errors: Sequence[ConfigIssue]) -> None:
        self.errors: list[ConfigIssue] = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))


# --- field types -----------------------------------------------------------------------------


def _slug(value: str) -> str:
    if not _SLUG.match(value):
        raise ValueError(
            f"expected a short identifier (letters, digits, '-' or '_', at most 32 characters, "
            f"starting and ending with a letter or digit), got {value!r}"
        )
    return value


def _position(value: object) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a position number 2–7, got {value!r}")
    if not 2 <= value <= 7:
        raise ValueError(
            f"position {value} is out of range: expected 2–7 (position 1 is the dealer)"
        )
    return value


def _seat_label(value: str) -> str:
    if not value or value != value.strip() or len(value) > 8 or not value.isprintable():
        raise ValueError(
            f"expected a seat label of 1–8 printable characters without surrounding spaces, "
            f"got {value!r}"
        )
    return value


def _ip_port(value: int) -> int:
    if not 1 <= value <= 65535:
        raise ValueError(f"expected a port number 1–65535, got {value}")
    return value


def _listen_port(value: int) -> int:
    if not 0 <= value <= 65535:
        raise ValueError(f"expected a port number 0–65535 (0: any free port), got {value}")
    return value


def _usb_id(value: object) -> int:
    """USB ids are written in hex by every tool (lsusb, udevadm): accept ``"0x1234"`` too."""
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise ValueError(
                f'expected a 16-bit number such as 0x0403 or "0x0403", got {value!r}'
            ) from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 0xFFFF:
        raise ValueError(f'expected a 16-bit number such as 0x0403 or "0x0403", got {value!r}')
    return value


def _endpoint(value: object) -> int:
    if isinstance(value, str):
        try:
            value = int(value, 0)
        except ValueError:
            raise ValueError(f"expected an endpoint address such as 0x81, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0x80 <= value <= 0x8F:
        raise ValueError(f"expected an IN endpoint address 0x80–0x8F (such as 0x81), got {value!r}")
    return value


def _path(value: object, info: ValidationInfo) -> Path:
    """Paths are strings in TOML; relative ones are relative to the config file's directory."""
    if isinstance(value, str):
        if not value:
            raise ValueError("expected a file path, got an empty string")
        value = Path(value)
    if not isinstance(value, Path):
        raise ValueError(f"expected a file path string, got {_describe(value)}")
    base = _context(info).get("base_dir")
    if isinstance(base, Path) and not value.is_absolute():
        value = base / value
    return value


def _readable_if_checking(value: Path, info: ValidationInfo) -> Path:
    if _context(info).get("check_files"):
        problem = _file_problem(value)
        if problem:
            raise ValueError(problem)
    return value


def _option_value(value: object) -> object:
    if not isinstance(value, str | int | float | bool):
        raise ValueError(f"expected a string, number or boolean, got {_describe(value)}")
    return value


def _stopbits(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value not in (1, 1.5, 2):
        raise ValueError(f"expected 1, 1.5 or 2, got {_describe(value)}")
    return value


def _level(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


Slug = Annotated[str, AfterValidator(_slug)]
Position = Annotated[int, BeforeValidator(_position)]
SeatLabel = Annotated[str, AfterValidator(_seat_label)]
IpPort = Annotated[int, AfterValidator(_ip_port)]
ListenPort = Annotated[int, AfterValidator(_listen_port)]
UsbId = Annotated[int, BeforeValidator(_usb_id)]
Endpoint = Annotated[int, BeforeValidator(_endpoint)]
ConfigPath = Annotated[Path, BeforeValidator(_path)]
ReadableFile = Annotated[Path, BeforeValidator(_path), AfterValidator(_readable_if_checking)]


def _context(info: ValidationInfo) -> Mapping[str, object]:
    return info.context if isinstance(info.context, Mapping) else {}


def _file_problem(path: Path) -> str | None:
    if not path.exists():
        return f"file not found: {path} (expected an existing, readable file)"
    if not path.is_file():
        return f"not a regular file: {path} (expected an existing, readable file)"
    if not os.access(path, os.R_OK):
        return f"file not readable by this user: {path} (expected an existing, readable file)"
    return None


def _read_secret(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue(str(path), "(file)", f"cannot read: {exc.strerror}")]
        ) from None
    secret = text.rstrip("\r\n")
    if not secret:
        raise ConfigError([ConfigIssue(str(path), "(file)", "the file is empty")])
    return secret


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


class _DeviceBase(_Model):
    driver: str = Field(description="driver name, e.g. reference_shuffler")
    role: Role
    options: dict[str, Annotated[Any, AfterValidator(_option_value)]] = Field(
        default_factory=dict, description="driver-specific settings, validated by the driver"
    )

    @model_validator(mode="after")
    def _known_driver(self, info: ValidationInfo) -> _DeviceBase:
        if not _DRIVER.match(self.driver):
            raise KeyedValueError(
                "driver", f"expected a driver name in lower_snake_case, got {self.driver!r}"
            )
        known = _context(info).get("known_drivers")
        if isinstance(known, Mapping):
            if self.driver not in known:
                raise KeyedValueError(
                    "driver",
                    f"unknown driver {self.driver!r}: expected one of {_choices(sorted(known))}",
                )
            roles = known[self.driver]
            if isinstance(roles, Collection) and self.role not in roles:
                raise KeyedValueError(
                    "role",
                    f"driver {self.driver!r} serves role {_choices(sorted(roles))}, "
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
    stopbits: Annotated[float, BeforeValidator(_stopbits)] = 1

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

    def to_backoff(self) -> Backoff:
        return Backoff(initial=self.initial, cap=self.cap)


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
            if not _CREDENTIAL.match(self.password_credential):
                raise KeyedValueError(
                    "password_credential",
                    f"expected a systemd credential name, got {self.password_credential!r}",
                )
            directory = os.environ.get("CREDENTIALS_DIRECTORY")
            if _context(info).get("check_files") and directory:
                problem = _file_problem(Path(directory) / self.password_credential)
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
            return _read_secret(self.password_file)
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
            return _read_secret(Path(directory) / self.password_credential)
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
    remote_dealer_input: bool = Field(
        default=False,
        description="accept dealer input (dice, seats, settings, void) from other hosts",
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
            None if self.supervisor_token_file is None else _read_secret(self.supervisor_token_file)
        )

    def read_void_pin(self) -> str | None:
        return None if self.void_pin_file is None else _read_secret(self.void_pin_file)


class JournalConfig(_Model):
    """``[journal]``: the SQLite journal (controller/journal.py)."""

    path: ConfigPath = DEFAULT_JOURNAL_PATH
    synchronous: Literal["FULL", "NORMAL"] = "FULL"


class LoggingConfig(_Model):
    """``[logging]``: level, and JSON lines or readable console output ("auto" picks)."""

    level: Annotated[
        Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], BeforeValidator(_level)
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


# --- loading and reporting ---------------------------------------------------------------------


_TOML_TYPES: dict[type, str] = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a float",
    dict: "a table",
    list: "an array",
}


def _describe(value: object) -> str:
    kind = next((name for t, name in _TOML_TYPES.items() if type(value) is t), type(value).__name__)
    if isinstance(value, dict | list):
        return kind
    return f"{kind} {value!r}"


def _choices(values: Sequence[object]) -> str:
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]


def _model_at(parts: Sequence[str], raw_loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model whose keys live at ``parts`` (for listing the keys it accepts)."""
    model: type[BaseModel] = Config
    i = 0
    while i < len(parts):
        if model is Config and parts[i] == "devices":
            if i + 1 >= len(parts):
                return None
            tag = next((p for p in raw_loc if isinstance(p, str) and p in TRANSPORTS), None)
            by_tag: dict[str, type[BaseModel]] = {
                "serial": SerialDevice,
                "tcp": TcpDevice,
                "usb": UsbDevice,
            }
            model = by_tag.get(tag or "", SoftwareDevice)
            i += 2
            continue
        field = model.model_fields.get(parts[i])
        sub = _submodel(field.annotation) if field else None
        if sub is None:
            return None
        model = sub
        i += 1
    return model


def _submodel(annotation: object) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def _clean_loc(loc: Sequence[int | str]) -> list[str]:
    parts: list[str] = []
    for i, part in enumerate(loc):
        text = str(part)
        if text == "[key]" or ("[" in text and text.endswith("]")):
            continue
        # The discriminated union puts the transport tag after the device name.
        if i == 2 and loc[0] == "devices" and text in TRANSPORTS:
            continue
        parts.append(text)
    return parts


def _message(error: Mapping[str, Any], parts: list[str], raw_loc: Sequence[int | str]) -> str:
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "value_error":
        exc = ctx.get("error")
        if isinstance(exc, KeyedValueError):
            parts.extend(exc.key.split("."))
        return str(exc) if exc is not None else str(error["msg"])
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        model = _model_at(parts[:-1], raw_loc)
        if model is None:
            return "unknown key"
        keys = list(model.model_fields)
        close = difflib.get_close_matches(parts[-1], keys, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"unknown key{hint}: expected one of {', '.join(keys)}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        if kind == "union_tag_not_found":
            parts.append("transport")
            return f"required key is missing: expected {_choices(TRANSPORTS)}"
        parts.append("transport")
        return f"expected {_choices(TRANSPORTS)}, got {ctx.get('tag')!r}"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a table, got {_describe(value)}"
    if kind == "bool_type":
        return f"expected true or false, got {_describe(value)}"
    msg = str(error["msg"])
    expected = msg.removeprefix("Input should be ").removeprefix("Value should be ")
    if expected.startswith(("greater", "less")):
        expected = "a number " + expected
    return f"expected {expected}, got {_describe(value)}"


def _issues(file: str, exc: ValidationError) -> list[ConfigIssue]:
    issues: list[ConfigIssue] = []
    for error in exc.errors(include_url=False):
        raw_loc = error["loc"]
        parts = _clean_loc(raw_loc)
        message = _message(error, parts, raw_loc)
        issue = ConfigIssue(file, ".".join(parts) or "(top level)", message)
        if issue not in issues:
            issues.append(issue)
    return issues


_TOML_POSITION = re.compile(r"^(?P<msg>.*) \(at (?P<where>line \d+, column \d+|end of document)\)$")


def _syntax_issue(file: str, exc: tomllib.TOMLDecodeError) -> ConfigIssue:
    text = str(exc)
    match = _TOML_POSITION.match(text)
    if match is None:
        return ConfigIssue(file, "(syntax)", f"invalid TOML: {text}")
    where = match["where"]
    return ConfigIssue(file, where, f"invalid TOML: {match['msg']}")


def parse_config(
    text: str,
    *,
    file: str = "<config>",
    base_dir: Path | None = None,
    check_files: bool = True,
    known_drivers: Mapping[str, Collection[str]] | None = None,
) -> Config:
    """Validate TOML ``text`` as a config; raises ConfigError listing every problem."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([_syntax_issue(file, exc)]) from None
    context: dict[str, object] = {"check_files": check_files}
    if base_dir is not None:
        context["base_dir"] = base_dir
    if known_drivers is not None:
        context["known_drivers"] = known_drivers
    try:
        return Config.model_validate(data, context=context)
    except ValidationError as exc:
        raise ConfigError(_issues(file, exc)) from None


def load_config(
    path: str | os.PathLike[str],
    *,
    known_drivers: Mapping[str, Collection[str]] | None = None,
) -> Config:
    """Read and validate the config file at ``path``.

    Raises ConfigError whose ``errors`` name the file, the dotted key and what was expected, for
    an unreadable file, a TOML syntax error (with line and column), unknown keys, wrong types,
    bad values, cross-field errors and referenced files that are missing or unreadable. With
    ``known_drivers`` (driver name → roles it serves) driver names and roles are checked too.
    """
    file = os.fspath(path)
    try:
        raw = Path(file).read_bytes()
    except OSError as exc:
        raise ConfigError([ConfigIssue(file, "(file)", f"cannot read: {exc.strerror}")]) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [ConfigIssue(file, "(file)", f"expected UTF-8 text: byte {exc.start} is not UTF-8")]
        ) from None
    return parse_config(
        text, file=file, base_dir=Path(file).resolve().parent, known_drivers=known_drivers
    )


def _device_summary(name: str, device: AnyDevice) -> str:
    where: str
    if isinstance(device, SerialDevice):
        line = f"{device.bytesize}{device.parity}{device.stopbits:g}"
        where = f"{device.port} {device.baudrate} {line}"
    elif isinstance(device, TcpDevice):
        where = f"tcp {device.host}:{device.port}"
    elif isinstance(device, UsbDevice):
        where = f"usb {device.vendor_id:04x}:{device.product_id:04x}"
    else:
        where = "software"
    return f"{name} ({device.role}, {device.driver}, {where})"


def summary(config: Config) -> list[str]:
    """Short human summary of a valid config (no secrets)."""
    t = config.table
    seats = ", ".join(f"{p}→{label}" for p, label in sorted(t.seats.items()))
    lines = [
        f"table {t.id} ({t.name}) at site {t.site}; seats {seats}",
        f"rules: wheel {config.rules.wheel_rank}, ace-high pushes pai gow "
        f"{'on' if config.rules.ace_high_pushes_pai_gow else 'off'}; paytables: Chan Chu "
        f"{config.paytables.chan_chu}{' with envy' if config.paytables.envy else ''}, "
        f"Jacks Beat {config.paytables.jacks_beat}",
        "devices: " + "; ".join(_device_summary(n, d) for n, d in config.devices.items()),
    ]
    m = config.mqtt
    if m.enabled:
        auth = f" as {m.username}" if m.username else ""
        lines.append(
            f"mqtt: {'mqtts' if m.tls else 'mqtt'}://{m.host}:{m.port} (MQTT {m.protocol}){auth}, "
            f"client {m.client_id}, topics {m.topic_prefix}…"
        )
        if m.password_credential and not os.environ.get("CREDENTIALS_DIRECTORY"):
            lines.append(
                f"note: systemd credential {m.password_credential!r} not checked "
                "($CREDENTIALS_DIRECTORY is not set outside the service)"
            )
    else:
        lines.append("mqtt: off")
    d = config.display
    lines.append(
        f"display: http://{d.host}:{d.port}/ "
        + ("(supervisor token set)" if d.supervisor_token_file else "(no supervisor token)")
        if d.enabled
        else "display: off"
    )
    lines.append(f"journal: {config.journal.path} (synchronous {config.journal.synchronous})")
    return lines
