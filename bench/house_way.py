"""House Way and round-rules throughput over a fixed seeded sample (issues 2 and 16).

Prints House Way settings per second, a whole round's rules work per second (the dealer's House
Way plus six seats' Chan Chu, Jacks Beat, Push Ace High and Envy) and, as the same-run baseline
the machine's noise cancels against, the plain seven-card evaluator's rate. Then the batch the
way a user runs it: ``paigow-table house-way < hands.txt > settings.jsonl`` (a process, its
start included, JSON lines out) against treys' seven-card evaluation of the same hands in this
process (treys: the benchmark-only extra, ``pip install -e '.[bench]'``), for hands without and
with the joker. The last line is one JSON object with the figures.
Run: `.venv/bin/python bench/house_way.py [--hands N] [--cli-hands N]`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from controller.game.cards import DECK, Card
from controller.game.hands import evaluate
from controller.game.house_way import house_way
from controller.game.house_way_cache import HouseWayCache
from controller.game.paytables import chan_chu_paytable, envy_paytable, jacks_beat_paytable
from controller.game.setting import DEFAULT_RULES
from controller.game.wagers import (
    chan_chu,
    dealer_has_two_jacks,
    jacks_beat,
    push_ace_high,
    settle_envy,
)
from controller.game.way import load_way


def best_rate(work: Callable[[], int], repeats: int) -> float:
    """Items per second of the fastest of ``repeats`` runs (the least disturbed by other load)."""
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        n = work()
        best = max(best, n / (time.perf_counter() - start))
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hands", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--cli-hands", type=int, default=100_000)
    args = parser.parse_args(argv)

    rng = random.Random(args.seed)
    hands = [rng.sample(DECK, 7) for _ in range(args.hands)]
    rounds: list[list[list[Card]]] = []
    for _ in range(args.rounds):
        deck = list(DECK)
        rng.shuffle(deck)
        rounds.append([deck[7 * i : 7 * i + 7] for i in range(7)])

    cc, jb, envy = chan_chu_paytable("PT3"), jacks_beat_paytable("B"), envy_paytable("PT3")
    rules = DEFAULT_RULES

    def evaluator() -> int:
        for h in hands:
            evaluate(h)
        return len(hands)

    def settings() -> int:
        for h in hands:
            house_way(h, rules)
        return len(hands)

    cache = HouseWayCache.packaged(rules)

    def cached_settings() -> int:
        for h in hands:
            cache.setting(h)
        return len(hands)

    def round_work() -> int:
        for packets in rounds:
            dealer, seats = packets[0], packets[1:]
            if not dealer_has_two_jacks(dealer):
                house_way(dealer, rules)
            for seat in seats:
                chan_chu(seat, cc)
                jacks_beat(dealer, seat, jb, rules)
                push_ace_high(dealer, seat, rules)
            settle_envy({str(i): (seat, 5) for i, seat in enumerate(seats)}, envy)
        return len(rounds)

    print(
        f"python {platform.python_version()} on {platform.machine()}, {args.hands} hands, "
        f"{args.rounds} rounds, best of {args.repeats}",
        flush=True,
    )
    eval_rate = best_rate(evaluator, args.repeats)
    print(f"baseline: seven-card evaluations  {eval_rate:>10,.0f} /s", flush=True)
    hw_rate = best_rate(settings, args.repeats)
    print(
        f"House Way settings                {hw_rate:>10,.0f} /s  ({hw_rate / eval_rate:.2f}×)"
        f"  goal 50,000/s: {'met' if hw_rate >= 50_000 else 'NOT met'}",
        flush=True,
    )
    cached_rate = best_rate(cached_settings, args.repeats)
    print(
        f"House Way by rank pattern (batch)  {cached_rate:>10,.0f} /s  "
        f"({cached_rate / hw_rate:.2f}× the rule code)",
        flush=True,
    )
    # The ways as data (issue 23): each shipped way at the table (Way.set: the rank-pattern
    # table, the rules for hands that may make a flush) and by its rules alone.
    way_rates: dict[str, float] = {}
    for name in ("dealer-open", "classic"):
        way = load_way(name)
        way.cache(rules)  # loaded once per process, as at the table

        def way_settings(way_set: Callable[..., object] = way.set) -> int:
            for h in hands:
                way_set(h, rules)
            return len(hands)

        def way_rule_settings(way_set: Callable[..., object] = way.set_by_rules) -> int:
            for h in hands:
                way_set(h, rules)
            return len(hands)

        way_rates[f"way_{name}_per_s"] = best_rate(way_settings, args.repeats)
        way_rates[f"way_{name}_rules_per_s"] = best_rate(way_rule_settings, args.repeats)
        print(
            f"way {name + ':':<13} Way.set {way_rates[f'way_{name}_per_s']:>10,.0f} /s  "
            f"({way_rates[f'way_{name}_per_s'] / hw_rate:.2f}× house_way); by its rules alone "
            f"{way_rates[f'way_{name}_rules_per_s']:>9,.0f} /s "
            f"({way_rates[f'way_{name}_rules_per_s'] / hw_rate:.2f}×)",
            flush=True,
        )
    round_rate = best_rate(round_work, args.repeats)
    print(
        f"rounds (dealer, 6 seats' bets)  {round_rate:>9,.0f} /s  ({round_rate / eval_rate:.3f}×)",
        flush=True,
    )
    figures: dict[str, object] = {
        "house_way_per_s": round(hw_rate),
        "house_way_cached_per_s": round(cached_rate),
        "round_per_s": round(round_rate),
        "evaluate_per_s": round(eval_rate),
        "house_way_vs_evaluate": round(hw_rate / eval_rate, 3),
        **{k: round(v) for k, v in way_rates.items()},
        "python": platform.python_version(),
    }
    figures.update(cli_vs_treys(args.cli_hands, args.seed, args.repeats))
    print(json.dumps(figures))
    return 0


def _cli_rate(path: Path, n: int, wheel: str = "second_highest", way: str | None = None) -> float:
    """Hands a second through ``paigow-table house-way`` as a process, its start included."""
    cli = [sys.executable, "-m", "controller.cli", "--wheel", wheel, "house-way"]
    if way is not None:
        cli += ["--way", way]
    with open(path, "rb") as hands, open(os.devnull, "wb") as out:
        start = time.perf_counter()
        subprocess.run(cli, stdin=hands, stdout=out, check=True)
        return n / (time.perf_counter() - start)


def cli_vs_treys(n: int, seed: int, repeats: int) -> dict[str, object]:
    """The CLI's batch against treys' in-process seven-card evaluation of the same hands."""
    try:
        from treys import Card as TreysCard  # type: ignore[import-untyped]
        from treys import Evaluator
    except ImportError:
        print("treys is not installed (pip install -e '.[bench]'): no cli_vs_treys7", flush=True)
        return {}
    rng = random.Random(seed + 1)
    no_joker = [rng.sample(DECK[:52], 7) for _ in range(n)]
    with_joker = [rng.sample(DECK, 7) for _ in range(n)]
    treys_hands = [[TreysCard.new(str(c)) for c in h] for h in no_joker]
    evaluator = Evaluator()

    def treys7() -> int:
        for h in treys_hands:
            evaluator.evaluate(h[:2], h[2:])
        return n

    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="bench-house-way-") as name:
        files = {}
        for label, hands in (("no_joker", no_joker), ("joker_deck", with_joker)):
            files[label] = Path(name) / f"{label}.txt"
            files[label].write_text("".join(" ".join(map(str, h)) + "\n" for h in hands))
        # Alternate the two, best of each: the machine's load hits both alike.
        treys_rate = cli_rate = cli_joker_rate = cli_classic_rate = 0.0
        for _ in range(repeats):
            treys_rate = max(treys_rate, best_rate(treys7, 1))
            cli_rate = max(cli_rate, _cli_rate(files["no_joker"], n))
            cli_joker_rate = max(cli_joker_rate, _cli_rate(files["joker_deck"], n))
            cli_classic_rate = max(
                cli_classic_rate, _cli_rate(files["joker_deck"], n, way="classic")
            )
    ratio = cli_rate / treys_rate
    print(
        f"baseline: treys seven-card evaluations  {treys_rate:>10,.0f} /s (in process)\n"
        f"paigow-table house-way, JSON lines       {cli_rate:>10,.0f} /s  "
        f"({ratio:.2f}× treys; a process, its start included)\n"
        f"  the same, hands from the 53-card deck  {cli_joker_rate:>10,.0f} /s\n"
        f"  the same, --way classic                {cli_classic_rate:>10,.0f} /s",
        flush=True,
    )
    figures.update(
        {
            "cli_hands": n,
            "treys7_per_s": round(treys_rate),
            "cli_per_s": round(cli_rate),
            "cli_joker_deck_per_s": round(cli_joker_rate),
            "cli_classic_joker_deck_per_s": round(cli_classic_rate),
            "cli_vs_treys7": round(ratio, 3),
        }
    )
    return figures


if __name__ == "__main__":
    sys.exit(main())
