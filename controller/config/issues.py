"""Config problems: each names the file, the dotted key and what was expected."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

#: Exit status for "configuration error" (sysexits.h EX_CONFIG); the unit file does not restart
#: the daemon on it (RestartPreventExitStatus=78).
EXIT_CONFIG_ERROR = 78


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


_TOML_TYPES: dict[type, str] = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a float",
    dict: "a table",
    list: "an array",
}


def describe_value(value: object) -> str:
    kind = next((name for t, name in _TOML_TYPES.items() if type(value) is t), type(value).__name__)
    if isinstance(value, dict | list):
        return kind
    return f"{kind} {value!r}"


def choices(values: Sequence[object]) -> str:
    shown = [repr(v) for v in values]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " or " + shown[-1]
