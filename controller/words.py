"""The words a dealer uses for the codes the rules and messages carry (one table for every screen).

Messages on the wire and in the journal keep their codes (``three_of_a_kind``, ``short_packet``);
what a person reads — the dealer page, the supervisor page, the demo's printout, the feed printer
— says "three of a kind" and "a packet was short". :func:`words` is the one lookup; the display
serves the same table to the pages (``/api/words``).
"""

from __future__ import annotations

from typing import Final

#: Side-wager lines (docs/rules.md §8), as the paytables name them.
LINES: Final[dict[str, str]] = {
    "any_7_straight_flush": "7-card straight flush",
    "natural_7_straight_flush": "natural 7-card straight flush",
    "royal_flush_royal_match": "royal flush with royal match",
    "wild_7_straight_flush": "wild 7-card straight flush",
    "super_full_house": "super full house",
    "five_aces": "five Aces",
    "natural_7_flush": "natural 7-card flush",
    "royal_flush": "royal flush",
    "natural_7_straight": "natural 7-card straight",
    "straight_flush": "straight flush",
    "four_of_a_kind": "four of a kind",
    "full_house": "full house",
    "flush": "flush",
    "three_of_a_kind": "three of a kind",
    "straight": "straight",
    "three_pair": "three pair",
    "two_pair": "two pair",
    "pair": "a pair",
    "high_card": "high card",
    "other": "no line",
    "dealer_and_player_ace_high": "dealer and player Ace-high",
    "dealer_ace_high_joker": "dealer Ace-high with the joker",
    "dealer_ace_high": "dealer Ace-high pai gow",
}

#: Why the Pai Gow wager came out as it did (docs/rules.md §5).
PAI_GOW_REASONS: Final[dict[str, str]] = {
    "foul": "foul",
    "dealer_two_jacks": "dealer has two Jacks",
    "won_both": "won both hands",
    "won_one": "won one hand",
    "won_neither": "won neither hand",
}

#: Why a round is dead, misdealt or void (docs/rules.md §6), and device faults.
PROBLEMS: Final[dict[str, str]] = {
    "short_packet": "a packet was short",
    "long_packet": "a packet had too many cards",
    "missing_packet": "a packet was not dealt",
    "extra_packet": "more than seven packets",
    "duplicate_card": "a card came twice",
    "foreign_card": "a card not of this deck",
    "second_joker": "a second joker",
    "bad_stub": "the stub does not complete the deck",
    "new_deal": "a new deal began",
    "deal_timeout": "the deal stopped",
    "void": "voided by the dealer",
    "restart": "the controller restarted",
    "silence": "the device went silent mid-deal",
    "dice_misread": "the dice were misread",
    "dice_hardware": "dice reader fault",
    "journal_fault": "the journal could not be written",
    "replayed_deal": "a deal seen before (replayed)",
}

#: Alarms (the table's alarm codes).
ALARMS: Final[dict[str, str]] = {
    "device_fault": "device fault",
    "frame_error": "garbled data from a device",
    "stub_without_deal": "a stub with no deal",
    "position_replaced": "first position drawn again",
    "position_ignored": "second first-position draw ignored",
    "position_invalid": "invalid first-position draw",
    "deck_integrity": "deck integrity",
    "device_offline": "device offline",
    "round_voided": "round voided",
    "setting_corrected": "a player's setting corrected",
    "correction_refused": "a correction refused (over the limit)",
    "table_fault": "TABLE FAULT: the journal cannot be written",
    "journal_fault": "the journal could not be written",
    "device_flood": "a device sent too much",
    "disk_space_low": "the journal's disk is nearly full",
    "disk_space_ok": "the journal's disk has space again",
    "clock_unsynchronized": "the clock is not synchronised",
    "clock_synchronized": "the clock is synchronised again",
    "journal_chain_broken": "the journal was edited outside the table (its hash chain is broken)",
    "kept_state_edited": "the table's kept state was edited outside it",
    "latched_alarm_unreadable": "a kept alarm could not be read",
    "command_refused": "commands refused",
    "game_protection": "game protection",
}

#: Why a command was refused before the table (the ``command_refused`` alarm's detail).
REFUSALS: Final[dict[str, str]] = {
    "wrong_pin": "wrong PIN",
    "locked_out": "locked out after wrong PINs",
    "rate_limited": "over the rate limit",
    "flood": "over the unsigned commands' budget",
}

#: How the first position was drawn (docs/rules.md §6).
METHODS: Final[dict[str, str]] = {
    "rng": "RNG box",
    "software_rng": "software RNG",
    "dice": "dice reader",
    "dice_manual": "dice keyed by the dealer",
}

_ALL: Final[dict[str, str]] = {
    **LINES,
    **PAI_GOW_REASONS,
    **PROBLEMS,
    **ALARMS,
    **METHODS,
    **REFUSALS,
}


def words(code: str) -> str:
    """The dealer's words for a code; an unknown code has its underscores spaced (never shown
    raw)."""
    return _ALL.get(code, code.replace("_", " "))


def table() -> dict[str, str]:
    """Every code with its words, for the pages."""
    return dict(_ALL)
