"""``house-way check`` and ``house-way diff`` over all 154,143,080 hands (issue 23): how long
the exhaustive proof takes for each shipped way, and the comparison of the two.

Prints progress on stderr, the figures, and as the last line one JSON object. Goal: a check
under 2 minutes on the 2-core target.
Run: `.venv/bin/python bench/house_way_check.py [--workers N] [--way NAME|FILE ...]`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Sequence

from controller.analysis.progress import Progress
from controller.game.way import load_way
from controller.game.way.check import check_way, forget_decisions, hand_classes
from controller.game.way.diff import diff_ways


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--way", action="append", help="default: dealer-open and classic")
    parser.add_argument("--no-diff", action="store_true")
    args = parser.parse_args(argv)
    names = args.way or ["dealer-open", "classic"]
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}, {args.workers} workers",
        flush=True,
    )
    figures: dict[str, object] = {"workers": args.workers, "load_before": os.getloadavg()[0]}
    start = time.perf_counter()
    classes = hand_classes()
    figures["classes"] = len(classes)
    figures["classes_s"] = round(time.perf_counter() - start, 1)
    print(f"hand classes: {len(classes):,} in {figures['classes_s']} s", flush=True)
    for name in names:
        way = load_way(name)
        cpu = time.process_time()
        report = check_way(
            way, workers=args.workers, progress=Progress(f"check {way.name}", force=True)
        )
        verdict = "passed" if report.passed else f"FAILED ({len(report.failures)})"
        print(
            f"check {way.name}: {verdict}, {report.hands:,} hands in {report.seconds:.1f} s "
            f"(goal 120 s: {'met' if report.seconds < 120 else 'NOT met'})",
            flush=True,
        )
        figures[f"check_{way.name}_s"] = round(report.seconds, 1)
        figures[f"check_{way.name}_passed"] = report.passed
        figures[f"check_{way.name}_parent_cpu_s"] = round(time.process_time() - cpu, 1)
    if not args.no_diff and len(names) >= 2:
        a, b = load_way(names[0]), load_way(names[1])
        # Timed from nothing: in one process the checks' decisions would make the diff free.
        forget_decisions()
        d = diff_ways(a, b, workers=args.workers, progress=Progress("diff", force=True))
        top = d.pairs[0] if d.pairs else None
        print(
            f"diff {a.name} vs {b.name}: {d.differ:,} hands ({d.share:.4%}) in {d.seconds:.1f} s"
            + (f"; top {top.rule_a} -> {top.rule_b} {top.share:.4%}" if top else ""),
            flush=True,
        )
        figures["diff_s"] = round(d.seconds, 1)
        figures["diff_share"] = round(d.share, 6)
    figures["load_after"] = os.getloadavg()[0]
    figures["python"] = platform.python_version()
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
