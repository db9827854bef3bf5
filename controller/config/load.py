"""Reading a config file: TOML to models, every problem turned into one ConfigIssue."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from controller.config.fields import TRANSPORTS
from controller.config.issues import (
    ConfigError,
    ConfigIssue,
    KeyedValueError,
    choices,
    describe_value,
)
from controller.config.models import Config, SerialDevice, SoftwareDevice, TcpDevice, UsbDevice

# --- loading and reporting ---------------------------------------------------------------------


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
        return _value_error_message(error, ctx, parts)
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        return _unknown_key_message(parts, raw_loc)
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        parts.append("transport")
        if kind == "union_tag_not_found":
            return f"required key is missing: expected {choices(TRANSPORTS)}"
        return f"expected {choices(TRANSPORTS)}, got {ctx.get('tag')!r}"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"expected a table, got {describe_value(value)}"
    if kind == "bool_type":
        return f"expected true or false, got {describe_value(value)}"
    msg = str(error["msg"])
    expected = msg.removeprefix("Input should be ").removeprefix("Value should be ")
    if expected.startswith(("greater", "less")):
        expected = "a number " + expected
    return f"expected {expected}, got {describe_value(value)}"


def _value_error_message(error: Mapping[str, Any], ctx: Mapping[str, Any], parts: list[str]) -> str:
    """A validator's ValueError: its words; a KeyedValueError's key extends ``parts``."""
    exc = ctx.get("error")
    if isinstance(exc, KeyedValueError):
        parts.extend(exc.key.split("."))
    return str(exc) if exc is not None else str(error["msg"])


def _unknown_key_message(parts: list[str], raw_loc: Sequence[int | str]) -> str:
    """An unknown key (``parts[-1]``): the keys its table takes, and the closest one."""
    model = _model_at(parts[:-1], raw_loc)
    if model is None:
        return "unknown key"
    keys = list(model.model_fields)
    close = difflib.get_close_matches(parts[-1], keys, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown key{hint}: expected one of {', '.join(keys)}"


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
