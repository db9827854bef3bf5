"""Game protection: rounds to the first alarm for each biased device, and false alarms of fair
devices against the configured rate (docs/protection.md "Measured").

``PYTHONPATH=. python bench/protection.py`` runs 40 trials a scenario (capped at 20,000 rounds) and
1,000,000 fair rounds in 2 worker processes; progress goes to stderr; the last line is JSON.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta

from common import last_line, percentile

from controller.protection import ProtectionConfig, Watch
from simulators.biased import BIASED, next_observation, scenario

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CAP = 20_000


def first_alarm(name: str, seed: int) -> tuple[int, str]:
    """Rounds until the first finding of any test (CAP + 1 if none), and the tests that fired."""
    watch, sc, rng = Watch(), scenario(name), random.Random(seed)
    for n in range(1, CAP + 1):
        findings = watch.observe(next_observation(sc, rng), T0 + timedelta(minutes=n))
        if findings:
            return n, ",".join(f.test for f in findings)
    return CAP + 1, ""


def fair_chunk(seed: int, rounds: int) -> tuple[int, list[str], float]:
    """``rounds`` fair rounds through one watch that resets a test as soon as it alarms (so each
    false alarm counts once); the alarms and the seconds spent in ``observe``."""
    watch, sc, rng = Watch(), scenario("fair"), random.Random(seed)
    alarms: list[str] = []
    spent = 0.0
    for n in range(rounds):
        obs = next_observation(sc, rng)
        start = time.perf_counter()
        findings = watch.observe(obs, T0 + timedelta(seconds=n))
        spent += time.perf_counter() - start
        for f in findings:
            alarms.append(f.test)
            watch.reset(f.test, T0)
    return rounds, alarms, spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fair-rounds", type=int, default=1_000_000)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="10 trials, 20,000 fair rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.fair_rounds = 10, 20_000
    if args.fair_rounds < 1 or args.trials < 1 or args.workers < 1:
        parser.error("--fair-rounds, --trials and --workers must be at least 1")
    config = ProtectionConfig()
    started = time.perf_counter()
    detect: dict[str, int] = {}
    detect95: dict[str, int] = {}
    fired: dict[str, set[str]] = {}
    biased = [name for name in BIASED if name != "fair"]
    chunk = 10_000
    chunks = [
        (1000 + i, min(chunk, args.fair_rounds - i * chunk))
        for i in range((args.fair_rounds + chunk - 1) // chunk)
    ]
    with ProcessPoolExecutor(args.workers) as pool:
        for name in biased:
            results = list(pool.map(first_alarm, [name] * args.trials, range(args.trials)))
            rounds = [n for n, _ in results]
            detect[name] = int(percentile(rounds, 50))
            detect95[name] = int(percentile(rounds, 95))
            fired[name] = {t for _, tests in results for t in tests.split(",") if t}
            print(
                f"{name}: median {detect[name]}, p95 {detect95[name]}", file=sys.stderr, flush=True
            )
        done, alarms, spent = 0, [], 0.0
        step = max(1, len(chunks) // 10)
        for i, (n, found, seconds) in enumerate(pool.map(fair_chunk, *zip(*chunks, strict=True))):
            done += n
            alarms += found
            spent += seconds
            if (i + 1) % step == 0:
                print(
                    f"fair: {done:,} of {args.fair_rounds:,} rounds, {len(alarms)} alarms",
                    file=sys.stderr,
                    flush=True,
                )
    print(f"{'scenario':16} {'median':>8} {'p95':>8}  tests that fired")
    for name in biased:
        print(f"{name:16} {detect[name]:>8} {detect95[name]:>8}  {', '.join(sorted(fired[name]))}")
    per_1e6 = len(alarms) / done * 1e6
    configured = config.false_alarm_rate * 1e6
    years = done / config.rounds_per_year
    print(f"fair: {done:,} rounds ({years:.2f} table-years), {len(alarms)} false alarms {alarms}")
    print(f"false alarms per 1e6 rounds: {per_1e6:.3f} (configured at most {configured:.3f})")
    print(
        f"observe: {spent / done * 1e6:.1f} µs a round; wall {time.perf_counter() - started:.0f} s"
    )
    last_line(
        {
            "detect_rounds": detect,
            "detect_p95": detect95,
            "fair_rounds": done,
            "false_alarms_per_1e6": round(per_1e6, 3),
            "configured_per_1e6": round(configured, 3),
            "us_per_round": round(spent / done * 1e6, 1),
        }
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
