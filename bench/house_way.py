"""House Way and round-rules throughput over a fixed seeded sample (issue 2).

Prints House Way settings per second, a whole round's rules work per second (the dealer's House
Way plus six seats' Chan Chu, Jacks Beat, Push Ace High and Envy) and, as the same-run baseline
the machine's noise cancels against, the plain seven-card evaluator's rate. The last line is one
JSON object with the figures. Run: `.venv/bin/python bench/house_way.py [--hands N]`.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence

from controller.game.cards import DECK, Card
from controller.game.hands import evaluate
from controller.game.house_way import house_way
from controller.game.paytables import chan_chu_paytable, envy_paytable, jacks_beat_paytable
from controller.game.setting import DEFAULT_RULES
from controller.game.wagers import (
    chan_chu,
    dealer_has_two_jacks,
    jacks_beat,
    push_ace_high,
    settle_envy,
)


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
    round_rate = best_rate(round_work, args.repeats)
    print(
        f"rounds (dealer, 6 seats' bets)  {round_rate:>9,.0f} /s  ({round_rate / eval_rate:.3f}×)",
        flush=True,
    )
    print(
        json.dumps(
            {
                "house_way_per_s": round(hw_rate),
                "round_per_s": round(round_rate),
                "evaluate_per_s": round(eval_rate),
                "house_way_vs_evaluate": round(hw_rate / eval_rate, 3),
                "python": platform.python_version(),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
