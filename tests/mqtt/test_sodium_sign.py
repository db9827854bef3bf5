"""The table signs its feed through the system's libsodium (controller/sodium.py; issue 42: the
``cryptography`` package's own OpenSSL was 7 MB of a table's memory): the same signatures as
``cryptography`` (Ed25519 is deterministic), the key file read without ``cryptography``, and
``cryptography`` still used where libsodium is missing or the file is not the usual one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from controller import sodium
from controller.config.readers import read_feed_key
from controller.feed_signature import FeedSigner, keyring, public_bytes, verify_envelope
from controller.mqtt.feed_key import create_feed_key

REPO = Path(__file__).resolve().parents[2]


def test_libsodium_is_there() -> None:
    """The package recommends libsodium23 and the project's setup installs it: the table signs
    through it (else every test below would pass through the fallback alone)."""
    assert sodium.signer(b"\x01" * 32) is not None and sodium.verifier() is not None


@settings(max_examples=60, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(max_size=600))
def test_the_same_signature_as_cryptography(seed: bytes, message: bytes) -> None:
    key = Ed25519PrivateKey.from_private_bytes(seed)
    made = sodium.signer(seed)
    assert made is not None
    public, sign = made
    assert public == public_bytes(key.public_key())
    assert sign(message) == key.sign(message)
    verify = sodium.verifier()
    assert verify is not None and verify(public, sign(message), message)
    assert not verify(public, sign(message), message + b"x")


def test_a_signer_from_the_key_or_its_seed_signs_alike_and_the_pit_verifies_it() -> None:
    key = Ed25519PrivateKey.generate()
    a, b = FeedSigner(key), FeedSigner(seed=key.private_bytes_raw())
    assert a.key_id == b.key_id and a.public_raw == b.public_raw
    body = {"schema": "paigow.status", "seq": 1, "payload": {"x": "é"}}
    assert a.sign(body) == b.sign(body)
    verified = verify_envelope(b.sign(body), keyring([b.public_key]))
    assert verified.key_id == b.key_id
    with pytest.raises(ValueError, match="32 bytes"):
        FeedSigner(seed=b"short")


def test_without_libsodium_the_signer_is_cryptographys(monkeypatch: pytest.MonkeyPatch) -> None:
    key = Ed25519PrivateKey.generate()
    with_sodium = FeedSigner(key).sign({"a": 1})
    monkeypatch.setattr(sodium, "signer", lambda seed: None)
    fallback = FeedSigner(seed=key.private_bytes_raw())
    assert fallback.sign({"a": 1}) == with_sodium


def test_the_key_file_is_read_and_signed_with_without_loading_cryptography(tmp_path: Path) -> None:
    """A table whose key exists (made at install) never imports ``cryptography`` to sign."""
    signer, created = create_feed_key(tmp_path / "feed.key")
    assert created
    code = (
        "import sys; from controller.config.readers import read_feed_key; "
        f"s = read_feed_key({str(tmp_path / 'feed.key')!r}); s.sign({{'a': 1}}); "
        "print(s.key_id, 'cryptography' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [signer.key_id, "False"]


def test_an_unusual_or_forged_key_file_is_left_to_cryptography(tmp_path: Path) -> None:
    """Only the exact PKCS#8 v1 form is read here; anything else (the key with its public half,
    an encrypted key, the prefix with a byte more, another algorithm, junk) goes to
    ``cryptography``, which reads what it can and refuses the rest with the reason."""
    key = Ed25519PrivateKey.generate()
    path = tmp_path / "k.pem"
    encrypted = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )
    path.write_bytes(encrypted)
    with pytest.raises(ValueError, match="unencrypted Ed25519"):
        read_feed_key(path)
    plain = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    lines = plain.decode().splitlines()
    import base64

    der = base64.b64decode("".join(lines[1:-1]))
    longer = base64.b64encode(der + b"\x00").decode()
    path.write_text(f"{lines[0]}\n{longer}\n{lines[-1]}\n")
    with pytest.raises(ValueError, match="unencrypted Ed25519"):
        read_feed_key(path)
    path.write_text("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n")
    with pytest.raises(ValueError, match="unencrypted Ed25519"):
        read_feed_key(path)
    path.write_bytes(plain)
    assert read_feed_key(path).key_id == FeedSigner(key).key_id
