"""The keys file of signed commands (docs/mqtt.md, "Signed commands"): every line names its key's
type, ``key_id hmac-sha256 <secret hex>`` or ``key_id ed25519 <public key hex>``.

The audit's attack: the old untyped line ``key_id <64 hex digits>`` was read as an HMAC secret,
so an Ed25519 public key written that way became a shared secret that anyone holding the public
key could sign with. Such a line is now refused, naming the file, the line and what to write."""

from __future__ import annotations

import io
import json
from contextlib import redirect_stderr, redirect_stdout
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from controller.cli.main import main as cli
from controller.mqtt.signing import CommandVerifier, SignatureRefused, read_keys, sign

NOW = datetime(2026, 11, 24, 10, 0, tzinfo=UTC)
SECRET = bytes(range(32))
PRIVATE = Ed25519PrivateKey.from_private_bytes(bytes(range(32, 64)))
PUBLIC = PRIVATE.public_key()
PUBLIC_HEX = PUBLIC.public_bytes_raw().hex()
PUBLIC_HEX_BYTES = PUBLIC.public_bytes_raw()
TABLE = "PG-T1"
VOID = {"reason": "x", "round_id": "PG-T1-01"}


def _keys_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "command-keys"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)
    return path


def _forged(key: bytes) -> dict[str, object]:
    """A void_round signed with HMAC-SHA256 under ``key``: what anyone holding the published
    public key could make if the table took that key as an HMAC secret."""
    return sign(key, "cms-ed", "void_round", {**VOID, "request_id": "f-1"}, NOW, table_id=TABLE)


def test_a_public_key_written_as_an_untyped_line_is_refused_not_taken_as_a_secret(
    tmp_path: Path,
) -> None:
    """The attack: the casino lists its Ed25519 public key without 'ed25519'. Before, the table
    took the 32 public bytes as an HMAC secret and ran a command 'signed' with them."""
    path = _keys_file(tmp_path, f"# the casino system's public key\ncms-ed {PUBLIC_HEX}\n")
    with pytest.raises(ValueError) as refused:
        keys = read_keys(path)
        # Only reached with the old reader: show what it let through.
        verifier = CommandVerifier(keys, clock=lambda: NOW, table_id=TABLE)
        verifier.verify("void_round", _forged(PUBLIC_HEX_BYTES))
    said = str(refused.value)
    assert said.startswith(f"{path}:2: ")
    assert "does not say its type" in said
    assert "'cms-ed hmac-sha256 <the same hex>'" in said
    assert "'cms-ed ed25519 <the same hex>'" in said
    assert PUBLIC_HEX not in said  # the line's hex is never repeated (it may be a secret)


def test_the_typed_public_key_does_not_verify_an_hmac_made_with_its_bytes(tmp_path: Path) -> None:
    path = _keys_file(tmp_path, f"cms-ed ed25519 {PUBLIC_HEX}\n")
    keys = read_keys(path)
    assert isinstance(keys["cms-ed"], Ed25519PublicKey)
    verifier = CommandVerifier(keys, clock=lambda: NOW, table_id=TABLE)
    with pytest.raises(SignatureRefused, match="wrong signature"):
        verifier.verify("void_round", _forged(PUBLIC_HEX_BYTES))
    genuine = sign(
        PRIVATE, "cms-ed", "void_round", {**VOID, "request_id": "g-1"}, NOW, table_id=TABLE
    )
    assert verifier.verify("void_round", genuine) == {**VOID, "request_id": "g-1"}


def test_an_untyped_secret_is_refused_with_what_to_write_instead(tmp_path: Path) -> None:
    path = _keys_file(tmp_path, f"cms-ed ed25519 {PUBLIC_HEX}\n\ncms-1 {SECRET.hex()}  # CMS\n")
    with pytest.raises(ValueError) as refused:
        read_keys(path)
    said = str(refused.value)
    assert said.startswith(f"{path}:3: the key 'cms-1' does not say its type")
    assert "write 'cms-1 hmac-sha256 <the same hex>'" in said
    assert SECRET.hex() not in said


def test_typed_lines_of_both_kinds_share_a_file(tmp_path: Path) -> None:
    path = _keys_file(
        tmp_path,
        "# id  type  key\n"
        f"cms-1 hmac-sha256 {SECRET.hex()}\n"
        f"cms-ed\ted25519\t{PUBLIC_HEX.upper()}   # the casino's public key\n",
    )
    keys = read_keys(path)
    assert keys["cms-1"] == SECRET
    assert isinstance(keys["cms-ed"], Ed25519PublicKey)
    assert keys["cms-ed"].public_bytes_raw() == PUBLIC.public_bytes_raw()


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"cms-1 hmac {SECRET.hex()}", "unknown key type 'hmac': expected 'hmac-sha256' or"),
        (f"cms-1 HMAC-SHA256 {SECRET.hex()}", "unknown key type 'HMAC-SHA256'"),
        (f"cms-1 hmac-sha256 {SECRET[:31].hex()}", "31 bytes: expected at least 32"),
        (f"cms-1 hmac-sha256 {SECRET.hex()}z", "not hex digits"),
        (f"cms-1 ed25519 {PUBLIC_HEX}00", "has 33 bytes: expected 32 (64 hex digits"),
        (f"cms-1 ed25519 {PUBLIC_HEX[:-2]}", "has 31 bytes: expected 32 (64 hex digits"),
        (f"cms-1 ed25519 {PUBLIC_HEX} extra", "expected 'key_id hmac-sha256 <secret hex>'"),
        ("cms-1", "expected 'key_id hmac-sha256 <secret hex>'"),
        (
            f"cms-1 hmac-sha256 {SECRET.hex()}\ncms-1 ed25519 {PUBLIC_HEX}",
            "the key id 'cms-1' is already on line 1: expected each key id once",
        ),
    ],
)
def test_a_bad_line_names_the_file_the_line_and_what_was_expected(
    tmp_path: Path, line: str, expected: str
) -> None:
    path = _keys_file(tmp_path, line + "\n")
    with pytest.raises(ValueError) as refused:
        read_keys(path)
    said = str(refused.value)
    assert said.startswith(f"{path}:"), said
    assert expected in said, said
    assert SECRET.hex() not in said and SECRET[:31].hex() not in said


def test_a_file_that_is_not_text_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "command-keys"
    path.write_bytes(b"cms-1 hmac-sha256 \xff\xfe\n")
    with pytest.raises(ValueError, match=f"^{path}: expected UTF-8 text: byte 18 is not UTF-8"):
        read_keys(path)


def _sign_command(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = cli(["sign-command", "void_round", json.dumps(VOID), "--table-id", TABLE, *args])
    return code, out.getvalue(), err.getvalue()


def test_sign_command_reads_the_typed_keys_file_and_refuses_the_old_form(tmp_path: Path) -> None:
    path = _keys_file(tmp_path, f"cms-1 hmac-sha256 {SECRET.hex()}\ncms-ed ed25519 {PUBLIC_HEX}\n")
    code, out, _ = _sign_command("--keys-file", str(path), "--key-id", "cms-1")
    assert code == 0
    body = json.loads(out)
    verifier = CommandVerifier(read_keys(path), window=3600.0, table_id=TABLE)
    assert verifier.verify("void_round", body)["reason"] == "x"
    # A public key signs nothing: sign-command says which key it needs.
    code, _, err = _sign_command("--keys-file", str(path), "--key-id", "cms-ed")
    assert code == 2 and "no hmac-sha256 key 'cms-ed'" in err
    old = _keys_file(tmp_path, f"cms-1 {SECRET.hex()}\n")
    code, out, err = _sign_command("--keys-file", str(old), "--key-id", "cms-1")
    assert code == 65 and out == ""  # not a keys file of this form (issue 39: one exit rule)
    assert f"{old}:1: the key 'cms-1' does not say its type" in err
