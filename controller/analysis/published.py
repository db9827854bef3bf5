"""The figures the source documents publish (docs/rules.md §9), as data to set ours beside.

From the rule sheet filed with the regulator: the Chan Chu house edges. From the outside analysis (a
published math analysis of the game): the PT3 counts and returns, the Envy value, the base game's
1.82%, the Jacks Beat table. The outside analysis's Jacks Beat rows are given here under the lines
they belong to, read as docs/rules.md §9 explains (its labels are shifted by one row against its
pays); ``ANALYSIS_JACKS_BEAT_LABELS`` keeps its own labels."""

from __future__ import annotations

from typing import Final

from controller.game.paytables import CHAN_CHU_PAYTABLES

ALL_HANDS: Final = 154_143_080

# The outside analysis, Chan Chu, Binion's paytable (our PT3): combinations per line paid.
ANALYSIS_PT3_COMBINATIONS: Final[dict[str, int]] = {
    "natural_7_straight_flush": 32,
    "royal_flush_royal_match": 72,
    "wild_7_straight_flush": 196,
    "five_aces": 1_128,
    "royal_flush": 26_020,
    "straight_flush": 184_644,
    "four_of_a_kind": 307_472,
    "full_house": 4_188_528,
    "flush": 6_172_088,
    "three_of_a_kind": 7_672_500,
    "straight": 11_034_204,
    "three_pair": 2_862_000,
    "other": 121_694_196,
}
ANALYSIS_PT3_HOUSE_EDGE: Final = 0.080008

# The rule sheet, the posted Chan Chu house edges (fractions, not percent).
RULE_SHEET_CHAN_CHU_HOUSE_EDGE: Final[dict[str, float]] = {
    name: round(table.posted_house_edge / 100, 6)
    for name, table in CHAN_CHU_PAYTABLES.items()
    if table.posted_house_edge is not None
}

# The outside analysis: the Envy bonus (PT3) is worth 2.699¢ per other player, 0.54% of a $5 wager.
ANALYSIS_ENVY_PT3_VALUE_DOLLARS: Final = 0.026990
ANALYSIS_ENVY_PT3_PER_PLAYER_5_DOLLARS: Final = 0.0054
# The outside analysis's PT3 house edge by other players (rows) and Chan Chu wager (columns $5,
# $10, $25).
ANALYSIS_ENVY_PT3_HOUSE_EDGE: Final[dict[int, tuple[float, float, float]]] = {
    6: (0.0476, 0.0638, 0.0735),
    5: (0.0530, 0.0665, 0.0746),
    4: (0.0584, 0.0692, 0.0757),
    3: (0.0638, 0.0719, 0.0768),
    2: (0.0692, 0.0746, 0.0778),
    1: (0.0746, 0.0773, 0.0789),
    0: (0.0800, 0.0800, 0.0800),
}
ENVY_WAGERS: Final = (5, 10, 25)

# docs/rules.md §9: the dealer holds two or more Jacks 7.98% of the time (the outside analysis, lab
# report).
ANALYSIS_DEALER_TWO_JACKS: Final = 0.0798

# The outside analysis quotes the lab report's base-game house edge without its player strategy.
ANALYSIS_BASE_GAME_HOUSE_EDGE: Final = 0.0182
ANALYSIS_FACE_UP_HOUSE_EDGE: Final = 0.0181

# The outside analysis, Jacks Beat, paytable B: probability (joint with two dealer Jacks) by our
# line.
ANALYSIS_JACKS_BEAT_B: Final[dict[str, float]] = {
    "five_aces": 0.00000070,
    "royal_flush": 0.00001006,
    "straight_flush": 0.00010112,
    "four_of_a_kind": 0.00017322,
    "full_house": 0.00226068,
    "flush": 0.00321074,
    "straight": 0.00579853,
    "three_of_a_kind": 0.00397154,
    "two_pair": 0.01859837,
    "pair": 0.03310110,
    "high_card": 0.01261686,
    "lose": 0.92015708,
}
ANALYSIS_JACKS_BEAT_LABELS: Final[dict[str, str]] = {
    "five_aces": "Five Aces",
    "royal_flush": "Royal Flush",
    "straight_flush": "Straight flush",
    "four_of_a_kind": "Four of a Kind",
    "full_house": "Full house",
    "flush": "Flush",
    "straight": "Three of a kind",
    "three_of_a_kind": "Straight",
    "two_pair": "Three pair",
    "pair": "Two pair",
    "high_card": "Pair",
    "lose": "Dealer qualified",
}
ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE: Final = 0.088405
