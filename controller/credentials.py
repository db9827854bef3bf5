"""The one credential policy (docs/operations.md, "Credentials"): how long a PIN or a token must
be, what a badge looks like, how a PIN is stored and checked, and how guessing is slowed. Every
place that accepts, warns about or makes a credential asks here — the config check, the display,
the badge commands (``dealer-pin``, ``supervisor-pin``), the kiosk — so a rule is written once.

What it does not protect against: a PIN watched over the dealer's shoulder, or a token copied
off the table computer by someone with its files; a 4-digit dealer PIN alone is an attribution,
not a secret (the supervisor's 6 digits and the lockout make guessing slow, not impossible).
"""

from __future__ import annotations

import re
from typing import Final

#: A dealer's PIN (dealers_file), at least this many digits.
DEALER_PIN_DIGITS: Final = 4
#: The shared void PIN and a supervisor's PIN (supervisors_file): voids, acknowledgements and
#: corrections move money, so they need more.
SUPERVISOR_PIN_DIGITS: Final = 6
#: The supervisor token and the kiosk token (``openssl rand -hex 32`` makes 64 characters).
TOKEN_CHARS: Final = 32
#: A badge: 1–32 letters, digits, '.', '_' or '-'.
BADGE: Final = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
#: PBKDF2-SHA256 iterations of a stored PIN (about 30 ms a check here).
PBKDF2_ITERATIONS: Final = 100_000
#: Wrong PINs for one badge (or, for a shared PIN, from one source) before it is locked out;
#: the lockout doubles up to its cap.
TRIES: Final = 5
#: Wrong badge PINs from one address before the address is locked out: higher, since on
#: loopback or behind a proxy every supervisor shares it (issue 40), yet a scan of badges from
#: one address still stops.
ADDRESS_TRIES: Final = 20
LOCKOUT_S: Final = 60.0
LOCKOUT_MAX_S: Final = 3600.0


def pin_problem(pin: str, digits: int) -> str | None:
    """Why ``pin`` is not acceptable as a PIN of at least ``digits`` digits, or None."""
    if len(pin) < digits or not pin.isdigit():
        return f"expected at least {digits} digits"
    return None


def token_problem(token: str) -> str | None:
    """Why ``token`` is too weak to be a token, or None."""
    if len(token) < TOKEN_CHARS:
        return f"it has {len(token)} characters: expected at least {TOKEN_CHARS}"
    return None
