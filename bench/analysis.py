"""The analysis's speed goals (issue 7): the exact Chan Chu enumeration, all five paytables from
one census, within 120 s; Monte Carlo of the base game at 10,000 rounds per second per core or
more, on one worker and on two.

Prints each figure as it is measured; the last line is one JSON object with them all. Run:
`.venv/bin/python bench/analysis.py [--rounds N] [--workers K]`. On a machine shared with other
work the rounds per second fall with the load (the load average is printed beside them); the
rate per core is rounds per CPU-second of the workers, which the load does not change much.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence

from controller.analysis.base_game import STRATEGIES, BaseGame
from controller.analysis.census import take_census
from controller.analysis.chan_chu import all_chan_chu_figures
from controller.analysis.montecarlo import simulate
from controller.game.setting import DEFAULT_RULES


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60_000, help="rounds per measurement")
    parser.add_argument("--workers", type=int, default=2, help="workers for the parallel runs")
    args = parser.parse_args(argv)
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    result: dict[str, object] = {"python": platform.python_version()}

    start = time.perf_counter()
    census = take_census(workers=args.workers)
    figures = all_chan_chu_figures(census)
    seconds = time.perf_counter() - start
    edges = {f.paytable: round(f.house_edge, 6) for f in figures}
    print(
        f"Chan Chu, all five paytables, exact: {seconds:.1f} s with {args.workers} workers "
        f"({census.classes:,} classes)  goal 120 s: {'met' if seconds <= 120 else 'NOT met'}",
        flush=True,
    )
    result["chan_chu_seconds"] = round(seconds, 2)
    result["chan_chu_house_edges"] = edges

    for strategy in STRATEGIES:
        game = BaseGame(strategy, DEFAULT_RULES)
        for workers in (1, args.workers):
            run = simulate(game, args.rounds, seed=1, workers=workers)
            per_core = run.rounds_per_second_per_core
            print(
                f"base game {strategy:<9} {workers} worker(s): {run.rounds_per_second:>8,.0f} "
                f"rounds/s, {per_core:>7,.0f} per CPU-second  goal 10,000/s per core: "
                f"{'met' if per_core >= 10_000 else 'NOT met'}  "
                f"(load {os.getloadavg()[0]:.2f})",
                flush=True,
            )
            key = f"{strategy.replace('-', '_')}_{workers}w"
            result[f"{key}_rounds_per_s"] = round(run.rounds_per_second)
            result[f"{key}_per_core"] = round(per_core)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
