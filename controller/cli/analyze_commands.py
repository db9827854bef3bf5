"""The ``paigow-table analyze`` commands themselves (``controller/cli/analyze.py`` declares their
arguments and imports this module only when one of them runs)."""

from __future__ import annotations

import argparse
import json
import sys

from controller.analysis.base_game import (
    BaseGame,
    BaseGameFigures,
    Strategy,
    base_game_figures,
)
from controller.analysis.census import Census, full_census
from controller.analysis.chan_chu import ChanChuFigures, all_chan_chu_figures, chan_chu_figures
from controller.analysis.montecarlo import simulate
from controller.analysis.progress import Progress
from controller.analysis.published import (
    ANALYSIS_BASE_GAME_HOUSE_EDGE,
    ANALYSIS_DEALER_TWO_JACKS,
    ANALYSIS_ENVY_PT3_PER_PLAYER_5_DOLLARS,
    ANALYSIS_JACKS_BEAT_B,
    ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE,
    ANALYSIS_PT3_COMBINATIONS,
)
from controller.analysis.report import write_report
from controller.analysis.side_bets import (
    JacksBeatGame,
    PushAceHighGame,
    SideFigures,
    ace_high_exact_marginals,
    dealer_jacks,
    figures_from_run,
    jacks_beat_exact,
)
from controller.game.paytables import (
    JACKS_BEAT_PAYTABLES,
    jacks_beat_paytable,
    push_ace_high_paytable,
)
from controller.game.setting import Rules


def rules_from(args: argparse.Namespace) -> Rules:
    """The table's rules from the global ``--wheel`` and the analysis's own switches."""
    return Rules(
        wheel_rank=getattr(args, "wheel", "second_highest"),
        ace_high_pushes_pai_gow=bool(getattr(args, "ace_high_pushes", False)),
    )


def _census(args: argparse.Namespace) -> Census:
    return full_census(workers=args.workers, progress=Progress("census of all hands"))


def _dump(record: object) -> None:
    print(json.dumps(record, ensure_ascii=False))


def _pct(x: float, digits: int = 4) -> str:
    return f"{x * 100 + 0.0:.{digits}f}%"


# --- chan-chu ------------------------------------------------------------------------------------


def print_chan_chu(f: ChanChuFigures, census: Census) -> None:
    published_pt3 = f.paytable == "PT3"
    print(
        f"Chan Chu {f.paytable}: all {f.total:,} seven-card hands "
        f"({census.classes:,} classes, {census.seconds:.1f} s, {census.workers} workers)"
    )
    head = f"{'line':<26}{'pays':>6}{'combinations':>14}{'probability':>13}{'return':>11}"
    print(head + (f"{'published':>13}" if published_pt3 else ""))
    for line in f.lines:
        row = (
            f"{line.line:<26}{line.pays:>6}{line.combinations:>14,}"
            f"{line.probability:>13.8f}{line.ret:>11.6f}"
        )
        if published_pt3:
            seed = ANALYSIS_PT3_COMBINATIONS[line.line]
            row += f"{seed:>13,} {'=' if seed == line.combinations else '≠'}"
        print(row)
    posted = (
        ""
        if f.posted_house_edge is None
        else f"   posted (the rule sheet) {_pct(f.posted_house_edge, 2)}"
    )
    print(f"house edge {_pct(f.house_edge)}{posted}")
    if f.envy is not None:
        e = f.envy
        quoted = (
            f" (the outside analysis: {_pct(ANALYSIS_ENVY_PT3_PER_PLAYER_5_DOLLARS, 2)})"
            if published_pt3
            else ""
        )
        print(
            f"Envy {e.paytable}: worth ${e.value_dollars:.6f} per other player with a Chan Chu "
            f"wager = {_pct(e.per_player(5))} of a $5 wager{quoted}"
        )
        print(
            "  house edge by other players: "
            + "  ".join(f"{n}: {_pct(row[5], 2)}" for n, row in e.house_edge_by_players.items())
            + "  ($5 wager)"
        )
    print()


def cmd_chan_chu(args: argparse.Namespace) -> int:
    census = _census(args)
    if args.paytable.lower() == "all":
        figures = all_chan_chu_figures(census)
    else:
        figures = [chan_chu_figures(census, args.paytable)]
    if args.json:
        records = [f.to_dict() for f in figures]
        _dump(records if args.paytable.lower() == "all" else records[0])
    else:
        for f in figures:
            print_chan_chu(f, census)
    return 0


# --- dealer-jacks --------------------------------------------------------------------------------


def cmd_dealer_jacks(args: argparse.Namespace) -> int:
    dj = dealer_jacks()
    if args.json:
        _dump(dj.to_dict())
        return 0
    print(f"dealer holds two or more Jacks: {dj.hands:,} of {dj.total:,} hands")
    print(f"  counted      {float(dj.probability):.10f} = {_pct(float(dj.probability))}")
    print(f"  closed form  {float(dj.closed_form):.10f}   1 - (C(49,7) + 4*C(49,6)) / C(53,7)")
    print(f"  exactly equal: {'yes' if dj.probability == dj.closed_form else 'NO'}")
    print(f"  the outside analysis (lab report): {_pct(ANALYSIS_DEALER_TWO_JACKS, 2)}")
    return 0 if dj.probability == dj.closed_form else 1


# --- base-game -----------------------------------------------------------------------------------


def run_base_game(
    strategy: Strategy, rounds: int, seed: int, workers: int, rules: Rules, way: str | None = None
) -> BaseGameFigures:
    game = BaseGame(strategy, rules, way)
    run = simulate(
        game, rounds, seed=seed, workers=workers, progress=Progress(f"base game, {strategy}")
    )
    return base_game_figures(game, run)


def print_base_game(f: BaseGameFigures) -> None:
    run = f.run
    if f.way:
        print(f"House Way {f.way['name']} (sha256 {f.way['digest']}), dealer and house-way player")
    print(
        f"Pai Gow wager, player strategy {f.strategy}: {run.rounds:,} rounds, seed {run.seed}, "
        f"{run.workers} workers, {run.seconds:.1f} s ({run.rounds_per_second:,.0f} rounds/s, "
        f"{run.rounds_per_second_per_core:,.0f} per core)"
    )
    print(f"{'dealer':<12}{'share':>9}{'win':>9}{'push':>9}{'lose':>9}{'edge':>10}{'part':>10}")
    for cls, r in (*f.by_class.items(), ("all", f.overall)):
        print(
            f"{cls:<12}{_pct(r.share, 2):>9}{_pct(r.win, 2):>9}{_pct(r.push, 2):>9}"
            f"{_pct(r.lose, 2):>9}{_pct(r.house_edge, 2):>10}{_pct(r.contribution, 2):>10}"
        )
    lo, hi = f.overall.ci95
    print(
        f"house edge {_pct(f.overall.house_edge, 3)}, 95% interval [{_pct(lo, 3)}, "
        f"{_pct(hi, 3)}]; the outside analysis (lab report, strategy unstated) "
        f"{_pct(ANALYSIS_BASE_GAME_HOUSE_EDGE, 2)}"
    )


def cmd_base_game(args: argparse.Namespace) -> int:
    way = getattr(args, "house_way", None)
    if way is not None:
        from controller.game.way import WaySyntaxError, load_way

        try:
            way = str(load_way(way).text.path)  # a name or a file; workers load it by path
        except (OSError, WaySyntaxError) as exc:
            print(f"paigow-table analyze base-game: {exc}", file=sys.stderr)
            return 2
    figures = run_base_game(
        args.strategy, args.rounds, args.seed, args.workers, rules_from(args), way
    )
    if args.json:
        _dump(figures.to_dict())
    else:
        print_base_game(figures)
    return 0


# --- jacks-beat and ace-high ---------------------------------------------------------------------


def print_side(f: SideFigures, seed: dict[str, float] | None = None) -> None:
    what = "exact" if f.ci95 is None else f"Monte Carlo, {f.total:,} rounds"
    print(f"{f.wager} paytable {f.paytable} ({what})")
    head = f"{'line':<28}{'pays':>6}{'probability':>13}{'return':>11}"
    print(head + (f"{'published':>13}" if seed else ""))
    for line in f.lines:
        row = f"{line.line:<28}{line.pays:>6}{line.probability:>13.8f}{line.ret:>11.6f}"
        if seed:
            row += f"{seed[line.line]:>13.8f}"
        print(row)
    interval = "" if f.ci95 is None else f", 95% interval [{_pct(f.ci95[0])}, {_pct(f.ci95[1])}]"
    print(f"house edge {_pct(f.house_edge)}{interval}")


def cmd_jacks_beat(args: argparse.Namespace) -> int:
    rules = rules_from(args)
    names = list(JACKS_BEAT_PAYTABLES) if args.paytable.lower() == "all" else [args.paytable]
    census = _census(args)
    records: list[dict[str, object]] = []
    for name in names:
        exact = jacks_beat_exact(census, name, rules)
        record = exact.to_dict()
        is_b = exact.paytable == "B"
        if is_b:
            record["outside_analysis"] = {
                "probability": ANALYSIS_JACKS_BEAT_B,
                "house_edge": ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE,
            }
        mc = None
        if args.rounds:
            run = simulate(
                JacksBeatGame(exact.paytable, rules),
                args.rounds,
                seed=args.seed,
                workers=args.workers,
                progress=Progress(f"Jacks Beat {exact.paytable}"),
            )
            mc = figures_from_run("jacks_beat", jacks_beat_paytable(exact.paytable), run)
            record["monte_carlo"] = mc.to_dict()
        records.append(record)
        if not args.json:
            print_side(exact, ANALYSIS_JACKS_BEAT_B if is_b else None)
            if is_b:
                print(
                    f"  the outside analysis (labels read as docs/rules.md §9): house edge "
                    f"{_pct(ANALYSIS_JACKS_BEAT_B_HOUSE_EDGE)}"
                )
            if mc is not None:
                print_side(mc)
            print()
    if args.json:
        _dump(records if len(records) > 1 or args.paytable.lower() == "all" else records[0])
    return 0


def cmd_ace_high(args: argparse.Namespace) -> int:
    rules = rules_from(args)
    run = simulate(
        PushAceHighGame(rules),
        args.rounds,
        seed=args.seed,
        workers=args.workers,
        progress=Progress("Push Ace High"),
    )
    figures = figures_from_run("push_ace_high", push_ace_high_paytable(), run)
    record = figures.to_dict()
    marginals = ace_high_exact_marginals(_census(args)) if args.exact_marginals else None
    if marginals is not None:
        record["exact_marginals"] = marginals
    if args.json:
        _dump(record)
        return 0
    print_side(figures)
    if marginals is not None:
        print(
            f"exact, one hand: the dealer is Ace-high pai gow {marginals['dealer_ace_high']:.8f} "
            f"(Monte Carlo {1 - figures.line('lose').probability:.8f}), with the joker "
            f"{marginals['dealer_ace_high_joker']:.8f}"
        )
    return 0


# --- report --------------------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> int:
    write_report(
        args.output,
        rounds=args.rounds,
        side_rounds=args.side_rounds,
        seed=args.seed,
        workers=args.workers,
        rules=rules_from(args),
    )
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


# --- wiring --------------------------------------------------------------------------------------
