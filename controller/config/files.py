"""Every file a config names, read when the config is checked by the code that reads it when the
table runs, and its mode checked. ``check.py`` adds these errors to the rest, so `check-config`
and `run` (exit 78) refuse the same files with the same lines, and no service meets a file it
cannot use (before, a bad ``checkpoint_key_file`` passed `check-config` and stopped `run` with a
traceback, which systemd restarted every 2 s).

``parse_config`` already refuses a file that is missing, not a regular file or unreadable by this
user. Here each one is also read as the table reads it:

- ``mqtt.password_file``, ``display.supervisor_token_file``, ``display.void_pin_file`` and the
  systemd credential of ``mqtt.password_credential``: ``read_secret`` (UTF-8, not empty);
- ``mqtt.command_keys_file``: ``read_keys`` (every key's type named);
- ``mqtt.checkpoint_key_file``: ``controller.journal.checkpoints.read_hex_key``;
- ``mqtt.feed_key_file``: ``read_feed_key``;
- ``display.dealers_file``: ``read_dealers``;
- ``display.supervisors_file``: ``read_supervisors``;
- ``display.kiosk_token_file``: ``read_kiosk_token`` (32+ characters);
- ``mqtt.tls``: ``tls_context``, for the CA, then the certificate and key.

The readers (but the journal's) live in ``controller/config/readers.py``, below the services that
use them, so the config imports nothing of ``mqtt/`` or ``display/``.

A secret (every file but the CA and the client certificate) readable or writable by others than
its owner is refused; so is a CA or certificate others may write. The readers load nothing of the
services (``cryptography`` only for an Ed25519 key), so a table without MQTT or a display loads
neither.
"""

from __future__ import annotations

import os
import re
import ssl
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pydantic import TypeAdapter, ValidationError

from controller.config.fields import CREDENTIAL_NAME, ConfigPath, file_problem, read_secret
from controller.config.issues import ConfigError, ConfigIssue
from controller.config.models import TlsConfig
from controller.config.readers import (
    read_dealers,
    read_feed_key,
    read_keys,
    read_kiosk_token,
    read_supervisors,
    tls_context,
)

#: A secret may be read and written by its owner alone; any file, by no one else written.
SECRET_BITS: Final = stat.S_IROTH | stat.S_IWGRP | stat.S_IWOTH
WRITE_BITS: Final = stat.S_IWGRP | stat.S_IWOTH


def _secret(path: Path) -> None:
    read_secret(path)


def _command_keys(path: Path) -> None:
    read_keys(path)


def _checkpoint_key(path: Path) -> None:
    from controller.journal.checkpoints import read_hex_key

    read_hex_key(path)


def _feed_key(path: Path) -> None:
    read_feed_key(path)


def _dealers(path: Path) -> None:
    read_dealers(path)


def _supervisors(path: Path) -> None:
    read_supervisors(path)


def _kiosk_token(path: Path) -> None:
    read_kiosk_token(path)


@dataclass(frozen=True)
class FileSetting:
    """A key naming a file: its section, whether it holds a secret, the reader the table uses
    (None: the TLS files, read together) and what it is expected to hold."""

    section: tuple[str, ...]
    name: str
    secret: bool
    read: Callable[[Path], None] | None
    expected: str

    @property
    def key(self) -> str:
        return ".".join((*self.section, self.name))


SETTINGS: Final[tuple[FileSetting, ...]] = (
    FileSetting(("mqtt",), "password_file", True, _secret, "the MQTT password"),
    FileSetting(
        ("mqtt",),
        "command_keys_file",
        True,
        _command_keys,
        "'key_id hmac-sha256 <secret hex>' or 'key_id ed25519 <public key hex>' a line "
        "(docs/mqtt.md)",
    ),
    FileSetting(
        ("mqtt",),
        "checkpoint_key_file",
        True,
        _checkpoint_key,
        "the key as hex digits, at least 32 bytes (e.g. `openssl rand -hex 32`)",
    ),
    FileSetting(
        ("mqtt",),
        "feed_key_file",
        True,
        _feed_key,
        "the table's Ed25519 private key in PEM (paigow-table feed-key init)",
    ),
    FileSetting(("mqtt", "tls"), "ca_file", False, None, "the broker's CA certificate in PEM"),
    FileSetting(("mqtt", "tls"), "cert_file", False, None, "the client certificate in PEM"),
    FileSetting(("mqtt", "tls"), "key_file", True, None, "the client certificate's key in PEM"),
    FileSetting(("display",), "supervisor_token_file", True, _secret, "the supervisor token"),
    FileSetting(("display",), "void_pin_file", True, _secret, "the void PIN"),
    FileSetting(
        ("display",),
        "dealers_file",
        True,
        _dealers,
        "'BADGE pbkdf2_sha256$…' a line",
    ),
    FileSetting(
        ("display",),
        "supervisors_file",
        True,
        _supervisors,
        "'BADGE pbkdf2_sha256$…' a line (paigow-table supervisor-pin BADGE)",
    ),
    FileSetting(
        ("display",),
        "kiosk_token_file",
        True,
        _kiosk_token,
        "the kiosk token, at least 32 characters (e.g. `openssl rand -hex 32`)",
    ),
)

_PATH: TypeAdapter[Path] = TypeAdapter(ConfigPath)


def mode_problem(path: Path, *, secret: bool) -> str | None:
    """Why ``path``'s mode lets others than its owner read a secret or write any file, or
    None."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # missing or unreadable: parse_config says so
    # A secret readable by its group is the usual root:paigow 0640 (the service reads a file it
    # cannot change); readable by everyone, or writable by anyone but its owner, is refused.
    readable = secret and bool(mode & stat.S_IROTH)
    writable = bool(mode & WRITE_BITS)
    if not (readable or writable):
        return None
    what = (
        "readable and writable"
        if readable and writable
        else "readable"
        if readable
        else ("writable")
    )
    expected = (
        "mode 0640 or stricter (e.g. root:paigow 0640, or paigow 0600)"
        if secret
        else "it writable by its owner only (e.g. mode 0644)"
    )
    return (
        f"{path} is {what} by {'everyone' if readable else 'others than its owner'} "
        f"(mode {stat.S_IMODE(mode):04o}): "
        f"expected {expected}"
    )


def file_issues(file: str, data: Mapping[str, Any], base: Path) -> list[ConfigIssue]:
    """Every problem of the files the config ``data`` (of ``file``, in ``base``) names: their
    modes, and what their readers refuse. Files parse_config refuses are left to it."""
    issues: list[ConfigIssue] = []
    paths: dict[str, Path] = {}
    for setting in SETTINGS:
        path = _path_of(data, setting, base)
        if path is None or file_problem(path) is not None:
            continue
        paths[setting.key] = path
        problem = mode_problem(path, secret=setting.secret)
        if problem is not None:
            issues.append(ConfigIssue(file, setting.key, problem))
        if setting.read is not None and (problem := _read(setting, path)) is not None:
            issues.append(ConfigIssue(file, setting.key, problem))
    issues.extend(_tls_issues(file, paths))
    issues.extend(_credential_issues(file, data))
    return issues


def _path_of(data: Mapping[str, Any], setting: FileSetting, base: Path) -> Path | None:
    """The setting's path as the config gives it (None when unset or not a path: the models
    report that)."""
    section: object = data
    for part in setting.section:
        section = section.get(part) if isinstance(section, Mapping) else None
    value = section.get(setting.name) if isinstance(section, Mapping) else None
    if value is None:
        return None
    try:
        return _PATH.validate_python(value, context={"base_dir": base})
    except ValidationError:
        return None


def _read(setting: FileSetting, path: Path) -> str | None:
    """What the setting's reader says of the file, or None when it takes it."""
    assert setting.read is not None
    try:
        setting.read(path)
    except ConfigError as exc:  # read_secret
        message = "; ".join(f"{path}: {issue.message}" for issue in exc.errors)
    except UnicodeDecodeError as exc:
        message = f"{path}: expected UTF-8 text: byte {exc.start} is not UTF-8"
    except OSError as exc:
        message = f"{path}: cannot read: {exc.strerror}"
    except ValueError as exc:
        message = str(exc) if str(exc).startswith(str(path)) else f"{path}: {exc}"
    else:
        return None
    return message if "expected" in message else f"{message}; expected {setting.expected}"


def _ssl_reason(exc: BaseException) -> str:
    """OpenSSL's reason without its source position: 'no certificate or crl found', 'PEM lib'."""
    if isinstance(exc, ssl.SSLError):
        if exc.reason:
            return str(exc.reason).replace("_", " ").lower()
        text = str(exc.args[1] if len(exc.args) > 1 else exc)
        return re.sub(r"^\[\w+\] | \(_ssl\.c:\d+\)$", "", text)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def _is_certificate(path: Path) -> bool:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cafile=str(path))
    except (ssl.SSLError, OSError, ValueError):
        return False
    return True


def _tls_issues(file: str, paths: Mapping[str, Path]) -> Iterable[ConfigIssue]:
    """The TLS files loaded as the MQTT service loads them: the CA, then the client certificate
    with its key (a failure is laid on the certificate when it is not one, else on the key)."""
    ca = paths.get("mqtt.tls.ca_file")
    cert = paths.get("mqtt.tls.cert_file")
    key = paths.get("mqtt.tls.key_file")
    if ca is None and (cert is None or key is None):
        return
    if ca is not None:
        try:
            tls_context(TlsConfig(ca_file=ca))
        except (ssl.SSLError, OSError, ValueError) as exc:
            yield ConfigIssue(
                file,
                "mqtt.tls.ca_file",
                f"{ca}: cannot load it as PEM certificates ({_ssl_reason(exc)}): expected the "
                "certificate of the CA that signed the broker's, in PEM",
            )
    if cert is None or key is None:
        return
    try:
        tls_context(TlsConfig(cert_file=cert, key_file=key))
    except ValueError as exc:  # encrypted
        yield ConfigIssue(file, "mqtt.tls.key_file", f"{key}: {exc}")
    except (ssl.SSLError, OSError) as exc:
        reason = _ssl_reason(exc)
        if not _is_certificate(cert):
            yield ConfigIssue(
                file,
                "mqtt.tls.cert_file",
                f"{cert}: cannot load it as a PEM certificate ({reason}): expected the table's "
                "client certificate in PEM",
            )
        elif isinstance(exc, ssl.SSLError) and exc.reason == "KEY_VALUES_MISMATCH":
            yield ConfigIssue(
                file,
                "mqtt.tls.key_file",
                f"{key}: not the key of {cert}: expected that certificate's private key",
            )
        else:
            yield ConfigIssue(
                file,
                "mqtt.tls.key_file",
                f"{key}: cannot load it as the private key of {cert} ({reason}): expected that "
                "certificate's unencrypted private key in PEM",
            )


def _credential_issues(file: str, data: Mapping[str, Any]) -> Iterable[ConfigIssue]:
    """The systemd credential holding the MQTT password, read as the service reads it (only
    where the service runs: with $CREDENTIALS_DIRECTORY set)."""
    mqtt = data.get("mqtt")
    name = mqtt.get("password_credential") if isinstance(mqtt, Mapping) else None
    directory = os.environ.get("CREDENTIALS_DIRECTORY")
    if not isinstance(name, str) or not directory or not CREDENTIAL_NAME.match(name):
        return
    path = Path(directory) / name
    if file_problem(path) is not None:
        return  # the model says so
    try:
        read_secret(path)
    except ConfigError as exc:
        for issue in exc.errors:
            yield ConfigIssue(
                file,
                "mqtt.password_credential",
                f"systemd credential {path}: {issue.message}; expected the MQTT password",
            )
