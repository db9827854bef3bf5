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

# One loader of the system's libsodium for the table's signing and the pit's checking.
from controller.sodium import Verify as Verify
from controller.sodium import verifier as verifier
