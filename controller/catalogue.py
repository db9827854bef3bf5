"""Every alarm and every round reason the table can give, with its severity, whether it
latches, and what the dealer and the supervisor should do — the one source of docs/alarms.md
(``python -m controller.catalogue > docs/alarms.md``) and of the alarm schema's code enum.

tests/controller/test_catalogue.py fails when the code raises an alarm or closes a round with
a reason this catalogue does not list, or when docs/alarms.md is not what this module renders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller.words import words


@dataclass(frozen=True, slots=True)
class Alarm:
    code: str
    severity: str  # info | warning | critical, or how it is decided
    latches: str  # whether a person must acknowledge it
    dealer: str
    supervisor: str


_LATCH = "yes: until a supervisor acknowledges it (kept across restarts)"

ALARMS: Final[tuple[Alarm, ...]] = (
    Alarm(
        "table_fault",
        "critical",
        _LATCH,
        "Stop: settle nothing by the display; call the supervisor.",
        "The journal cannot be written (a full disk, an I/O error): free space on its disk "
        "(docs/faults.md); the table recovers by itself and voids the deals it could not "
        "journal. Acknowledge once the cause is found.",
    ),
    Alarm(
        "journal_fault",
        "warning",
        "no",
        "The voided rounds were never settled: collect and return those wagers as void.",
        "Read how long the journal failed and which rounds were voided (in the alarm).",
    ),
    Alarm(
        "disk_space_low",
        "critical",
        _LATCH,
        "Deal on.",
        "Free space on the journal's disk before it fills (old archives off the table "
        "computer, retention_days); acknowledge.",
    ),
    Alarm("disk_space_ok", "info", "no", "Nothing.", "Nothing: the disk has room again."),
    Alarm(
        "clock_unsynchronized",
        "warning",
        "no",
        "Deal on.",
        "No time service synchronises the table computer's clock: signed commands may be "
        "refused as outside their window and the records' times drift; start systemd-"
        "timesyncd or chrony (docs/operations.md, Time).",
    ),
    Alarm("clock_synchronized", "info", "no", "Nothing.", "Nothing: the clock is synchronised."),
    Alarm(
        "deck_integrity",
        "critical",
        _LATCH,
        "The round is dead or misdealt: do not pay it; keep the cards for the supervisor.",
        "Inspect the deck and the shuffler (a foreign, duplicate or second joker card, a "
        "replayed deal); surveillance; acknowledge.",
    ),
    Alarm(
        "deal_timeout",
        "critical",
        _LATCH,
        "The round is dead: no one is paid by it; deal again when the device is back.",
        "A device went silent mid-deal: check the shuffler/shoe and its cable; acknowledge.",
    ),
    Alarm(
        "device_fault",
        "warning",
        "no",
        "Follow the device's own display; call the supervisor if it repeats.",
        "The device reported a fault (its code is in the alarm): check it.",
    ),
    Alarm(
        "device_offline",
        "warning",
        "no",
        "Do not start a deal until the device is back (the page shows it).",
        "Check the device's power and cable; it reconnects by itself.",
    ),
    Alarm(
        "frame_error",
        "warning",
        "no",
        "Deal on; a deal that loses a packet goes dead by itself.",
        "Garbled data from a device (line noise, a bad cable): one alarm an interval counts "
        "them; check the cable.",
    ),
    Alarm(
        "device_flood",
        "critical",
        _LATCH,
        "Stop dealing with that device; call the supervisor.",
        "A device sent far more than a table can: unplug it, check it; acknowledge.",
    ),
    Alarm(
        "stub_without_deal",
        "warning",
        "no",
        "Nothing: a stub arrived with no deal open.",
        "A shuffler out of step: watch for repeats.",
    ),
    Alarm(
        "position_replaced",
        "info",
        "no",
        "Nothing: the new first-position draw counts.",
        "Nothing.",
    ),
    Alarm(
        "position_ignored",
        "warning",
        "no",
        "The first draw stands: do not draw again.",
        "A second draw in one round was ignored: check the RNG box or dice procedure.",
    ),
    Alarm(
        "position_invalid",
        "warning",
        "no",
        "Draw again (the number or dice were not valid).",
        "Check the RNG box or dice reader if it repeats.",
    ),
    Alarm(
        "game_protection",
        "warning or critical (by finding)",
        "yes: every game-protection alarm, until acknowledged (which restarts its test)",
        "Deal on unless the supervisor says otherwise.",
        "A device's output departs from the exact fair law (docs/protection.md): read the "
        "evidence on the supervisor page, inspect the device; acknowledge.",
    ),
    Alarm(
        "command_refused",
        "critical (PINs, signatures, floods) or warning (malformed)",
        "when critical",
        "If it was you: check the PIN and try again after the lockout.",
        "Repeated refusals from one source (a guessed PIN, a forged or replayed command): "
        "who and from where is in the alarm and the journal; acknowledge.",
    ),
    Alarm(
        "round_voided",
        "warning",
        "no",
        "The round is void: return the wagers as void.",
        "Who voided it and why are in the alarm and the journal.",
    ),
    Alarm(
        "setting_corrected",
        "warning",
        "no",
        "Nothing: the corrected setting is the one that counts.",
        "A player's setting was corrected (by whom, why): review it.",
    ),
    Alarm(
        "correction_refused",
        "warning",
        "no",
        "The correction did not count: call the supervisor.",
        "Over the corrections limit, or missing a supervisor or reason: review it.",
    ),
    Alarm(
        "journal_chain_broken",
        "critical",
        _LATCH,
        "Deal on; call the supervisor.",
        "The journal was edited outside the table: keep a copy, run `paigow-table audit "
        "verify`, report it; raised again at every start until the journal is mended.",
    ),
    Alarm(
        "kept_state_edited",
        "critical",
        _LATCH,
        "Deal on; call the supervisor.",
        "The table's kept state was edited outside it (it uses the chained record): run "
        "`paigow-table audit verify`, report it; acknowledge.",
    ),
    Alarm(
        "latched_alarm_unreadable",
        "critical",
        _LATCH,
        "Deal on; call the supervisor.",
        "A kept alarm could not be read: look at `paigow-table audit recall` before acknowledging.",
    ),
)

#: Why a round closes dead, misdealt or void (the round's ``reasons``), and what follows.
REASONS: Final[dict[str, tuple[str, str]]] = {
    "short_packet": ("dead", "All hands dead: return every wager; deal again."),
    "missing_packet": ("dead", "All hands dead: return every wager; deal again."),
    "long_packet": ("misdeal", "Misdeal: return every wager; check the deck."),
    "extra_packet": ("misdeal", "Misdeal: return every wager; check the deck."),
    "duplicate_card": ("misdeal", "Misdeal and a deck_integrity alarm: keep the cards."),
    "foreign_card": ("misdeal", "Misdeal and a deck_integrity alarm: keep the cards."),
    "second_joker": ("misdeal", "Misdeal and a deck_integrity alarm: keep the cards."),
    "bad_stub": ("misdeal", "Misdeal: the stub does not complete the deck; check the deck."),
    "replayed_deal": ("dead", "Dead and a deck_integrity alarm: a deal seen before."),
    "new_deal": ("dead", "The earlier deal never completed: its round is dead."),
    "deal_timeout": ("dead", "A device went silent mid-deal: dead, with a critical alarm."),
    "restart": ("void", "The controller restarted mid-round: void, nobody is paid by it."),
    "void": ("void", "Voided by a supervisor (who and why are journaled)."),
    "journal_fault": ("void", "The journal could not be written: void (docs/faults.md)."),
}

ALARM_CODES: Final[tuple[str, ...]] = tuple(a.code for a in ALARMS)


def render() -> str:
    """docs/alarms.md."""
    lines = [
        "# Alarms and round reasons",
        "",
        "Generated from `controller/catalogue.py` (`python -m controller.catalogue > "
        "docs/alarms.md`); a test fails when the code raises an alarm or gives a reason this "
        "page does not list. The alarm schema (`docs/schemas/paigow.alarm.v1.json`) lists the "
        "same codes as an enum.",
        "",
        "## Alarms",
        "",
        "| code | the page says | severity | latches | the dealer | the supervisor |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| `{a.code}` | {words(a.code)} | {a.severity} | {a.latches} | {a.dealer} | "
        f"{a.supervisor} |"
        for a in ALARMS
    ]
    lines += [
        "",
        "## Why a round is dead, misdealt or void",
        "",
        "| reason | the page says | the round | what follows |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| `{code}` | {words(code)} | {status} | {follows} |"
        for code, (status, follows) in REASONS.items()
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
