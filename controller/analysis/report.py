"""docs/math.md: every figure of docs/rules.md §9 computed by the engine, beside the published
figures.

Run ``paigow-table analyze report [--output docs/math.md] [--rounds N] …``. The exact figures
(census, Chan Chu, Envy, dealer Jacks, Jacks Beat) do not depend on the options; the Monte Carlo
ones (Push Ace High, the base game) depend on the rounds and the seed only, not on the workers.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from controller.analysis.base_game import STRATEGIES, BaseGame, BaseGameFigures, base_game_figures
from controller.analysis.census import Census, full_census
from controller.analysis.chan_chu import ChanChuFigures, all_chan_chu_figures
from controller.analysis.montecarlo import CHUNK_ROUNDS, RunResult, simulate
from controller.analysis.progress import Progress
from controller.analysis.published import (
    ALL_HANDS,
    ANALYSIS_BASE_GAME_HOUSE_EDGE,
    ANALYSIS_DEALER_TWO_JACKS,
    ANALYSIS_ENVY_PT3_HOUSE_EDGE,
    ANALYSIS_ENVY_PT3_PER_PLAYER_5_DOLLARS,
    ANALYSIS_ENVY_PT3_VALUE_DOLLARS,
    ANALYSIS_FACE_UP_HOUSE_EDGE,
    ANALYSIS_JACKS_BEAT_B,
    ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE,
    ANALYSIS_JACKS_BEAT_LABELS,
    ANALYSIS_PT3_COMBINATIONS,
    ANALYSIS_PT3_HOUSE_EDGE,
    ENVY_WAGERS,
    RULE_SHEET_CHAN_CHU_HOUSE_EDGE,
)
from controller.analysis.side_bets import (
    DealerJacks,
    PushAceHighGame,
    SideFigures,
    ace_high_exact_marginals,
    dealer_jacks,
    figures_from_run,
    jacks_beat_exact,
)
from controller.game.paytables import JACKS_BEAT_PAYTABLES, push_ace_high_paytable
from controller.game.setting import Rules

POINT = 0.0001  # 0.01 percentage points, as a fraction of the wager


def pct(x: float, digits: int = 2) -> str:
    return f"{x * 100 + 0.0:.{digits}f}%"


def _table(head: Sequence[str], rows: Sequence[Sequence[object]], align: str = "") -> list[str]:
    """A markdown table; ``align`` has one letter per column, l or r (default: l, then r)."""
    align = align or "l" + "r" * (len(head) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(head) + " |", "| " + " | ".join(rule) + " |"]
    out.extend("| " + " | ".join(str(c) for c in row) + " |" for row in rows)
    return [*out, ""]


def _agree(ok: bool) -> str:
    return "yes" if ok else "**no**"


def _within(ours: float, seed: float, tolerance: float) -> bool:
    return abs(ours - seed) <= tolerance + 1e-12


# --- sections ------------------------------------------------------------------------------------


def _summary(
    census: Census,
    chan_chu: list[ChanChuFigures],
    jacks: DealerJacks,
    jacks_b: SideFigures,
    games: dict[str, BaseGameFigures],
) -> list[str]:
    pt3 = next(f for f in chan_chu if f.paytable == "PT3")
    rows = [
        *_census_rows(census, pt3),
        *_chan_chu_rows(chan_chu),
        *_side_rows(pt3, jacks, jacks_b),
        *_base_game_rows(games),
    ]
    return [
        "## Summary",
        "",
        "Exact figures must equal the sources' to the digits the sources print "
        "(house edges to 0.01",
        "percentage points); the base game's 1.82% is set beside two strategies, not matched.",
        "",
        *_table(["figure", "ours", "seed", "agrees"], rows),
    ]


def _census_rows(census: Census, pt3: ChanChuFigures) -> list[list[object]]:
    """Summary rows: the census's hands, PT3's combinations and house edge."""
    counts_equal = all(
        pt3.line(line).combinations == n for line, n in ANALYSIS_PT3_COMBINATIONS.items()
    )
    return [
        [
            "all seven-card hands",
            f"{census.total:,}",
            f"{ALL_HANDS:,}",
            _agree(census.total == ALL_HANDS),
        ],
        [
            "Chan Chu PT3 combinations, 13 lines",
            "as seed" if counts_equal else "differ",
            "the outside analysis",
            _agree(counts_equal),
        ],
        [
            "Chan Chu PT3 house edge",
            pct(pt3.house_edge, 4),
            pct(ANALYSIS_PT3_HOUSE_EDGE, 4),
            _agree(_within(pt3.house_edge, ANALYSIS_PT3_HOUSE_EDGE, 0.0000005)),
        ],
    ]


def _chan_chu_rows(chan_chu: list[ChanChuFigures]) -> list[list[object]]:
    """Summary rows: each Chan Chu paytable's house edge beside the rule sheet's."""
    rows: list[list[object]] = []
    for f in chan_chu:
        posted = RULE_SHEET_CHAN_CHU_HOUSE_EDGE[f.paytable]
        rows.append(
            [
                f"Chan Chu {f.paytable} house edge (to 0.01 points)",
                pct(f.house_edge, 4),
                pct(posted),
                _agree(_within(f.house_edge, posted, POINT)),
            ]
        )
    return rows


def _side_rows(pt3: ChanChuFigures, jacks: DealerJacks, jacks_b: SideFigures) -> list[list[object]]:
    """Summary rows: Envy PT3, the dealer's two Jacks, Jacks Beat B."""
    assert pt3.envy is not None
    return [
        [
            "Envy PT3: one other player, $5 wager",
            pct(pt3.envy.per_player(5), 4),
            pct(ANALYSIS_ENVY_PT3_PER_PLAYER_5_DOLLARS),
            _agree(
                _within(pt3.envy.per_player(5), ANALYSIS_ENVY_PT3_PER_PLAYER_5_DOLLARS, 0.00005)
            ),
        ],
        [
            "dealer two or more Jacks",
            pct(float(jacks.probability), 4),
            pct(ANALYSIS_DEALER_TWO_JACKS),
            _agree(_within(float(jacks.probability), ANALYSIS_DEALER_TWO_JACKS, 0.00005)),
        ],
        [
            "Jacks Beat B house edge",
            pct(jacks_b.house_edge, 4),
            pct(ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE, 4),
            _agree(_within(jacks_b.house_edge, ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE, POINT)),
        ],
    ]


def _base_game_rows(games: dict[str, BaseGameFigures]) -> list[list[object]]:
    """Summary rows: each strategy's base game house edge beside the lab report's."""
    rows: list[list[object]] = []
    for strategy, g in games.items():
        lo, hi = g.overall.ci95
        rows.append(
            [
                f"base game, player {strategy}",
                f"{pct(g.overall.house_edge, 3)} [{pct(lo, 3)}, {pct(hi, 3)}]",
                pct(ANALYSIS_BASE_GAME_HOUSE_EDGE),
                "inside the interval" if lo <= ANALYSIS_BASE_GAME_HOUSE_EDGE <= hi else "outside",
            ]
        )
    return rows


def _chan_chu_section(census: Census, figures: list[ChanChuFigures]) -> list[str]:
    out = [
        "## Chan Chu (exact)",
        "",
        f"Every one of the {census.total:,} seven-card hands, as {census.classes:,} classes",
        "of hands that the rules treat alike (`controller/analysis/hand_classes.py`), each paid",
        "by the engine's `wagers.chan_chu` on one hand of the class. A hand is paid its best",
        "line: combinations below count the hands *paid* each line.",
        "",
    ]
    for f in figures:
        is_pt3 = f.paytable == "PT3"
        head = ["line", "pays", "combinations", "probability", "return"]
        if is_pt3:
            head += ["the outside analysis", "equal"]
        rows: list[list[object]] = []
        for line in f.lines:
            row: list[object] = [
                f"`{line.line}`",
                line.pays,
                f"{line.combinations:,}",
                f"{line.probability:.8f}",
                f"{line.ret:.6f}",
            ]
            if is_pt3:
                seed = ANALYSIS_PT3_COMBINATIONS[line.line]
                row += [f"{seed:,}", _agree(seed == line.combinations)]
            rows.append(row)
        posted = RULE_SHEET_CHAN_CHU_HOUSE_EDGE[f.paytable]
        out += [
            f"### {f.paytable}",
            "",
            *_table(head, rows),
            f"House edge **{pct(f.house_edge, 4)}** ({f.house_edge:.6f}); the rule sheet posts "
            f"{pct(posted)}"
            + (f", the outside analysis prints {ANALYSIS_PT3_HOUSE_EDGE:.6f}." if is_pt3 else "."),
            "",
        ]
    return out


def _envy_section(figures: list[ChanChuFigures]) -> list[str]:
    out = [
        "## Chan Chu Envy bonus (exact)",
        "",
        "What one other player's Chan Chu hand is worth, on average, to a player paid the Envy",
        "bonus (dollars), and so how much each other participating player lowers the house edge",
        "of a Chan Chu wager of $5, $10 or $25.",
        "",
    ]
    for f in figures:
        if f.envy is None:
            continue
        e = f.envy
        rows = [
            [
                f"`{line.line}`",
                f"${line.pays}",
                f"{line.combinations:,}",
                f"{line.probability:.8f}",
                f"{line.ret:.6f}",
            ]
            for line in e.lines
        ]
        out += [
            f"### {e.paytable}",
            "",
            *_table(["line", "pays", "combinations", "probability", "value ($)"], rows),
        ]
        seed_value = (
            f" The outside analysis: ${ANALYSIS_ENVY_PT3_VALUE_DOLLARS:.6f}, "
            f"{pct(ANALYSIS_ENVY_PT3_PER_PLAYER_5_DOLLARS)} of $5."
            if e.paytable == "PT3"
            else ""
        )
        out += [
            f"Worth **${e.value_dollars:.6f}** per other player: "
            f"{pct(e.per_player(5), 4)} of a $5 wager, {pct(e.per_player(10), 4)} of $10, "
            f"{pct(e.per_player(25), 4)} of $25.{seed_value}",
            "",
        ]
        head = ["other players", *(f"${w} wager" for w in ENVY_WAGERS)]
        rows2: list[list[object]] = []
        for n in sorted(e.house_edge_by_players, reverse=True):
            row: list[object] = [n]
            for i, w in enumerate(ENVY_WAGERS):
                cell = pct(e.house_edge_by_players[n][w])
                if e.paytable == "PT3":
                    cell += f" (seed {pct(ANALYSIS_ENVY_PT3_HOUSE_EDGE[n][i])})"
                row.append(cell)
            rows2.append(row)
        out += [
            f"House edge of Chan Chu {e.paytable} with the Envy bonus:",
            "",
            *_table(head, rows2),
        ]
    return out


def _jacks_section(jacks: DealerJacks) -> list[str]:
    return [
        "## The dealer's two Jacks (exact)",
        "",
        "Hands counted by how many Jacks they hold, each kind judged by the engine's",
        "`wagers.dealer_has_two_jacks` (never the joker), beside the closed form; the census of",
        "all hands gives the same count.",
        "",
        *_table(
            ["", "hands", "probability"],
            [
                ["counted", f"{jacks.hands:,}", f"{float(jacks.probability):.10f}"],
                [
                    "census of all hands",
                    f"{jacks.census_hands:,}" if jacks.census_hands is not None else "—",
                    f"{(jacks.census_hands or 0) / jacks.total:.10f}",
                ],
                [
                    "1 − (C(49,7) + 4·C(49,6)) / C(53,7)",
                    "",
                    f"{float(jacks.closed_form):.10f}",
                ],
                ["the outside analysis (lab report)", "", pct(ANALYSIS_DEALER_TWO_JACKS)],
            ],
        ),
        "Counted and closed form are the same fraction: "
        f"{_agree(jacks.probability == jacks.closed_form)}.",
        "",
    ]


def _jacks_beat_section(figures: list[SideFigures]) -> list[str]:
    out = [
        "## Jacks Beat (exact)",
        "",
        "The player's best five of seven decides the line; the dealer's two Jacks depend on the",
        "player's hand only through the Jacks the player holds. So each line's probability,",
        "joint with the dealer's two Jacks, is a sum over the census of the player's hands of the",
        "hands paid that line times the dealer hands with two Jacks among the 46 cards left, over",
        "C(53,7)·C(46,7). The line is the engine's `wagers.jacks_beat`.",
        "",
        "The outside analysis analyses paytable B, its row labels shifted by one against its pays "
        "(docs/rules.md",
        "§9); its rows are set beside the lines they belong to, its own label in brackets.",
        "",
    ]
    for f in figures:
        is_b = f.paytable == "B"
        head = ["line", "pays", "probability", "return"]
        if is_b:
            head += ["the outside analysis", "equal to 8 places"]
        rows: list[list[object]] = []
        for line in f.lines:
            row: list[object] = [
                f"`{line.line}`",
                line.pays,
                f"{line.probability:.8f}",
                f"{line.ret:.6f}",
            ]
            if is_b:
                seed = ANALYSIS_JACKS_BEAT_B[line.line]
                row += [
                    f"{seed:.8f} ({ANALYSIS_JACKS_BEAT_LABELS[line.line]})",
                    _agree(round(line.probability, 8) == seed),
                ]
            rows.append(row)
        seed_edge = (
            f"; the outside analysis {pct(ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE, 4)}" if is_b else ""
        )
        out += [f"### Paytable {f.paytable}", "", *_table(head, rows)]
        out += [f"House edge **{pct(f.house_edge, 4)}**{seed_edge}.", ""]
    b = next(f for f in figures if f.paytable == "B")
    out += [
        f"The outside analysis's house edge {ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE:.6f} "
        "is the sum of its rounded",
        f'returns; the exact one is {b.house_edge:.6f}. Its "dealer qualified" row, 0.92015708,',
        f"is one in the last place below 1 − P(two Jacks) = {b.line('lose').probability:.10f}.",
        "",
    ]
    return out


def _ace_high_section(figures: SideFigures, marginals: dict[str, float]) -> list[str]:
    assert figures.ci95 is not None and figures.run is not None
    rows = [
        [
            f"`{line.line}`",
            line.pays,
            f"{line.count:,}",
            f"{line.probability:.6f}",
            f"{line.ret:.6f}",
        ]
        for line in figures.lines
    ]
    lo, hi = figures.ci95
    mc_joker = figures.line("dealer_ace_high_joker").probability
    return [
        "## Push Ace High (Monte Carlo)",
        "",
        f"{figures.total:,} deals (seed {figures.run.seed}), each settled by the engine's",
        "`wagers.push_ace_high`. The sources publish no figures for this wager.",
        "",
        *_table(["line", "pays", "rounds", "probability", "return"], rows),
        f"House edge **{pct(figures.house_edge, 3)}**, 95% interval [{pct(lo, 3)}, {pct(hi, 3)}].",
        "",
        "Exact single-hand chances from the census, as a check on the deals: the dealer is",
        f"Ace-high pai gow {marginals['dealer_ace_high']:.6f} of the time (Monte Carlo: "
        f"{1 - figures.line('lose').probability:.6f}), with the joker "
        f"{marginals['dealer_ace_high_joker']:.6f}; the 15-to-1 line, which also needs the player",
        f"not Ace-high, came {mc_joker:.6f}.",
        "",
    ]


def _base_game_section(games: dict[str, BaseGameFigures]) -> list[str]:
    out = [
        "## The Pai Gow wager (Monte Carlo)",
        "",
        "The dealer sets by the House Way; the player either sets by the House Way too, or plays",
        "the best reply to the dealer's exposed setting (the split with the best outcome; the",
        "search is `base_game.best_reply`, tested against the engine's `best_setting_against`).",
        "Every round is settled by the engine's `wagers.settle_pai_gow`. Both strategies see the",
        "same deals. *Part* is a class's contribution to the overall house edge.",
        "",
    ]
    for strategy, g in games.items():
        run = g.run
        rows: list[list[object]] = []
        for cls, r in (*g.by_class.items(), ("all", g.overall)):
            rows.append(
                [
                    cls,
                    pct(r.share),
                    pct(r.win),
                    pct(r.push),
                    pct(r.lose),
                    pct(r.house_edge),
                    pct(r.contribution),
                ]
            )
        lo, hi = g.overall.ci95
        out += [
            f"### Player: {strategy}",
            "",
            f"{run.rounds:,} rounds, seed {run.seed}.",
            "",
            *_table(["dealer class", "share", "win", "push", "lose", "house edge", "part"], rows),
            f"House edge **{pct(g.overall.house_edge, 3)}**, "
            f"95% interval [{pct(lo, 3)}, {pct(hi, 3)}].",
            "",
        ]
    out += ["### Beside the lab report's 1.82%", "", *_implications(games), ""]
    return out


def _implications(games: dict[str, BaseGameFigures]) -> list[str]:
    seed = ANALYSIS_BASE_GAME_HOUSE_EDGE
    opt, hw = games.get("optimal"), games.get("house-way")
    lines: list[str] = []
    if opt is None or hw is None:
        return ["Both strategies are needed for the comparison."]
    o_lo, o_hi = opt.overall.ci95
    h_lo, h_hi = hw.overall.ci95
    where = (
        "lies between the two"
        if o_hi < seed < h_lo
        else "is inside the best reply's interval"
        if o_lo <= seed <= o_hi
        else "is inside the House Way player's interval"
        if h_lo <= seed <= h_hi
        else "lies outside both"
    )
    lines.append(
        f"The outside analysis quotes {pct(seed)} from the lab report, "
        "which does not say how the player sets."
        f" Against our House Way dealer, a player who copies the House Way faces "
        f"{pct(hw.overall.house_edge)} (95%: {pct(h_lo)} to {pct(h_hi)}); a player who plays the"
        f" best reply to the exposed hand faces {pct(opt.overall.house_edge)} ({pct(o_lo)} to"
        f" {pct(o_hi)}). The quoted figure {where}."
    )
    gap = hw.overall.house_edge - opt.overall.house_edge
    lines.append("")
    lines.append(
        f"- Playing the best reply instead of the House Way is worth about {pct(gap, 1)} of the"
        " wager. The split by dealer class shows where: the best reply wins far more often"
        " against Ace-high dealers and against ordinary hands, while the two Jacks take the"
        " same share of rounds from both players."
    )
    if o_hi < seed < h_lo:
        lines.append(
            "- So the lab's 1.82% is neither strategy here. It implies a player who uses the"
            " exposed hand, but not perfectly (a House Way with some dealer-dependent changes),"
            " or a different House Way or ranking in the lab's model; the lab report would have"
            " to say which before the figure can be reproduced."
        )
    if o_hi < seed:
        sign = "a player advantage" if opt.overall.house_edge < 0 else "a house edge"
        lines.append(
            f"- Against perfect play the game holds {sign} of about"
            f" {pct(abs(opt.overall.house_edge))}: its edge rests on players not finding the"
            " best reply. A casino choosing this game, and a regulator reading the lab report,"
            " should know that the quoted edge is a statement about player skill, not a"
            " property of the cards alone."
        )
    two_jacks = opt.by_class["two_jacks"].contribution
    ace_high = [g.by_class["ace_high"].contribution for g in (opt, hw)]
    lines.append(
        f"- The outside analysis quotes {pct(ANALYSIS_FACE_UP_HOUSE_EDGE)} for Face Up Pai Gow, "
        "whose dealer"
        " pushes on Ace-high pai gow instead of winning on two Jacks. Here the two-Jack rule"
        f" takes {pct(two_jacks)} of the wager from either player; an Ace-high push would"
        f" instead take back what Ace-high dealers give: {pct(-ace_high[0])} to the best reply,"
        f" {pct(-ace_high[1])} to the House Way player (`analyze base-game --ace-high-pushes`"
        " runs that switch on top of the two-Jack rule)."
    )
    return lines


# --- the document --------------------------------------------------------------------------------


def build_report(*, rounds: int, side_rounds: int, seed: int, workers: int, rules: Rules) -> str:
    """Compute every figure and return docs/math.md's text."""
    started = time.perf_counter()
    census = full_census(workers=workers, progress=Progress("census of all hands"))
    chan_chu = all_chan_chu_figures(census)
    jacks = dealer_jacks(census)
    jacks_beat = [jacks_beat_exact(census, name, rules) for name in JACKS_BEAT_PAYTABLES]
    ace_run = simulate(
        PushAceHighGame(rules),
        side_rounds,
        seed=seed,
        workers=workers,
        progress=Progress("Push Ace High"),
    )
    ace = figures_from_run("push_ace_high", push_ace_high_paytable(), ace_run)
    games = _base_games(rounds, seed=seed, workers=workers, rules=rules)
    way_games = _way_games(rounds, seed=seed, workers=workers, rules=rules)
    differ = _differ_from_filed(workers=workers, rules=rules)
    total = time.perf_counter() - started
    jacks_b = next(f for f in jacks_beat if f.paytable == "B")
    parts = [
        _head(rules, rounds=rounds, side_rounds=side_rounds, seed=seed),
        _summary(census, chan_chu, jacks, jacks_b, games),
        _chan_chu_section(census, chan_chu),
        _envy_section(chan_chu),
        _jacks_section(jacks),
        _jacks_beat_section(jacks_beat),
        _ace_high_section(ace, ace_high_exact_marginals(census)),
        _base_game_section(games),
        ways_section(games, way_games, differ),
        _CHECKS,
        _runtime_section(census, games, ace_run, total),
    ]
    return "\n".join(line for part in parts for line in part).rstrip() + "\n"


def _base_games(
    rounds: int, *, seed: int, workers: int, rules: Rules
) -> dict[str, BaseGameFigures]:
    """The base game played ``rounds`` rounds by each player strategy."""
    games: dict[str, BaseGameFigures] = {}
    for strategy in STRATEGIES:
        game = BaseGame(strategy, rules)
        run = simulate(
            game, rounds, seed=seed, workers=workers, progress=Progress(f"base game, {strategy}")
        )
        games[strategy] = base_game_figures(game, run)
    return games


def _way_games(
    rounds: int, *, seed: int, workers: int, rules: Rules
) -> dict[str, dict[str, BaseGameFigures]]:
    """Each shipped way but the filed one (the rule code's figures above are the filed way's),
    dealer and house-way player on it, by each player strategy, on the same deals."""
    from controller.game.way.engine import DEFAULT_WAY, shipped_ways

    out: dict[str, dict[str, BaseGameFigures]] = {}
    for name, path in shipped_ways().items():
        if name == DEFAULT_WAY:
            continue
        out[name] = {}
        for strategy in STRATEGIES:
            game = BaseGame(strategy, rules, str(path))
            run = simulate(
                game,
                rounds,
                seed=seed,
                workers=workers,
                progress=Progress(f"base game, {name}, {strategy}"),
            )
            out[name][strategy] = base_game_figures(game, run)
    return out


def _differ_from_filed(*, workers: int, rules: Rules) -> dict[str, tuple[float, str, str, float]]:
    """For each other shipped way: the exact share of hands it sets otherwise than the filed
    way, and the rule pair that accounts for most of them with its share."""
    from controller.game.way import load_way
    from controller.game.way.diff import diff_ways
    from controller.game.way.engine import DEFAULT_WAY, shipped_ways

    filed = load_way(DEFAULT_WAY)
    out: dict[str, tuple[float, str, str, float]] = {}
    for name in shipped_ways():
        if name != DEFAULT_WAY:
            d = diff_ways(filed, load_way(name), rules, workers=workers, progress=Progress(name))
            top = d.pairs[0]
            out[name] = (d.share, top.rule_a, top.rule_b, top.share)
    return out


def ways_section(
    filed: dict[str, BaseGameFigures],
    others: dict[str, dict[str, BaseGameFigures]],
    differ: dict[str, tuple[float, str, str, float]],
) -> list[str]:
    """docs/math.md's table of the Pai Gow wager's house edge by House Way (issue 23)."""
    from controller.game.way import load_way
    from controller.game.way.engine import DEFAULT_WAY

    def cell(g: BaseGameFigures) -> str:
        lo, hi = g.overall.ci95
        return f"{pct(g.overall.house_edge, 3)} [{pct(lo, 3)}, {pct(hi, 3)}]"

    ways = {DEFAULT_WAY: filed, **others}
    rows: list[list[object]] = []
    for name, games in ways.items():
        way = load_way(name)
        differs = "—" if name == DEFAULT_WAY else pct(differ[name][0], 3)
        rows.append(
            [
                f"`{name}`",
                f"`{way.digest}`",
                cell(games["optimal"]),
                cell(games["house-way"]),
                differs,
            ]
        )
    run = filed["optimal"].run
    opt = filed["optimal"].overall
    lines = [
        "## The Pai Gow wager by House Way",
        "",
        "The same deals with the dealer on each shipped way (`controller/game/ways/`, "
        "docs/house-way.md); the house-way player sets by the same way. "
        f"{run.rounds:,} rounds each, seed {run.seed}; the filed way's figures are the ones "
        "above (its file sets every hand as the rule code, tested hand for hand). *Differs* is "
        "the exact share of all 154,143,080 hands the way sets otherwise than the filed way "
        "(`paigow-table house-way diff`).",
        "",
        *_table(
            ["way", "sha256", "best reply", "house-way player", "differs"],
            rows,
        ),
    ]
    verdict = (
        "gives a player who plays the best reply to the exposed dealer hand an edge over the "
        f"house: house edge {pct(opt.house_edge, 3)}"
        if opt.house_edge < 0
        else f"holds a house edge of {pct(opt.house_edge, 3)} against the best reply"
    )
    lines.append(
        f"**Finding.** The filed way (`{DEFAULT_WAY}`), priced, {verdict} "
        f"(95% interval [{pct(opt.ci95[0], 3)}, {pct(opt.ci95[1], 3)}])."
    )
    for name, games in others.items():
        o = games["optimal"].overall
        share, rule_a, rule_b, top = differ[name]
        lines.append(
            f"With `{name}` the same deals give {pct(o.house_edge, 3)} against the best reply: "
            f"{(o.house_edge - opt.house_edge) * 100:+.2f} points for the house. The two ways "
            f"set {pct(share, 2)} of hands differently; one rule pair alone accounts for "
            f"{pct(top, 2)} of all hands "
            f"(`{rule_a}` → `{rule_b}`), which is where the difference comes from."
        )
    lines += [
        "That pair is two pair with the high pair Sevens or better over a low pair of Sixes or "
        "lower and no Ace: the filed text keeps them together (`2P-77` asks both pairs to be "
        "Sevens or better), `classic` splits them. The published 1.82% fits a dealer who "
        "splits them, not the filed text; the table deals the filed way and shows its edge "
        "(docs/rules.md §7, *Priced*).",
        "",
    ]
    return lines


def _head(rules: Rules, *, rounds: int, side_rounds: int, seed: int) -> list[str]:
    return [
        "# The game's math, computed",
        "",
        "<!-- Generated by `paigow-table analyze report`; do not edit by hand. -->",
        "",
        "Every figure that docs/rules.md §9 lists, computed by the engine's own rules",
        "(`controller/game/`), beside the figure the sources publish. Rules: wheel "
        f"`{rules.wheel_rank}`, `ace_high_pushes_pai_gow` "
        f"{str(rules.ace_high_pushes_pai_gow).lower()}.",
        "Regenerate with:",
        "",
        "```",
        f"paigow-table analyze report --output docs/math.md --rounds {rounds} "
        f"--side-rounds {side_rounds} --seed {seed}",
        "```",
        "",
    ]


def _runtime_section(
    census: Census, games: dict[str, BaseGameFigures], ace_run: RunResult, total: float
) -> list[str]:
    return [
        "## How long it took",
        "",
        *_table(
            ["step", "figures"],
            [
                [
                    "census of all hands (exact)",
                    f"{census.classes:,} classes in {census.seconds:.1f} s, "
                    f"{census.workers} workers",
                ],
                *(
                    [
                        f"base game, {s}",
                        f"{g.run.rounds_per_second:,.0f} rounds/s with {g.run.workers} workers, "
                        f"{g.run.rounds_per_second_per_core:,.0f} per CPU-second",
                    ]
                    for s, g in games.items()
                ),
                [
                    "Push Ace High",
                    f"{ace_run.rounds_per_second:,.0f} rounds/s with {ace_run.workers} workers",
                ],
                ["whole report", f"{total:.0f} s"],
            ],
        ),
        f"Python {platform.python_version()}. Monte Carlo runs in chunks of {CHUNK_ROUNDS:,}",
        "rounds, chunk i seeded from (seed, i), so its figures do not depend on the workers.",
        "Per CPU-second is rounds over the CPU time the workers spent playing: the rate of one",
        "core. Rounds per second with two workers reach twice that only when both cores are",
        f"free; the machine's load average was {os.getloadavg()[0]:.1f} when this was written.",
        "",
    ]


#: docs/math.md's section on how the exact shortcuts are tested.
_CHECKS: Final = (
    "## How the shortcuts are checked",
    "",
    "- The hand classes against brute force (`tests/analysis/test_hand_classes.py`): every",
    "  hand of two 21-card decks (five ranks and the joker, 116,280 hands each) and every suit",
    "  assignment of 49 rank multisets of the full deck, chosen (seven-card straight flushes,",
    "  royal match, five aces, super full house) and random, profile for profile.",
    "- The best reply against the engine's `best_setting_against` on 1,200 random deals, both",
    "  wheel rules (`tests/analysis/test_montecarlo.py`).",
    "- Jacks Beat and Push Ace High by Monte Carlo against the exact figures; a Monte Carlo",
    "  run is the same with one worker or two.",
    "",
)


def write_report(
    output: str | Path, *, rounds: int, side_rounds: int, seed: int, workers: int, rules: Rules
) -> str:
    text = build_report(
        rounds=rounds, side_rounds=side_rounds, seed=seed, workers=workers, rules=rules
    )
    path = Path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return text
