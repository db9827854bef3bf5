"""Every file a config names is read by `check-config` with the code `run` reads it with, and
its mode checked (controller/config/files.py): a missing, garbled or too permissive file is a
config error naming the config, the key, the file and what was expected. `run` refuses the same
files with the same lines and exit status 78, never a traceback (before: `check-config` said OK
on a bad checkpoint_key_file while `run` died with a traceback and exit 1, which systemd
restarts every 2 s; a malformed command_keys_file passed both silently)."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.badges import hash_pin
from controller.config import ConfigError, ConfigIssue
from controller.config_check import check_config_main, load_checked

SECRET = bytes(range(32))

CONFIG = """
[table]
id = "PG-01"
site = "lab"

[paytables]
chan_chu = "PT3"
jacks_beat = "B"

[devices.shuffler]
driver = "reference_shuffler"
role = "cards"
transport = "tcp"
host = "127.0.0.1"
port = 7001

[journal]
path = "journal.sqlite3"

[mqtt]
host = "127.0.0.1"
username = "PG-01"
password_file = "mqtt-password"
command_keys_file = "command-keys"
checkpoint_key_file = "checkpoint-key"
feed_key_file = "feed.key"

[mqtt.tls]
ca_file = "ca.crt"
cert_file = "client.crt"
key_file = "client.key"

[display]
port = 0
supervisor_token_file = "supervisor-token"
void_pin_file = "void-pin"
dealers_file = "dealers"
supervisors_file = "supervisors"
kiosk_token_file = "kiosk-token"
"""


FEED_KEY = Ed25519PrivateKey.from_private_bytes(bytes(32)).private_bytes(
    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
)


@dataclass(frozen=True)
class Setting:
    key: str
    name: str  # the file's name beside the config
    garbage: bytes  # what its reader refuses
    refused: str  # said of the garbage
    secret: bool = True

    def __str__(self) -> str:
        return self.key


SETTINGS = [
    Setting("mqtt.password_file", "mqtt-password", b"\xff\xfepw\n", "expected UTF-8 text"),
    Setting(
        "mqtt.command_keys_file",
        "command-keys",
        f"cms-1 {SECRET.hex()}\n".encode(),
        "command-keys:1: the key 'cms-1' does not say its type",
    ),
    Setting(
        "mqtt.checkpoint_key_file",
        "checkpoint-key",
        b"not a key\n",
        "expected the key as hex digits",
    ),
    Setting(
        "mqtt.feed_key_file",
        "feed.key",
        b"not a key\n",
        "expected an unencrypted Ed25519 private key in PEM",
    ),
    Setting(
        "mqtt.tls.ca_file",
        "ca.crt",
        b"not a certificate\n",
        "cannot load it as PEM certificates",
        secret=False,
    ),
    Setting(
        "mqtt.tls.cert_file",
        "client.crt",
        b"-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
        "cannot load it as a PEM certificate",
        secret=False,
    ),
    Setting("mqtt.tls.key_file", "client.key", b"garbage\n", "cannot load it as the private key"),
    Setting("display.supervisor_token_file", "supervisor-token", b"", "the file is empty"),
    Setting("display.void_pin_file", "void-pin", b"\n", "the file is empty"),
    Setting(
        "display.dealers_file",
        "dealers",
        b"D-1042 4711\n",
        "dealers:1: D-1042's PIN is not a pbkdf2_sha256 hash",
    ),
    Setting(
        "display.supervisors_file",
        "supervisors",
        f"S-0042 {hash_pin('604918', iterations=10_000)}\nS-0042 604918\n".encode(),
        "supervisors:2: S-0042's PIN is not a pbkdf2_sha256 hash "
        "(make one with 'paigow-table supervisor-pin BADGE')",
    ),
    Setting(
        "display.kiosk_token_file",
        "kiosk-token",
        b"too-short\n",
        "the kiosk token has 9 characters: expected at least 32 characters",
    ),
]


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """A self-signed P-256 certificate and its key (it is its own CA)."""
    directory = tmp_path_factory.mktemp("tls")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", "client.key", "-out", "client.crt", "-days", "2",
         "-subj", "/CN=paigow-PG-01"],
        cwd=directory, check=True, capture_output=True,
    )  # fmt: skip
    return (directory / "client.crt").read_bytes(), (directory / "client.key").read_bytes()


@pytest.fixture
def table(tmp_path: Path, certificate: tuple[bytes, bytes]) -> Path:
    """A config naming every file setting, each file good and owner-only (certificates 0644)."""
    cert, key = certificate
    good = {
        "mqtt-password": b"pw-9f3Kq-acl\n",
        "command-keys": f"# the CMS\ncms-1 hmac-sha256 {SECRET.hex()}\n".encode(),
        "checkpoint-key": SECRET.hex().encode() + b"\n",
        "feed.key": FEED_KEY,
        "ca.crt": cert,
        "client.crt": cert,
        "client.key": key,
        "supervisor-token": b"t" * 40 + b"\n",
        "void-pin": b"730519\n",
        "dealers": f"D-1042 {hash_pin('4711', iterations=10_000)}\n".encode(),
        "supervisors": f"# the pit\nS-0042 {hash_pin('604918', iterations=10_000)}\n".encode(),
        "kiosk-token": b"0123456789abcdef" * 4 + b"\n",
    }
    for name, content in good.items():
        path = tmp_path / name
        path.write_bytes(content)
        path.chmod(0o644 if name.endswith(".crt") else 0o600)
    config = tmp_path / "table.toml"
    config.write_text(CONFIG, encoding="utf-8")
    return config


def _check(config: Path) -> tuple[int, list[str], str]:
    out, err = io.StringIO(), io.StringIO()
    code = check_config_main(config, stdout=out, stderr=err)
    errors = [line for line in err.getvalue().splitlines() if ": warning: " not in line]
    return code, errors, out.getvalue()


def _run_refusal(config: Path) -> list[ConfigIssue]:
    """What `run` prints and refuses on (controller/wiring.py run_from_config: load_checked)."""
    with pytest.raises(ConfigError) as refused:
        load_checked(config)
    return refused.value.errors


def test_good_files_pass(table: Path) -> None:
    code, errors, out = _check(table)
    assert (code, errors) == (0, []), errors
    assert out.startswith(f"{table}: OK\n")
    for secret in ("mqtt-password", "void-pin", "dealers", "supervisors"):
        (table.parent / secret).chmod(0o400)  # read-only for its owner is as good
    assert _check(table)[:2] == (0, [])


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_a_missing_file_is_refused(table: Path, setting: Setting) -> None:
    path = table.parent / setting.name
    path.unlink()
    code, errors, out = _check(table)
    assert code == 1 and out == ""
    assert errors == [
        f"{table}: {setting.key}: file not found: {path} (expected an existing, readable file)"
    ]
    assert [str(issue) for issue in _run_refusal(table)] == errors


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_a_file_its_reader_refuses_is_refused(table: Path, setting: Setting) -> None:
    path = table.parent / setting.name
    path.write_bytes(setting.garbage)
    code, errors, out = _check(table)
    assert code == 1 and out == ""
    assert len(errors) == 1, errors
    [error] = errors
    assert error.startswith(f"{table}: {setting.key}: {path}"), error
    assert setting.refused in error and "expected" in error, error
    assert "Traceback" not in error and SECRET.hex() not in error
    assert [str(issue) for issue in _run_refusal(table)] == errors


@pytest.mark.parametrize("setting", SETTINGS, ids=str)
def test_a_too_permissive_file_is_refused(table: Path, setting: Setting) -> None:
    path = table.parent / setting.name
    mode = 0o644 if setting.secret else 0o664  # a secret anyone reads; a writable cert
    path.chmod(mode)
    code, errors, out = _check(table)
    assert code == 1 and out == ""
    what, who, expected = (
        ("readable", "everyone", "mode 0640 or stricter (e.g. root:paigow 0640, or paigow 0600)")
        if setting.secret
        else ("writable", "others than its owner", "it writable by its owner only (e.g. mode 0644)")
    )
    assert errors == [
        f"{table}: {setting.key}: {path} is {what} by {who} (mode {mode:04o}): expected {expected}"
    ]
    assert [str(issue) for issue in _run_refusal(table)] == errors
    path.chmod(0o606 if setting.secret else 0o646)  # read or written by anyone: the same
    assert _check(table)[0] == 1
    if setting.secret:
        path.chmod(0o640)  # root:paigow 0640: the service reads what it cannot change
        assert _check(table)[0] == 0


def test_check_config_says_whom_voids_acknowledgements_and_corrections_name(
    table: Path,
) -> None:
    """With a supervisors file they name a checked badge (the void PIN is then unused); without
    one, the shared void PIN and a typed name: check-config warns (docs/audit.md)."""
    out, err = io.StringIO(), io.StringIO()
    assert check_config_main(table, stdout=out, stderr=err) == 0
    said = err.getvalue()
    assert f"{table}: display.void_pin_file: warning: not used: with supervisors_file" in said
    assert "display.supervisors_file: warning" not in said
    assert "supervisors by badge" in out.getvalue()
    table.write_text(CONFIG.replace('supervisors_file = "supervisors"\n', ""), encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    assert check_config_main(table, stdout=out, stderr=err) == 0
    said = err.getvalue()
    assert (
        f"{table}: display.supervisors_file: warning: not set: voids, acknowledgements and "
        "corrections at the display are allowed by the one shared void PIN and attributed to a "
        "name typed beside it, which nobody checks" in said
    )
    assert "display.void_pin_file: warning" not in said
    assert "supervisors by the shared void PIN and a typed name" in out.getvalue()


def test_a_badge_named_twice_is_refused(table: Path) -> None:
    supervisors = table.parent / "supervisors"
    line = f"S-0042 {hash_pin('604918', iterations=10_000)}\n"
    supervisors.write_text(line + line.replace("S-0042", "S-0043") + line, encoding="utf-8")
    code, errors, _ = _check(table)
    assert code == 1
    assert errors == [
        f"{table}: display.supervisors_file: {supervisors}:3: badge S-0042 is named twice; "
        "expected 'BADGE pbkdf2_sha256$…' a line (paigow-table supervisor-pin BADGE)"
    ]


def test_an_encrypted_tls_key_is_refused_without_asking_for_its_passphrase(
    table: Path,
) -> None:
    directory = table.parent
    key, encrypted = directory / "client.key", directory / "encrypted.key"
    subprocess.run(
        ["openssl", "pkey", "-in", str(key), "-out", str(encrypted), "-aes256", "-passout",
         "pass:x"],
        check=True, capture_output=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    encrypted.replace(key)
    key.chmod(0o600)
    code, errors, _ = _check(table)
    assert code == 1
    assert errors == [
        f"{table}: mqtt.tls.key_file: {key}: the key is encrypted: expected it unencrypted "
        "(the table has no passphrase to give)"
    ]


def test_a_tls_key_of_another_certificate_is_refused(table: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-out", "client.key"],
        cwd=other, check=True, capture_output=True,
    )  # fmt: skip
    shutil.copy(other / "client.key", table.parent / "client.key")
    code, errors, _ = _check(table)
    assert code == 1 and len(errors) == 1
    assert errors[0].startswith(f"{table}: mqtt.tls.key_file: {table.parent / 'client.key'}: ")
    assert "not the key of" in errors[0] or "cannot load it" in errors[0], errors[0]


def test_an_empty_or_undecodable_systemd_credential_is_refused(
    table: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    (credentials / "mqtt-password").write_bytes(b"")
    monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
    table.write_text(
        CONFIG.replace('password_file = "mqtt-password"', 'password_credential = "mqtt-password"')
    )
    code, errors, _ = _check(table)
    assert code == 1
    assert errors == [
        f"{table}: mqtt.password_credential: systemd credential "
        f"{credentials / 'mqtt-password'}: the file is empty; expected the MQTT password"
    ]
    (credentials / "mqtt-password").write_bytes(b"pw\n")
    assert _check(table)[:2] == (0, [])


# --- `run` itself, as a process: exit 78 and the lines check-config prints ------------------


def _run(config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller.cli", "run", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=config.parent,
    )


@pytest.mark.parametrize("broken", ["missing", "garbage", "too permissive"])
def test_run_exits_78_with_the_lines_check_config_prints(table: Path, broken: str) -> None:
    """Every file setting broken at once, one way: `run` refuses with each one's line."""
    for setting in SETTINGS:
        path = table.parent / setting.name
        if broken == "missing":
            path.unlink()
        elif broken == "garbage" and setting.key != "mqtt.tls.cert_file":
            path.write_bytes(setting.garbage)  # (a bad certificate would hide its bad key)
        elif broken == "too permissive":
            path.chmod(0o644 if setting.secret else 0o666)
    done = _run(table)
    assert done.returncode == 78, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    code, errors, _ = _check(table)
    assert code == 1
    assert done.stderr.splitlines() == errors
    keys = {line.split(": ")[1] for line in errors}
    expected = {s.key for s in SETTINGS}
    if broken == "garbage":
        expected.discard("mqtt.tls.cert_file")
    assert keys == expected, errors


#: `run` with the check as it was before (files only found, never read), so that the daemon
#: itself meets the bad key: as when the file changes between the check and the start.
_RUN_UNCHECKED = """
import asyncio, sys
import controller.wiring as wiring
from controller.config import load_config
wiring.load_checked = lambda path: (load_config(path), [])
sys.exit(asyncio.run(wiring.run_from_config(sys.argv[1])))
"""


def test_a_checkpoint_key_the_daemon_refuses_is_exit_78_not_a_traceback(table: Path) -> None:
    key = table.parent / "checkpoint-key"
    key.write_bytes(b"not a key\n")
    done = subprocess.run(
        [sys.executable, "-c", _RUN_UNCHECKED, str(table)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=table.parent,
    )
    assert done.returncode == 78, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        f"{key}: mqtt.checkpoint_key_file: {key}: expected the key as hex digits"
    )
