"""Ed25519 verification through the system's libsodium (Debian's ``libsodium23``), for the pit's
fast path (``pit.judge._fast``, issue 31).

The signature check was the largest single cost of the pit's ingest at 2,000 tables (a third of
its database thread's time, measured with py-spy): ``cryptography``'s Ed25519 (OpenSSL) takes
0.064 ms a 2 KB message here, libsodium's ``crypto_sign_ed25519_verify_detached`` 0.040 ms
(``bench/pit.py --verify-cost``), and ctypes lets go of the GIL while it runs, so the event
loop reads MQTT meanwhile. PyNaCl would be the library for it, but its wheel carries a libsodium
of its own; this is one function of the one Debian updates (the package recommends it).

A verdict here only ever lets a message take the fast path: whatever libsodium does not accept
goes to the strict path, which checks with ``cryptography`` and gives the reasons. libsodium is
the stricter of the two (it refuses a non-canonical S, a small-order R or key), so the verdicts
stay ``cryptography``'s. Without libsodium :func:`verifier` is None and the fast path checks
with ``cryptography`` as before.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable

#: verify(public_key_32, signature_64, message) -> whether the signature is good
Verify = Callable[[bytes, bytes, bytes], bool]


def _open() -> ctypes.CDLL | None:
    """Debian's libsodium by its soname; else wherever the system says it is (asking it runs
    ``ldconfig``: only when the soname is not there)."""
    for name in ("libsodium.so.23", None):
        path = name or ctypes.util.find_library("sodium")
        if path is None:
            return None
        try:
            return ctypes.CDLL(path)
        except OSError:
            continue
    return None


def _load() -> Verify | None:
    lib = _open()
    try:
        if lib is None or lib.sodium_init() < 0:
            return None
        fn = lib.crypto_sign_ed25519_verify_detached
    except AttributeError:
        return None
    fn.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_char_p]
    fn.restype = ctypes.c_int

    def verify(public_key: bytes, signature: bytes, message: bytes) -> bool:
        if len(public_key) != 32 or len(signature) != 64:
            return False
        return bool(fn(signature, message, len(message), public_key) == 0)

    return verify


_VERIFY = _load()


def verifier() -> Verify | None:
    """libsodium's Ed25519 verification, or None where the library is not installed."""
    return _VERIFY
