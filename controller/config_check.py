"""One check of a config file for `check-config` and `run`: every error at once, and warnings.

Errors stop `run` (exit 78) and fail `check-config`: TOML syntax, unknown keys, wrong types and
values, cross-field rules, unknown drivers (asked of ``drivers/registry.py``) and device
sections their driver refuses, and every file the config names (``files.py``): missing,
unreadable, refused by the code that reads it at run time, or too permissive (a secret
readable by everyone or writable by others than its owner). A device section is also built on
its own, so a driver's refusal is reported beside errors elsewhere in the file instead of
after they are fixed.

Warnings do not stop anything but say what an operator should know: a ``[paytables]`` section
left out (the defaults used are named), a serial port that does not exist yet, a void PIN
shorter than 6 digits, a supervisor token shorter than 32 characters, voids, acknowledgements
and corrections attributed to a typed name under the shared void PIN (no supervisors file), a
void PIN a supervisors file leaves unused.
"""

from __future__ import annotations

import difflib
import os
import sys
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from controller.config.files import file_issues
from controller.config.issues import ConfigError, ConfigIssue, choices
from controller.config.load import parse_config
from controller.config.models import (
    AnyDevice,
    Config,
    DeviceConfig,
    DisplayConfig,
    PaytablesConfig,
    SerialDevice,
)
from controller.config.summary import summary
from controller.credentials import SUPERVISOR_PIN_DIGITS, TOKEN_CHARS, pin_problem, token_problem
from controller.devices import build_device, known_drivers

MIN_PIN_DIGITS: Final = SUPERVISOR_PIN_DIGITS
MIN_TOKEN_CHARS: Final = TOKEN_CHARS

M = TypeVar("M", bound=BaseModel)


@dataclass
class CheckResult:
    """``config`` is None when there is any error."""

    config: Config | None
    errors: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)


def check_config(path: str | os.PathLike[str]) -> CheckResult:
    """Every error and warning of the config file at ``path``, in one pass."""
    file = os.fspath(path)
    base = Path(file).resolve().parent
    try:
        text = Path(file).read_bytes().decode("utf-8")
    except OSError as exc:
        return CheckResult(None, [ConfigIssue(file, "(file)", f"cannot read: {exc.strerror}")])
    except UnicodeDecodeError as exc:
        message = f"expected UTF-8 text: byte {exc.start} is not UTF-8"
        return CheckResult(None, [ConfigIssue(file, "(file)", message)])
    drivers = known_drivers()
    config: Config | None = None
    errors: list[ConfigIssue] = []
    try:
        config = parse_config(text, file=file, base_dir=base, known_drivers=drivers)
    except ConfigError as exc:
        errors = list(exc.errors)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return CheckResult(None, errors)  # the syntax error is the one issue there is
    context = {"check_files": False, "base_dir": base, "known_drivers": drivers}
    devices = _devices(data, context)
    for name, dev in devices.items():
        try:
            build_device(name, dev)
        except (TypeError, ValueError) as exc:
            errors.append(ConfigIssue(file, f"devices.{name}", str(exc)))
    errors.extend(file_issues(file, data, base))
    way = config.rules.house_way if config is not None else _way_named(data, context)
    if way is not None:  # checked beside every other error, not only once they are fixed
        errors.extend(way_issues(file, way))
    # A driver the model refused too (it does only when the rest of its section is valid) is
    # told once, where the model told it, by the pass that says what was meant.
    drivers_told = {i.key: i for i in _driver_issues(file, data, drivers)}
    errors = [drivers_told.pop(i.key) if i.key in drivers_told else i for i in errors]
    errors.extend(drivers_told.values())
    warnings = list(_warnings(file, data, context, devices))
    errors = list(dict.fromkeys(errors))  # the same issue from both passes, once
    return CheckResult(None if errors else config, errors, warnings)


def _driver_issues(
    file: str, data: Mapping[str, Any], drivers: Mapping[str, object]
) -> Iterable[ConfigIssue]:
    """Every device's driver name, checked on its own: the section's model checks it only
    when the rest of the section is valid, so a misspelt driver beside a misspelt key was
    hidden until the key was fixed."""
    raw = data.get("devices")
    if not isinstance(raw, Mapping):
        return
    for name, section in raw.items():
        driver = section.get("driver") if isinstance(section, Mapping) else None
        if not isinstance(driver, str) or driver in drivers:
            continue
        close = difflib.get_close_matches(driver, sorted(drivers), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        yield ConfigIssue(
            file,
            f"devices.{name}.driver",
            f"unknown driver {driver!r}{hint}: expected one of {choices(sorted(drivers))}",
        )


def _section(model: type[M], raw: object, context: Mapping[str, object]) -> M | None:
    """One section validated on its own (None when it has errors: those are already reported)."""
    try:
        return model.model_validate(raw if raw is not None else {}, context=context)
    except ValidationError:
        return None


def _devices(data: Mapping[str, Any], context: Mapping[str, object]) -> dict[str, AnyDevice]:
    """The device sections that are valid by themselves."""
    raw = data.get("devices")
    if not isinstance(raw, Mapping):
        return {}
    adapter: TypeAdapter[AnyDevice] = TypeAdapter(DeviceConfig)
    out: dict[str, AnyDevice] = {}
    for name, section in raw.items():
        try:
            out[str(name)] = adapter.validate_python(section, context=context)
        except ValidationError:
            continue
    return out


def _warnings(
    file: str,
    data: Mapping[str, Any],
    context: Mapping[str, object],
    devices: Mapping[str, AnyDevice],
) -> Iterable[ConfigIssue]:
    if "paytables" not in data:
        p = PaytablesConfig()
        yield ConfigIssue(
            file,
            "paytables",
            f"section missing: using the defaults, Chan Chu {p.chan_chu}, Jacks Beat "
            f"{p.jacks_beat}, envy {'on' if p.envy else 'off'} (docs/rules.md); "
            "state the table's paytables",
        )
    for name, dev in devices.items():
        if isinstance(dev, SerialDevice) and "://" not in str(dev.port) and not dev.port.exists():
            yield ConfigIssue(
                file,
                f"devices.{name}.port",
                f"{dev.port} does not exist (yet): the driver keeps retrying until it appears",
            )
    display = _section(DisplayConfig, data.get("display"), context)
    if display is not None:
        if display.void_pin_file is not None:
            yield from _secret_warnings(file, "display.void_pin_file", display.void_pin_file)
        if display.supervisor_token_file is not None:
            key, path = "display.supervisor_token_file", display.supervisor_token_file
            yield from _secret_warnings(file, key, path)
        yield from _supervisor_warnings(file, display)


def _supervisor_warnings(file: str, display: DisplayConfig) -> Iterable[ConfigIssue]:
    """Whom the display names for a void, an acknowledgement or a correction (docs/audit.md):
    a badge checked against the supervisors file, or, without one, a name typed under the one
    shared void PIN."""
    if not display.enabled:
        return
    if display.supervisors_file is None and display.void_pin_file is not None:
        yield ConfigIssue(
            file,
            "display.supervisors_file",
            "not set: voids, acknowledgements and corrections at the display are allowed by the "
            "one shared void PIN and attributed to a name typed beside it, which nobody checks; "
            "expected a supervisors file ('BADGE pbkdf2_sha256$…' a line, made by 'paigow-table "
            "supervisor-pin BADGE') so that each is attributed to a supervisor's badge",
        )
    elif display.supervisors_file is not None and display.void_pin_file is not None:
        yield ConfigIssue(
            file,
            "display.void_pin_file",
            "not used: with supervisors_file a void, an acknowledgement or a correction needs a "
            "supervisor's badge and PIN, never the shared PIN; remove void_pin_file",
        )


def _secret_warnings(file: str, key: str, path: Path) -> Iterable[ConfigIssue]:
    """A void PIN or supervisor token that works but is weak (its file's mode and whether it
    can be read at all are errors: files.py)."""
    try:
        value = path.read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError):
        return
    if key == "display.void_pin_file" and pin_problem(value, MIN_PIN_DIGITS):
        yield ConfigIssue(
            file,
            key,
            f"the void PIN is shorter than {MIN_PIN_DIGITS} digits: expected a longer one",
        )
    if key == "display.supervisor_token_file" and token_problem(value):
        yield ConfigIssue(
            file,
            key,
            f"the supervisor token has {len(value)} characters: expected at least "
            f"{MIN_TOKEN_CHARS} (e.g. `openssl rand -hex 32`)",
        )


def _way_named(data: Mapping[str, Any], context: Mapping[str, object]) -> str | None:
    """``[rules] house_way`` read on its own, as the model reads it (a path relative to the
    config's directory), when the rest of the file has errors; None if it is not set or the
    model already refused the value itself."""
    from controller.config.fields import WayRef

    rules = data.get("rules")
    if not isinstance(rules, Mapping) or "house_way" not in rules:
        return None
    try:
        way: str = TypeAdapter(WayRef).validate_python(rules["house_way"], context=context)
    except ValidationError:
        return None
    return way


def way_issues(file: str, house_way: str) -> list[ConfigIssue]:
    """The House Way named by ``[rules] house_way``: a shipped way, or a way file that parses
    (its errors name the line) and passed its full check (``paigow-table house-way check``;
    controller/game/way/proof.py)."""
    from controller.game.way import WaySyntaxError, load_way, shipped_ways
    from controller.game.way.proof import proof_problem

    key = "rules.house_way"
    try:
        way = load_way(house_way)
    except WaySyntaxError as exc:
        return [ConfigIssue(file, key, str(exc))]
    except FileNotFoundError as exc:  # names the shipped ways
        return [ConfigIssue(file, key, str(exc))]
    except OSError as exc:
        return [ConfigIssue(file, key, f"{house_way}: cannot read: {exc.strerror}")]
    problem = proof_problem(way, None if house_way in shipped_ways() else house_way)
    return [ConfigIssue(file, key, problem)] if problem else []


def load_checked(path: str | os.PathLike[str]) -> tuple[Config, list[ConfigIssue]]:
    """The config and its warnings; ConfigError with every error otherwise (for `run`)."""
    result = check_config(path)
    if result.config is None:
        raise ConfigError(result.errors)
    return result.config, result.warnings


def check_config_main(
    path: str | os.PathLike[str], *, stdout: TextIO | None = None, stderr: TextIO | None = None
) -> int:
    """``paigow-table check-config FILE``: every error as ``FILE: KEY: MESSAGE`` and every
    warning as ``FILE: KEY: warning: MESSAGE`` on stderr; 1 with errors, else 0 and a short
    summary on stdout."""
    out = stdout if stdout is not None else sys.stdout
    err = stderr if stderr is not None else sys.stderr
    result = check_config(path)
    for issue in result.errors:
        print(issue, file=err)
    for warning in result.warnings:
        print(f"{warning.file}: {warning.key}: warning: {warning.message}", file=err)
    if result.config is None:
        return 1
    print(f"{os.fspath(path)}: OK", file=out)
    for line in summary(result.config):
        print(f"  {line}", file=out)
    return 0
