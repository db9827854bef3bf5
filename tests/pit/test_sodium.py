"""The pit's libsodium verification (pit/sodium.py) against cryptography's, the verifier whose
verdicts the pit keeps: every good signature good for both, every altered one (message, R, S,
key) bad for both, and what libsodium refuses besides (a signature under a small-order key)
bad for it. Installed by the project (``make deb-tools``: Debian's libsodium23)."""

from __future__ import annotations

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.feed_signature import public_bytes
from pit import sodium

VERIFY = sodium.verifier()


def _cryptography(raw: bytes, signature: bytes, message: bytes) -> bool:
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def test_libsodium_is_there() -> None:
    assert VERIFY is not None, "libsodium23 is installed by make deb-tools"


@settings(max_examples=300, deadline=None)
@given(
    seed=st.binary(min_size=32, max_size=32),
    message=st.binary(max_size=4096),
    flip=st.integers(0, 10_000),
    where=st.sampled_from(["message", "R", "S", "key", "none"]),
)
def test_the_same_verdict_as_cryptography(seed: bytes, message: bytes, flip: int,
                                          where: str) -> None:  # fmt: skip
    assert VERIFY is not None
    key = Ed25519PrivateKey.from_private_bytes(seed)
    raw = public_bytes(key.public_key())
    signature = key.sign(message)
    if where == "message" and message:
        i = flip % len(message)
        message = message[:i] + bytes([message[i] ^ 1 << (flip % 8)]) + message[i + 1 :]
    elif where in ("R", "S"):
        i = (flip % 32) + (32 if where == "S" else 0)
        signature = signature[:i] + bytes([signature[i] ^ 1 << (flip % 8)]) + signature[i + 1 :]
    elif where == "key":
        raw = public_bytes(Ed25519PrivateKey.generate().public_key())
    expected = _cryptography(raw, signature, message)
    assert VERIFY(raw, signature, message) is expected
    assert expected is (where == "none" or (where == "message" and not message))


def test_a_small_order_key_and_wrong_lengths_are_refused() -> None:
    assert VERIFY is not None
    identity = (1).to_bytes(32, "little")  # the neutral point: every "signature" of it is weak
    weak = identity + bytes(32)  # R = identity, S = 0: true for any message on a lax verifier
    assert VERIFY(identity, weak, b"anything") is False
    key = Ed25519PrivateKey.generate()
    raw, signature = public_bytes(key.public_key()), key.sign(b"m")
    assert VERIFY(raw, signature, b"m") is True
    assert VERIFY(raw[:31], signature, b"m") is False
    assert VERIFY(raw, signature[:63], b"m") is False
    assert VERIFY(raw, signature + b"\0", b"m") is False
