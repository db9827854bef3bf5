"""Game protection: rounds to the first alarm for each biased device, and false alarms of fair
devices against the configured rate (docs/protection.md "Measured").

``PYTHONPATH=. python bench/protection.py`` runs 40 trials a device (capped at 20,000 rounds) and
1,000,000 fair rounds in 2 worker processes; ``--quick`` 10 trials and 20,000 fair rounds.
Progress goes to stderr; the last line is JSON. Beside each device: the fewest rounds the exact
mathematics allows on average, ln(R/F) / KL (Lorden; Lai 1998: a detector with at most F false
alarms in R rounds needs about that many rounds of a fault whose rounds carry KL nats each),
where the device's per-round Kullback–Leibler divergence is known exactly.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta

from common import last_line, percentile

from controller.protection import ProtectionConfig, Watch, exact
from controller.protection.checks import CHECKS
from controller.protection.watch import ALL_CHECKS
from simulators.biased import BIASED, next_observation, scenario

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CAP = 20_000
TIMED = 2_000  # rounds of each fair chunk also timed through today's tests alone (the baseline)


def _kl(q: list[float], p: list[float]) -> float:
    return sum(a * math.log(a / b) for a, b in zip(q, p, strict=True) if a > 0)


def _kl_riffle(k: int, m: int = exact.DEALT) -> float:
    q = [float(x) for x in exact.riffle_rising(m, 2**k)]
    return _kl(q, [float(x) for x in exact.rising_sequences(m)])


def _kl_shelf(shelves: int, m: int = exact.DEALT) -> float:
    total = math.factorial(m)
    out = 0.0
    for peaks, count in enumerate(exact.peak_counts(m)):
        q = count * exact.shelf_chance(m, shelves, peaks)
        if q:
            out += float(q) * math.log(float(q * total / count))
    return out


def _kl_draw(q: float, p: float) -> float:
    return _kl([q, 1 - q], [p, 1 - p])


def _kl_seat() -> float:
    p = [7 / 53] * 7 + [4 / 53]
    q = [x / 2 for x in p]
    q[3] += 0.5
    return _kl(q, p)


KL: dict[str, Callable[[], float]] = {
    "rng_favours_3": lambda: _kl_draw(1.5 / 7, 1 / 7),
    "rng_7_at_1_2": lambda: _kl_draw(1.2 / 7, 1 / 7),
    "loaded_die": lambda: _kl_draw(0.25, 1 / 6),
    "die_6_at_019": lambda: _kl_draw(0.19, 1 / 6),
    "stacked_joker": lambda: _kl_draw(14 / 53, 7 / 53),
    "joker_to_seat": _kl_seat,
    "one_riffle": lambda: _kl_riffle(1),
    "riffles_4": lambda: _kl_riffle(4),
    "riffles_5": lambda: _kl_riffle(5),
    "riffles_6": lambda: _kl_riffle(6),
    "riffles_7": lambda: _kl_riffle(7),
    "two_decks_3": lambda: _kl_riffle(3),
    "shelf_10": lambda: _kl_shelf(10),
}


#: Devices that change only the draw: their deals are fair, so only the draw tests (at the
#: thresholds of the whole watch) are run on them, to save time; the deal tests' false alarms on
#: fair deals are what the fair run measures.
DRAW_ONLY = ("rng_favours_3", "rng_7_at_1_2", "loaded_die", "die_6_at_019")
DRAW_TESTS = ("rng_number", "dice_sum", "dice_face", "rng_bias", "dice_bias")


def first_alarm(name: str, seed: int) -> tuple[int, str]:
    """Rounds until the first finding of any test (CAP + 1 if none), and the tests that fired."""
    watch, sc, rng = Watch(), scenario(name), random.Random(seed)
    if name in DRAW_ONLY:
        draw = [check for check in ALL_CHECKS if check().name in DRAW_TESTS]
        watch = Watch(checks=draw, shares=len(ALL_CHECKS))
    for n in range(1, CAP + 1):
        findings = watch.observe(next_observation(sc, rng), T0 + timedelta(minutes=n))
        if findings:
            return n, ",".join(f.test for f in findings)
    return CAP + 1, ""


def fair_chunk(seed: int, rounds: int) -> tuple[int, list[str], float, float, float]:
    """``rounds`` fair rounds through one watch that resets a test as soon as it alarms (so each
    false alarm counts once); the alarms, the seconds spent in ``observe``, and over the first
    ``TIMED`` rounds the seconds of every test and of today's 14 alone (the baseline)."""
    watch, sc, rng = Watch(), scenario("fair"), random.Random(seed)
    base = Watch(checks=CHECKS)
    alarms: list[str] = []
    spent = timed_all = timed_base = 0.0
    for n in range(rounds):
        obs = next_observation(sc, rng)
        now = T0 + timedelta(seconds=n)
        start = time.perf_counter()
        findings = watch.observe(obs, now)
        took = time.perf_counter() - start
        spent += took
        if n < TIMED:
            timed_all += took
            start = time.perf_counter()
            base.observe(obs, now)
            timed_base += time.perf_counter() - start
        for f in findings:
            alarms.append(f.test)
            watch.reset(f.test, T0)
    return rounds, alarms, spent, timed_all, timed_base


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--fair-rounds", type=int, default=1_000_000)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--devices", default="", help="comma-separated (default: all)")
    parser.add_argument("--quick", action="store_true", help="10 trials, 20,000 fair rounds")
    args = parser.parse_args(argv)
    if args.quick:
        args.trials, args.fair_rounds = 10, 20_000
    if args.fair_rounds < 0 or args.trials < 1 or args.workers < 1:
        parser.error("--trials and --workers must be at least 1, --fair-rounds at least 0")
    config = ProtectionConfig()
    floor = math.log(config.rounds_per_year / config.false_alarms_per_year)
    started = time.perf_counter()
    biased = [n for n in BIASED if n != "fair"]
    if args.devices:
        biased = [n for n in args.devices.split(",") if n]
    rows: dict[str, dict[str, object]] = {}
    chunk = 10_000
    chunks = [
        (1000 + i, min(chunk, args.fair_rounds - i * chunk))
        for i in range((args.fair_rounds + chunk - 1) // chunk)
    ]
    with ProcessPoolExecutor(args.workers) as pool:
        for name in biased:
            results = list(pool.map(first_alarm, [name] * args.trials, range(args.trials)))
            rounds = [n for n, _ in results]
            kl = KL[name]() if name in KL else None
            rows[name] = {
                "median": int(percentile(rounds, 50)),
                "p90": int(percentile(rounds, 90)),
                "never": sum(1 for n in rounds if n > CAP) / len(rounds),
                "bound": round(floor / kl, 1) if kl else None,
                "fired": sorted({t for _, tests in results for t in tests.split(",") if t}),
            }
            row = rows[name]
            print(
                f"{name}: median {row['median']}, p90 {row['p90']}, never {row['never']:.0%}"
                f" ({time.perf_counter() - started:.0f} s)",
                file=sys.stderr,
                flush=True,
            )
        done, alarms = 0, []
        spent = timed_all = timed_base = 0.0
        step = max(1, len(chunks) // 20)
        if chunks:
            for i, (n, found, seconds, t_all, t_base) in enumerate(
                pool.map(fair_chunk, *zip(*chunks, strict=True))
            ):
                done += n
                alarms += found
                spent += seconds
                timed_all += t_all
                timed_base += t_base
                if (i + 1) % step == 0 or i + 1 == len(chunks):
                    print(
                        f"fair: {done:,} of {args.fair_rounds:,} rounds, {len(alarms)} alarms"
                        f" ({time.perf_counter() - started:.0f} s)",
                        file=sys.stderr,
                        flush=True,
                    )
    print(f"{'device':18} {'median':>7} {'p90':>7} {'never':>6} {'bound':>8}  tests that fired")
    for name, row in rows.items():
        bound = "—" if row["bound"] is None else f"{row['bound']:,}"
        print(
            f"{name:18} {row['median']:>7} {row['p90']:>7} {row['never']:>6.0%} {bound:>8}  "
            f"{', '.join(row['fired'])}"  # type: ignore[arg-type]
        )
    figures: dict[str, object] = {"devices": rows, "trials": args.trials, "cap": CAP}
    if done:
        per_1e6 = len(alarms) / done * 1e6
        configured = config.false_alarm_rate * 1e6
        years = done / config.rounds_per_year
        timed = min(done, TIMED * len(chunks))
        print(
            f"fair: {done:,} rounds ({years:.2f} table-years), {len(alarms)} false alarms "
            f"{alarms}; the bound allows at most {configured * done / 1e6:.3f} expected"
        )
        print(f"false alarms per 1e6 rounds: {per_1e6:.3f} (configured at most {configured:.3f})")
        print(
            f"observe: {spent / done * 1e6:.1f} µs a round over all rounds; on the same "
            f"{timed:,} rounds {timed_all / timed * 1e6:.1f} µs with every test against "
            f"{timed_base / timed * 1e6:.1f} µs with today's 14 alone (the baseline)"
        )
        figures |= {
            "fair_rounds": done,
            "false_alarms": len(alarms),
            "false_alarms_per_1e6": round(per_1e6, 3),
            "configured_per_1e6": round(configured, 3),
            "us_per_round": round(spent / done * 1e6, 1),
            "us_per_round_timed": round(timed_all / timed * 1e6, 1),
            "us_per_round_baseline": round(timed_base / timed * 1e6, 1),
        }
    print(f"wall {time.perf_counter() - started:.0f} s")
    last_line(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
