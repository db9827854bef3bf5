"""Dealer sign-in at the kiosk (docs/audit.md "Who dealt"): a badge number and a PIN checked
against ``[display] dealers_file``, which holds no PIN, only salted PBKDF2-SHA256 hashes
(``paigow-table dealer-pin BADGE`` makes a line). Each source has its own count of wrong tries
with a doubling lockout (``Lockouts``), as the void PIN has."""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from controller.display.access import Decision

ITERATIONS = 100_000
TRIES = 5
LOCKOUT_S = 60.0
LOCKOUT_MAX_S = 3600.0
BADGE = re.compile(r"^[A-Za-z0-9_.-]{1,32}$")
MIN_PIN_DIGITS = 4


def hash_pin(pin: str, *, salt: bytes | None = None, iterations: int = ITERATIONS) -> str:
    """``pbkdf2_sha256$<iterations>$<salt hex>$<hash hex>``: what a dealers file stores."""
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", pin.encode("utf-8"), salt, iterations)
    return f"pbkdf2_sha256${iterations}${salt.hex()}${digest.hex()}"


def pin_matches(pin: str, stored: str) -> bool:
    scheme, iterations, salt, digest = stored.split("$")
    got = hashlib.pbkdf2_hmac("sha256", pin.encode("utf-8"), bytes.fromhex(salt), int(iterations))
    return scheme == "pbkdf2_sha256" and hmac.compare_digest(got.hex(), digest)


def read_dealers(path: str | Path) -> dict[str, str]:
    """``badge pbkdf2_sha256$…`` a line (``#`` comments). ValueError names the line."""
    dealers: dict[str, str] = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        parts = text.split()
        if len(parts) != 2 or not BADGE.match(parts[0]):
            raise ValueError(f"{path}:{number}: expected 'badge pbkdf2_sha256$…'")
        fields = parts[1].split("$")
        try:
            ok = (
                len(fields) == 4
                and fields[0] == "pbkdf2_sha256"
                and int(fields[1]) >= 10_000
                and len(bytes.fromhex(fields[2])) >= 8
                and len(bytes.fromhex(fields[3])) == 32
            )
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{path}:{number}: {parts[0]}'s PIN is not a pbkdf2_sha256 hash "
                "(make one with 'paigow-table dealer-pin BADGE')"
            )
        dealers[parts[0]] = parts[1]
    return dealers


@dataclass
class _Tries:
    failures: int = 0
    lockouts: int = 0
    locked_until: float = 0.0


@dataclass
class Lockouts:
    """Wrong tries per source: ``TRIES`` wrong ones lock that source out for ``LOCKOUT_S``,
    doubling with each further lockout up to an hour, so guessing is slow and one guesser does
    not lock the kiosk out."""

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

    def failed(self, source: str) -> None:
        now = self.clock()
        tries = self._sources.setdefault(source, _Tries())
        tries.failures += 1
        self.failures_total += 1
        if tries.failures >= TRIES:
            tries.failures = 0
            tries.locked_until = now + min(LOCKOUT_MAX_S, LOCKOUT_S * 2**tries.lockouts)
            tries.lockouts += 1
        if len(self._sources) > 10_000:  # a flood of sources: forget those not locked out
            self._sources = {k: v for k, v in self._sources.items() if v.locked_until > now}


@dataclass
class DealerBook:
    """The dealers who may sign in, by badge, with their PIN hashes."""

    dealers: dict[str, str]
    lockouts: Lockouts = field(default_factory=Lockouts)

    def check(self, badge: str, pin: str, source: str) -> Decision:
        """Blocking (PBKDF2, ~50 ms): run it in a thread."""
        locked = self.lockouts.locked(source)
        if locked is not None:
            return locked
        stored = self.dealers.get(badge)
        # An unknown badge costs the same time as a known one: no badge enumeration by timing.
        if pin_matches(pin, stored or hash_pin("", salt=b"\0" * 16)) and stored is not None:
            self.lockouts.succeeded(source)
            return Decision(200)
        self.lockouts.failed(source)
        return Decision(403, "unknown badge or wrong PIN", "wrong_pin")
