"""Figures for the supervisor's charts, computed from journaled round results (pure functions).

* the dealer's two-Jack rate against docs/rules.md §9's 7.98% (with a 95% Wilson interval, so a
  supervisor can tell chance from a problem), and its running rate round by round;
* side-wager hits and pays: per wager, how many seat-rounds hit, the pays "to 1" summed, and the
  net result in currency where the wagers were entered; Chan Chu hits per line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

# docs/rules.md §9: the dealer holds two or more Jacks in 1 − (C(49,7) + 4·C(49,6)) / C(53,7).
EXPECTED_TWO_JACKS = 1 - (math.comb(49, 7) + 4 * math.comb(49, 6)) / math.comb(53, 7)
SIDE_WAGERS = ("chan_chu", "jacks_beat", "push_ace_high")


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (0, 1 when nothing was seen)."""
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def _settled(results: Iterable[Mapping[str, Any] | None]) -> list[Mapping[str, Any]]:
    return [
        r for r in results if r is not None and r.get("status") == "settled" and r.get("dealer")
    ]


def two_jacks(results_oldest_first: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The two-Jack rate over settled rounds, with its running rate (at most 200 points)."""
    settled = _settled(results_oldest_first)
    hits = 0
    series: list[dict[str, Any]] = []
    n = len(settled)
    step = max(1, math.ceil(n / 200))
    for i, result in enumerate(settled, start=1):
        hits += bool(result["dealer"].get("two_jacks"))
        if i % step == 0 or i == n:
            series.append({"rounds": i, "rate": hits / i})
    low, high = wilson(hits, n)
    return {
        "rounds": n,
        "two_jacks": hits,
        "rate": hits / n if n else None,
        "expected": EXPECTED_TWO_JACKS,
        "interval95": [low, high],
        "series": series,
    }


def side_wagers(results: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Hits and pays of each side wager, and Chan Chu hits by line, over settled rounds."""
    totals = {
        name: {"seat_rounds": 0, "hits": 0, "pushes": 0, "pays": 0, "wagered": 0, "net": 0}
        for name in SIDE_WAGERS
    }
    envy = {"seat_rounds": 0, "hits": 0, "paid": 0}
    lines: dict[str, int] = {}
    rounds = 0
    for result in _settled(results):
        rounds += 1
        for seat in result.get("seats", []):
            for name in SIDE_WAGERS:
                side = seat.get(name) or {}
                pays = int(side.get("pays", -1))
                t = totals[name]
                t["seat_rounds"] += 1
                if pays > 0:
                    t["hits"] += 1
                    t["pays"] += pays
                elif pays == 0:
                    t["pushes"] += 1
                if side.get("wager") is not None:
                    t["wagered"] += int(side["wager"])
                    t["net"] += int(side.get("win") or 0)
                if name == "chan_chu" and pays > 0:
                    line = str(side.get("line", "?"))
                    lines[line] = lines.get(line, 0) + 1
            e = seat.get("envy")
            if e is not None:
                envy["seat_rounds"] += 1
                if e.get("total"):
                    envy["hits"] += 1
                    envy["paid"] += int(e["total"])
    return {
        "rounds": rounds,
        "wagers": totals,
        "envy": envy,
        "chan_chu_lines": dict(sorted(lines.items(), key=lambda kv: (-kv[1], kv[0]))),
    }
