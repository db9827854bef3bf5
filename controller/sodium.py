"""Ed25519 through the system's libsodium (Debian's ``libsodium23``, which the package
recommends): the table's signing of its feed (issue 42) and the pit's fast verification (issue
31, ``pit.sodium``), one C library the distribution updates, reached with ``ctypes``.

Why not ``cryptography`` for the table: its wheel carries its own OpenSSL, and loading it cost a
table about 7 MB of resident memory (``bench/footprint.py --smaps``) for one function, Ed25519
signing, that libsodium does in the same time. Ed25519 signatures are deterministic, so the two
sign every message with the same bytes (tests/mqtt/test_sodium_sign.py). Where libsodium is not
installed, :func:`signer` and :func:`verifier` are None and the callers use ``cryptography``.
PyNaCl would be the Python library for it, but its wheel carries a libsodium of its own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

#: verify(public_key_32, signature_64, message) -> whether the signature is good
Verify = Callable[[bytes, bytes, bytes], bool]
#: sign(message) -> the 64-byte signature; made from a 32-byte seed by :func:`signer`
Sign = Callable[[bytes], bytes]

SEED_BYTES = 32


def _open() -> ctypes.CDLL | None:
    """Debian's libsodium by its soname; else wherever the system says it is (asking it runs
    ``ldconfig``: only when the soname is not there)."""
    for name in ("libsodium.so.23", None):
        path = name or ctypes.util.find_library("sodium")
        if path is None:
            return None
        try:
            lib = ctypes.CDLL(path)
            return lib if lib.sodium_init() >= 0 else None
        except (OSError, AttributeError):
            continue
    return None


_LIB = _open()


def _verifier() -> Verify | None:
    try:
        fn = _LIB.crypto_sign_ed25519_verify_detached if _LIB is not None else None
    except AttributeError:
        return None
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_char_p]
    fn.restype = ctypes.c_int

    def verify(public_key: bytes, signature: bytes, message: bytes) -> bool:
        if len(public_key) != 32 or len(signature) != 64:
            return False
        return bool(fn(signature, message, len(message), public_key) == 0)

    return verify


_VERIFY = _verifier()


def verifier() -> Verify | None:
    """libsodium's Ed25519 verification, or None where the library is not installed."""
    return _VERIFY


def keypair(seed: bytes) -> tuple[bytes, bytes] | None:
    """(public key 32 bytes, secret key 64 bytes) of a 32-byte Ed25519 seed (the private key as
    RFC 8032 and PKCS#8 hold it); None without libsodium. ValueError for another length."""
    if len(seed) != SEED_BYTES:
        raise ValueError(f"an Ed25519 private key has {SEED_BYTES} bytes, not {len(seed)}")
    if _LIB is None:
        return None
    public = ctypes.create_string_buffer(32)
    secret = ctypes.create_string_buffer(64)
    if _LIB.crypto_sign_ed25519_seed_keypair(public, secret, seed) != 0:
        raise ValueError("libsodium refused the key")
    return public.raw, secret.raw


def signer(seed: bytes) -> tuple[bytes, Sign] | None:
    """The public key of ``seed`` and a function signing with it, through libsodium; None
    without the library."""
    pair = keypair(seed)
    if pair is None or _LIB is None:
        return None
    public, secret = pair
    fn = _LIB.crypto_sign_ed25519_detached
    fn.argtypes = [
        ctypes.c_char_p, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_char_p,
    ]  # fmt: skip
    fn.restype = ctypes.c_int

    def sign(message: bytes) -> bytes:
        out = ctypes.create_string_buffer(64)
        if fn(out, None, message, len(message), secret) != 0:
            raise RuntimeError("libsodium could not sign")
        return out.raw

    return public, sign
