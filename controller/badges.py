"""Badges and PINs at the display (docs/audit.md "Who dealt", "Latched alarms and
acknowledgement"): a dealer signs in with a badge number and a PIN checked against ``[display]
dealers_file``, and a supervisor voids, acknowledges or corrects with one checked against
``[display] supervisors_file``. Neither file holds a PIN, only salted PBKDF2-SHA256 hashes
(``paigow-table dealer-pin BADGE`` and ``supervisor-pin BADGE`` make a line). Each source has its
own count of wrong tries with a doubling lockout (``Lockouts``), as the void PIN has.

A check costs the same whether the badge exists or not: an unknown badge runs the same PBKDF2,
with the same parameters as the file's hashes, against a dummy hash, so the time of an answer
does not tell which badges exist."""

from __future__ import annotations

import hashlib
import hmac
import os
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from controller.config.readers import read_badges as read_badges
from controller.config.readers import read_dealers as read_dealers
from controller.config.readers import read_supervisors as read_supervisors
from controller.credentials import ADDRESS_TRIES, BADGE, LOCKOUT_MAX_S, LOCKOUT_S, TRIES
from controller.credentials import DEALER_PIN_DIGITS as MIN_PIN_DIGITS
from controller.credentials import PBKDF2_ITERATIONS as ITERATIONS
from controller.credentials import SUPERVISOR_PIN_DIGITS as MIN_SUPERVISOR_PIN_DIGITS
from controller.http_rules import Decision

__all__ = [
    "BADGE",
    "ITERATIONS",
    "LOCKOUT_MAX_S",
    "LOCKOUT_S",
    "MIN_PIN_DIGITS",
    "MIN_SUPERVISOR_PIN_DIGITS",
    "TRIES",
]


def hash_pin(pin: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """``pbkdf2_sha256$<iterations>$<salt hex>$<hash hex>``: what a dealers file stores."""
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", pin.encode("utf-8"), salt, iterations)
    return f"pbkdf2_sha256${iterations}${salt.hex()}${digest.hex()}"


def pin_matches(pin: str, stored: str) -> bool:
    scheme, iterations, salt, digest = stored.split("$")
    got = hashlib.pbkdf2_hmac("sha256", pin.encode("utf-8"), bytes.fromhex(salt), int(iterations))
    return scheme == "pbkdf2_sha256" and hmac.compare_digest(got.hex(), digest)


def dummy_hash(hashes: Mapping[str, str] | None = None) -> str:
    """A hash no PIN matches, with the parameters (iterations, salt length) most of ``hashes``
    have: checking a PIN against it costs what checking one against a real entry costs. Made
    without running PBKDF2 (its digest is random)."""
    params = Counter(
        (int(stored.split("$")[1]), len(stored.split("$")[2]) // 2)
        for stored in (hashes or {}).values()
    )
    iterations, salt_bytes = (
        max(params.items(), key=lambda item: (item[1], item[0]))[0] if params else (ITERATIONS, 16)
    )
    return f"pbkdf2_sha256${iterations}${os.urandom(salt_bytes).hex()}${os.urandom(32).hex()}"


@dataclass
class _Tries:
    failures: int = 0
    lockouts: int = 0
    locked_until: float = 0.0


@dataclass
class Lockouts:
    """Wrong tries per key (a source, or a badge): ``tries`` wrong ones (``TRIES`` unless the
    caller says) lock that key out for ``LOCKOUT_S``, doubling with each further lockout up to an
    hour, so guessing is slow and one guesser does not lock the kiosk out."""

    clock: Callable[[], float] = time.monotonic
    failures_total: int = 0
    _sources: dict[str, _Tries] = field(default_factory=dict)

    def locked(self, source: str) -> Decision | None:
        tries = self._sources.get(source)
        now = self.clock()
        if tries is not None and now < tries.locked_until:
            wait = int(tries.locked_until - now) + 1
            return Decision(403, f"too many wrong tries: try again in {wait} s", "locked_out")
        return None

    def succeeded(self, source: str) -> None:
        tries = self._sources.get(source)
        if tries is not None:
            tries.failures = 0

    def failed(self, source: str, limit: int = TRIES, *, counted: bool = True) -> None:
        now = self.clock()
        tries = self._sources.setdefault(source, _Tries())
        tries.failures += 1
        self.failures_total += counted
        if tries.failures >= limit:
            tries.failures = 0
            tries.locked_until = now + min(LOCKOUT_MAX_S, LOCKOUT_S * 2**tries.lockouts)
            tries.lockouts += 1
        if len(self._sources) > 10_000:  # a flood of sources: forget those not locked out
            self._sources = {k: v for k, v in self._sources.items() if v.locked_until > now}


@dataclass
class BadgeBook:
    """The people who may act with a badge and PIN (the dealers, or the supervisors), with their
    PIN hashes. ``lockouts`` may be shared with another check (the supervisors' is the void
    PIN's), so wrong tries count together."""

    badges: dict[str, str]
    #: wrong tries by address (``ADDRESS_TRIES``: a scan of badges), shared with a void PIN
    lockouts: Lockouts = field(default_factory=Lockouts)
    #: wrong tries by badge (``TRIES``): one badge's PIN cannot be guessed, and one person's
    #: wrong PINs lock out that badge, not every supervisor behind the same address
    badge_lockouts: Lockouts = field(default_factory=Lockouts)
    #: What an unknown badge is checked against: the same work as a known one.
    dummy: str = ""

    def __post_init__(self) -> None:
        if not self.dummy:
            self.dummy = dummy_hash(self.badges)

    def matches(self, badge: str, pin: str) -> bool:
        """Blocking (one PBKDF2, ~50 ms), and exactly one whether ``badge`` exists or not."""
        stored = self.badges.get(badge)
        matched = pin_matches(pin, stored if stored is not None else self.dummy)
        return matched and stored is not None

    def check(self, badge: str, pin: str, source: str) -> Decision:
        """Blocking (PBKDF2, ~50 ms): run it in a thread. A wrong PIN and an unknown badge are
        refused the same way, after the same work."""
        locked = self.badge_lockouts.locked(badge) or self.lockouts.locked(source)
        if locked is not None:
            return locked
        if self.matches(badge, pin):
            self.badge_lockouts.succeeded(badge)
            return Decision(200)
        self.badge_lockouts.failed(badge, TRIES, counted=False)
        self.lockouts.failed(source, ADDRESS_TRIES)
        return Decision(403, "unknown badge or wrong PIN", "wrong_pin")


#: The dealers' book (``[display] dealers_file``).
DealerBook = BadgeBook
