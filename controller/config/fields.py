"""Field types of the config: validated scalars, paths relative to the file, secrets."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ValidationInfo,
)

from controller.config.issues import ConfigError, ConfigIssue, describe_value

Role = Literal["cards", "position", "pole"]
TRANSPORTS: tuple[str, ...] = ("serial", "tcp", "usb", "none")

DEFAULT_SEATS: dict[int, str] = {position: str(position - 1) for position in range(2, 8)}
DEFAULT_TOPIC_PREFIX = "casino/{site}/paigow/{table}/"
DEFAULT_JOURNAL_PATH = Path("/var/lib/paigow-table/journal.sqlite3")

_SLUG = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_-]{0,30}[A-Za-z0-9])?$")
DRIVER_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
CREDENTIAL_NAME = re.compile(r"^[A-Za-z0-9_.@-]{1,255}$")


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
        raise ValueError(f"expected a file path string, got {describe_value(value)}")
    base = validation_context(info).get("base_dir")
    if isinstance(base, Path) and not value.is_absolute():
        value = base / value
    return value


def _way_ref(value: object, info: ValidationInfo) -> str:
    """A shipped House Way by name (``dealer-open``, ``classic``), or a way file: a path (with a
    ``/`` or ending in ``.toml``), relative to the config file's directory."""
    if isinstance(value, str) and value and "/" not in value and not value.endswith(".toml"):
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,63}", value):
            raise ValueError(
                f"expected a shipped way's name (such as dealer-open or classic) or a way "
                f"file's path, got {value!r}"
            )
        return value
    return str(_path(value, info))


def _readable_if_checking(value: Path, info: ValidationInfo) -> Path:
    if validation_context(info).get("check_files"):
        problem = file_problem(value)
        if problem:
            raise ValueError(problem)
    return value


def option_value(value: object) -> object:
    if not isinstance(value, str | int | float | bool):
        raise ValueError(f"expected a string, number or boolean, got {describe_value(value)}")
    return value


def stopbits_value(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value not in (1, 1.5, 2):
        raise ValueError(f"expected 1, 1.5 or 2, got {describe_value(value)}")
    return value


def log_level(value: object) -> object:
    return value.upper() if isinstance(value, str) else value


Slug = Annotated[str, AfterValidator(_slug)]
Position = Annotated[int, BeforeValidator(_position)]
SeatLabel = Annotated[str, AfterValidator(_seat_label)]
IpPort = Annotated[int, AfterValidator(_ip_port)]
ListenPort = Annotated[int, AfterValidator(_listen_port)]
UsbId = Annotated[int, BeforeValidator(_usb_id)]
Endpoint = Annotated[int, BeforeValidator(_endpoint)]
ConfigPath = Annotated[Path, BeforeValidator(_path)]
WayRef = Annotated[str, BeforeValidator(_way_ref)]
ReadableFile = Annotated[Path, BeforeValidator(_path), AfterValidator(_readable_if_checking)]


def validation_context(info: ValidationInfo) -> Mapping[str, object]:
    return info.context if isinstance(info.context, Mapping) else {}


def file_problem(path: Path) -> str | None:
    if not path.exists():
        return f"file not found: {path} (expected an existing, readable file)"
    if not path.is_file():
        return f"not a regular file: {path} (expected an existing, readable file)"
    if not os.access(path, os.R_OK):
        return f"file not readable by this user: {path} (expected an existing, readable file)"
    return None


def read_secret(path: Path) -> str:
    """A secret file's text without its trailing newline; ConfigError when it cannot be read,
    is not UTF-8 or is empty."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise ConfigError(
            [ConfigIssue(str(path), "(file)", f"cannot read: {exc.strerror}")]
        ) from None
    except UnicodeDecodeError as exc:
        message = f"expected UTF-8 text: byte {exc.start} is not UTF-8"
        raise ConfigError([ConfigIssue(str(path), "(file)", message)]) from None
    secret = text.rstrip("\r\n")
    if not secret:
        raise ConfigError([ConfigIssue(str(path), "(file)", "the file is empty")])
    return secret
