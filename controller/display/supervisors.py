"""Who may void a round, acknowledge a latched alarm or correct a player's setting at the display,
and whom the journal names for it (docs/audit.md "Latched alarms and acknowledgement",
"Corrections").

* With ``[display] supervisors_file`` (``badge pbkdf2_sha256$…`` a line, made by ``paigow-table
  supervisor-pin BADGE``): a supervisor's badge and PIN, checked against the file's hashes (the
  same constant work for an unknown badge: :class:`~controller.badges.BadgeBook`). The
  action is attributed to that badge; a name typed beside it is not used.
* Without it, the fallback: the one shared void PIN (``[display] void_pin_file``, at least six
  digits), and the action is attributed to the name typed beside it, which nobody checks
  (check-config warns).

Wrong credentials are refused the same way in both (403, journaled as ``command_refused`` by the
server, an alarm after ``[limits] refusals_before_alarm``), and count towards one doubling
lockout per source. A supervisors file that is configured but cannot be read disables these
actions: it never falls back to the shared PIN.
"""

from __future__ import annotations

import asyncio
import hmac
from dataclasses import dataclass, field
from typing import Literal

from controller.badges import BadgeBook, Lockouts
from controller.credentials import SUPERVISOR_PIN_DIGITS, pin_problem
from controller.http_rules import Decision

PIN_MIN_DIGITS = SUPERVISOR_PIN_DIGITS

Mode = Literal["badge", "shared_pin"]


@dataclass
class PinGuard:
    """The void PIN (the supervisor's when no supervisors file is configured: it also
    acknowledges alarms and allows corrections), compared in constant time. It must have at
    least ``PIN_MIN_DIGITS`` digits (a shorter one disables voiding from the display). Each
    source (the client's address) has its own count of wrong PINs with a doubling lockout
    (``Lockouts``); every wrong PIN is journaled (docs/audit.md)."""

    pin: str | None
    lockouts: Lockouts = field(default_factory=Lockouts)

    @property
    def failures_total(self) -> int:
        return self.lockouts.failures_total

    @property
    def problem(self) -> str | None:
        """Why voiding from the display is off, or None."""
        if self.pin is None:
            return "voiding from the display is disabled: no void PIN is configured"
        if pin_problem(self.pin, PIN_MIN_DIGITS) is not None:
            return (
                f"voiding from the display is disabled: the void PIN must be at least "
                f"{PIN_MIN_DIGITS} digits"
            )
        return None

    def check(self, presented: str, source: str = "") -> Decision:
        problem = self.problem
        if problem is not None or self.pin is None:
            return Decision(403, problem or "", "disabled")
        locked = self.lockouts.locked(source)
        if locked is not None:
            return locked
        if hmac.compare_digest(presented.encode("utf-8"), self.pin.encode("utf-8")):
            self.lockouts.succeeded(source)
            return Decision(200)
        self.lockouts.failed(source)
        return Decision(403, "wrong PIN", "wrong_pin")


@dataclass(frozen=True, slots=True)
class Supervisor:
    """The outcome of a supervisor's credentials: ``decision``, and whom the action is
    attributed to (the badge checked, or the name typed under the shared PIN; "" if none)."""

    decision: Decision
    by: str = ""


@dataclass
class SupervisorGate:
    """The supervisors' credentials at the display: a badge and PIN from ``book`` when a
    supervisors file is configured (``configured``; ``book`` None then means it could not be
    read, and these actions are off), else the shared void PIN of ``pins``."""

    pins: PinGuard
    book: BadgeBook | None = None
    configured: bool = False

    def __post_init__(self) -> None:
        if self.book is not None:
            self.configured = True
            self.book.lockouts = self.pins.lockouts  # one count of wrong tries per source

    @property
    def mode(self) -> Mode:
        return "badge" if self.configured else "shared_pin"

    @property
    def problem(self) -> str | None:
        """Why voiding, acknowledging and correcting at the display are off, or None."""
        if self.configured:
            if self.book is None:
                return (
                    "voiding from the display is disabled: the supervisors file could not be "
                    "read (see the controller's log)"
                )
            return None
        return self.pins.problem

    @property
    def failures_total(self) -> int:
        return self.pins.lockouts.failures_total

    def check(self, badge: str, pin: str, name: str, source: str) -> Supervisor:
        """Blocking in badge mode (one PBKDF2): use :meth:`verify` on the event loop."""
        problem = self.problem
        if problem is not None:
            return Supervisor(Decision(403, problem, "disabled"))
        if self.book is not None:
            badge = badge.strip()
            return Supervisor(self.book.check(badge, pin, source), badge)
        return Supervisor(self.pins.check(pin, source), (name or badge).strip())

    async def verify(self, badge: str, pin: str, name: str, source: str) -> Supervisor:
        """:meth:`check`, with the PBKDF2 off the event loop."""
        if self.book is not None and self.problem is None:
            return await asyncio.to_thread(self.check, badge, pin, name, source)
        return self.check(badge, pin, name, source)
