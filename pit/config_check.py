"""``paigow-table pit check-config FILE`` and the check ``pit run`` makes first: every error of a
pit config at once, as the table's ``check-config`` reports them (``FILE: KEY: MESSAGE``,
``controller.config.issues``), never a traceback.

Errors: TOML syntax; unknown keys (with the key meant, ``did you mean``, and the keys there
are); wrong types and values; every file the config names, read as the pit reads it (secrets
with ``read_secret``, keys with ``read_hex_key``, the supervisors file with the table's
reader): missing, a directory, unreadable, readable by everyone, not hex; the SQLite file's
directory missing; a page off loopback without ``token_file``; an unknown time zone.

Not checked (the pit says so when it runs, and keeps retrying): whether the broker and a
PostgreSQL database answer, and whether the broker accepts the pit's credentials.
"""

from __future__ import annotations

import difflib
import os
import sys
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, ValidationError

from controller.config.files import mode_problem
from controller.config.issues import ConfigIssue, choices, describe_value
from pit.config import PitConfig, PitConfigError, read_hex_key, read_secret

#: The files a pit config names, by dotted key, and how the pit reads each.
SECRETS = ("broker.password_file", "web.token_file")
KEYS = ("record.checkpoint_key_file", "commands.key_file", "shift.report_key_file")
TLS_KEYS = ("broker.key_file", "web.key_file")
PLAIN = ("broker.ca_file", "broker.cert_file", "web.cert_file", "commands.supervisors_file")


@dataclass
class PitCheck:
    """``config`` is None when there is any error."""

    config: PitConfig | None
    errors: list[ConfigIssue] = field(default_factory=list)
    warnings: list[ConfigIssue] = field(default_factory=list)


def check_pit_config(path: str | os.PathLike[str]) -> PitCheck:
    file = os.fspath(path)
    try:
        text = Path(file).read_bytes().decode("utf-8")
    except IsADirectoryError:
        return PitCheck(None, [ConfigIssue(file, "(file)", "is a directory, not a file")])
    except OSError as exc:
        return PitCheck(None, [ConfigIssue(file, "(file)", f"cannot read: {exc.strerror}")])
    except UnicodeDecodeError as exc:
        message = f"expected UTF-8 text: byte {exc.start} is not UTF-8"
        return PitCheck(None, [ConfigIssue(file, "(file)", message)])
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return PitCheck(None, [ConfigIssue(file, "(toml)", str(exc))])
    config: PitConfig | None = None
    errors: list[ConfigIssue] = []
    try:
        config = PitConfig.model_validate(data)
    except ValidationError as exc:
        errors += [_issue(file, data, e) for e in exc.errors()]
    errors += file_issues(file, data)
    errors += _rule_issues(file, data)
    errors = list(dict.fromkeys(errors))
    return PitCheck(None if errors else config, errors, list(_warnings(file, data)))


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model whose keys ``loc`` (without its last part) names, if any."""
    model: type[BaseModel] = PitConfig
    for part in loc:
        info = model.model_fields.get(str(part))
        kind = info.annotation if info is not None else None
        if not (isinstance(kind, type) and issubclass(kind, BaseModel)):
            return None
        model = kind
    return model


def _issue(file: str, data: Mapping[str, Any], error: Any) -> ConfigIssue:
    loc = tuple(error["loc"])
    key = ".".join(str(p) for p in loc) or "(top)"
    if error["type"] == "extra_forbidden":
        model = _model_at(loc[:-1])
        known = sorted(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        where = f"[{'.'.join(str(p) for p in loc[:-1])}]" if len(loc) > 1 else "the top level"
        return ConfigIssue(
            file, key, f"unknown key{hint}: {where} has {choices(known) if known else 'none'}"
        )
    if error["type"] == "missing":
        return ConfigIssue(file, key, "missing: this key is required")
    message = str(error["msg"]).removeprefix("Value error, ")
    if "input" in error and error["type"] != "value_error":
        message += f", got {describe_value(error['input'])}"
    return ConfigIssue(file, key, message)


def _get(data: Mapping[str, Any], key: str) -> Any:
    node: Any = data
    for part in key.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _file_problem(path: Path, read: Callable[[Path], object], secret: bool) -> str | None:
    if not path.exists():
        return f"{path}: no such file"
    if path.is_dir():
        return f"{path}: is a directory, not a file"
    problem = mode_problem(path, secret=secret)
    if problem is not None:
        return problem
    try:
        read(path)
    except PitConfigError as exc:
        return str(exc)
    except OSError as exc:
        return f"{path}: cannot be read: {exc.strerror}"
    except (UnicodeDecodeError, ValueError) as exc:
        return f"{path}: cannot be used: {exc}"
    return None


def _read_plain(path: Path) -> object:
    return path.read_bytes()


def _read_supervisors(path: Path) -> object:
    from controller.config.readers import read_supervisors

    return read_supervisors(path)


def _read_feed_keys(path: Path) -> object:
    from pit.keys import parse_keys

    return parse_keys(path.read_text(encoding="utf-8"), str(path))


Reader = Callable[[Path], object]


def _files(data: Mapping[str, Any]) -> Iterable[tuple[str, Path, Reader, bool]]:
    """(key, path, reader, secret) of every file named (a value not a string: pydantic's)."""
    named: list[tuple[str, Any, Reader, bool]] = [
        (k, _get(data, k), read_secret, True) for k in SECRETS
    ]
    named += [(k, _get(data, k), read_hex_key, True) for k in KEYS]
    named += [(k, _get(data, k), _read_plain, True) for k in TLS_KEYS]
    named += [
        (k, _get(data, k), _read_supervisors if k.startswith("commands.") else _read_plain, False)
        for k in PLAIN
    ]
    # The tables' public keys: not secret, read as the pit reads them (pit/keys.py).
    named.append(
        ("record.feed_keys_file", _get(data, "record.feed_keys_file"), _read_feed_keys, False)
    )
    per_table = _get(data, "record.checkpoint_keys")
    if isinstance(per_table, Mapping):
        named += [
            (f"record.checkpoint_keys.{t}", v, read_hex_key, True) for t, v in per_table.items()
        ]
    for key, value, read, secret in named:
        if isinstance(value, str):
            yield key, Path(value), read, secret


def file_issues(file: str, data: Mapping[str, Any]) -> list[ConfigIssue]:
    """Every file the config names, read as the pit reads it; the SQLite file's directory."""
    out = []
    for key, path, read, secret in _files(data):
        problem = _file_problem(path, read, secret)
        if problem is not None:
            out.append(ConfigIssue(file, key, problem))
    url = _get(data, "database.url")
    if not url:
        db = Path(str(_get(data, "database.path") or "/var/lib/paigow-pit/pit.sqlite3"))
        if not db.parent.is_dir():
            out.append(
                ConfigIssue(
                    file,
                    "database.path",
                    f"{db.parent}: no such directory (the package makes /var/lib/paigow-pit; "
                    "or set [database] url to PostgreSQL)",
                )
            )
    elif isinstance(url, str) and not url.startswith(("postgresql://", "postgres://", "sqlite:")):
        out.append(ConfigIssue(file, "database.url", "expected postgresql://… or sqlite:///…"))
    return out


def _rule_issues(file: str, data: Mapping[str, Any]) -> Iterable[ConfigIssue]:
    from controller.http_rules import is_loopback_host

    web = _get(data, "web")
    web = web if isinstance(web, Mapping) else {}
    host = web.get("host", "127.0.0.1")
    if web.get("enabled", True) and isinstance(host, str) and not is_loopback_host(host):
        if not web.get("token_file"):
            yield ConfigIssue(
                file, "web.token_file", f"required: [web] host = {host!r} is not loopback"
            )
        if not web.get("allowed_hosts"):
            yield ConfigIssue(
                file,
                "web.allowed_hosts",
                "required off loopback: the names the page is reached by (e.g. ['pit.example'])",
            )
    zone = _get(data, "shift.timezone")
    if isinstance(zone, str):
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            yield ConfigIssue(
                file, "shift.timezone", f"unknown time zone {zone!r} (e.g. 'Europe/London')"
            )


def _warnings(file: str, data: Mapping[str, Any]) -> Iterable[ConfigIssue]:
    if _get(data, "record.checkpoint_key_file") is None and not _get(
        data, "record.checkpoint_keys"
    ):
        yield ConfigIssue(
            file,
            "record.checkpoint_key_file",
            "not set: the tables' checkpoints are kept but not checked",
        )
    if _get(data, "commands.supervisors_file") is None:
        yield ConfigIssue(
            file,
            "commands.supervisors_file",
            "not set: nobody can acknowledge an alarm from the pit page",
        )


def check_pit_config_main(
    path: str, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Every error as ``FILE: KEY: MESSAGE`` and warning as ``FILE: KEY: warning: …`` on
    stderr; 1 with errors (a finding, as the table's ``check-config``; ``pit run`` exits 78 on
    them), else 0 and ``FILE: OK``."""
    from controller.exits import existing_file

    existing_file(path, "config")  # 66 / 74, one line
    stdout, stderr = out or sys.stdout, err or sys.stderr
    result = check_pit_config(path)
    for issue in result.errors:
        print(issue, file=stderr)
    for w in result.warnings:
        print(f"{w.file}: {w.key}: warning: {w.message}", file=stderr)
    if result.config is None:
        print(f"{path}: {len(result.errors)} error(s)", file=stderr)
        return 1
    c = result.config
    print(f"{path}: OK (site {c.site.id}, broker {c.broker.host}:{c.broker.port})", file=stdout)
    return 0
