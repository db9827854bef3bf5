"""Game protection pooled across the floor (``pit.pooling``; docs/protection.md, "Pooled across
the floor"): how much sooner a pool of tables running the same weak model finds it, how often a
fair floor's pools false-alarm, whether one weak table among fair model-mates is named as that
table, and the pit's CPU a round at 2,000 tables. In process, no broker.

``PYTHONPATH=. .venv/bin/python bench/pooled.py`` (``--quick`` for a few minutes; ``--parts
detect,fair,attribution,cpu`` to choose; ``--workers`` 2). Progress goes to stderr; the last
line of stdout is JSON with every figure and a ``targets`` object of booleans.

1. **Pooled detection** (``detect``). For each weak device of ``simulators.biased.BIASED``
   (not ``fair``, not ``repeat_order``) and pools of 1, 5, 20 and 50 tables (``--quick``: 1 and
   20), all the pool's tables run the same weak device, each its own ``Scenario`` and its own
   ``random.Random``, identified under one model with distinct serials. They deal round-robin
   (pool round n is table n mod k's next round). The budget is a floor of 50 tables
   (``FloorBudget(tables=50)``) whatever k, so every threshold is the same: each table's own
   watch runs at ``budget.table_config()``, the pools at ``budget.pool_config()``. Detection is
   the first finding of the pool's ``FloorWatch`` or of any table's own watch, whichever comes
   first. **Warm start**: every table has dealt before: its one earlier deal (a deal of the same
   device, its first) is pushed into its own watch's ``history`` and into its member history of
   the cards pool (``FloorWatch.remember``), so a deal test compares the first counted deal with it,
   but no test counts that deal (neither its cards nor its draw). Counting starts with the next
   round. *Rounds per table* = pool rounds at detection / k; the single-table figure is the same
   measurement with k = 1 (one table's own watch, and its pool of one). So an order fault is
   seen from the first counted round, and ``bench/protection.py``'s medians (no warm start, a
   0.1-a-year watch) are about one round longer and lower in threshold. Devices that change only
   the draw (``bench.protection.DRAW_ONLY``) run the draw tests alone in their own watches, at
   the whole watch's thresholds (as ``bench/protection.py`` does), and only their ``position``
   role is identified to the floor (no cards pool: their deals are fair, and a cards pool's
   false alarms on fair deals are what part 2 counts). A run gives up after ``--cap`` pool
   rounds (40,000, for every k: a pool needs about as many pool rounds as one table needs
   rounds, so the cap is on pool rounds; at k = 1 it is 40,000 rounds of the table, because at
   the floor's stricter table threshold ``die_6_at_019`` needs about 15,000–20,000).
   Beside each device: *bound*, the fewest rounds any detector at that false-alarm budget needs
   on average, ln(R/F) / KL (``bench.protection.KL``, where known): for one table's own watch
   R, F of ``table_config()``; for a pool of k tables ln(R_pool/F_pool) / KL / k, rounds per
   table. Target: every device whose single-table median is above 20 rounds is found in at
   most a tenth of its single-table median per table at k = 20.
2. **False alarms of the pools** (``fair``). ``--fair-rounds`` fair rounds (the ``fair``
   scenario: a uniform shuffle; the draw alternates a fair RNG box and fair dice) over floors of
   50 tables dealing round-robin, all 50 identified under one shuffler model (cards) and one
   draw-device model (position), distinct serials; split into ``--fair-chunks`` (2) independent
   floors, one a worker. Each pool test is reset as soon as it alarms (``FloorWatch.reset``) so
   every false alarm counts once. Against the bound the budget gives those rounds:
   F_pools × rounds / (tables × rounds_per_table_year), F_pools = F × pooled_share (both kinds
   of pool; only model pools exist here, whose share is half that, also given). The tables' own
   watches' false alarms are measured by ``bench/protection.py``, not here.
3. **Attribution** (``attribution``). One weak table among 20 of the same model (19 fair:
   ``fair`` for ``stacked_joker``; a fair RNG box drawing every round for ``rng_7_at_1_2``, which
   is handled as a draw-only device as above), budget of a 50-table floor, warm start as in
   part 1, the weak table's seat different each run. Only the weak table runs its own watch
   (the fair tables' own watches cannot name the weak table, and their false alarms are part
   2's and ``bench/protection.py``'s). A run ends at the first finding that names the weak
   table: its own watch's (the table's, by construction) or a pool finding whose attribution is
   ``table`` and names it. A pool finding before that with verdict ``model`` is a
   misattribution, ``undecided`` or another table is counted too; such a finding is
   acknowledged (``FloorWatch.reset`` of that test) and the run goes on. Reported: the weak
   table's rounds to detection (median), its ratio to the same device's single-table median of
   part 1 (k = 1; measured here if part 1 did not run it), the share of runs whose first finding
   named the weak table, the misattributions, and which detector fired first. Target: the
   median within 1.2× the single-table median and ≥ 95 % of runs named the table first.
4. **Pit CPU a round at 2,000 tables** (``cpu``). ``FloorBudget(tables=2000)``, 2,000 tables
   over 4 shuffler models (cards) and 2 RNG box models (position, a fair RNG every round), each
   device its own serial; 4,000 rounds to warm, then ``FloorWatch.observe`` timed with
   ``time.process_time()`` over 4,000 fair rounds (observations made beforehand; the tables in
   a fresh random order each pass over the floor). The baseline: the same rounds through one
   table's ``Watch()`` (every test, default config), in the same run. Target ≤ 1 ms a round.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

# The pit package, not bench/pit.py beside this script (first on the path when run); bench/
# stays on the path for ``common`` and ``protection``.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import last_line, percentile
from protection import DRAW_ONLY, DRAW_TESTS, KL

from controller.protection import Watch
from controller.protection.watch import ALL_CHECKS
from pit.pooling import ROLES, FloorBudget, FloorWatch
from simulators.biased import (
    BIASED,
    Scenario,
    die_loaded,
    fair_shuffle,
    next_observation,
    rng_favours,
    scenario,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
FLOOR = 50  # the floor whose budget every pool of parts 1 and 3 keeps
CAP = 40_000  # pool rounds
POOLS = (1, 5, 20, 50)
QUICK_POOLS = (1, 20)
ATTRIBUTION_DEVICES = ("rng_7_at_1_2", "stacked_joker")
ATTRIBUTION_TABLES = 20
CPU_TABLES = 2_000
SHUFFLER = ("Acme", "Riffler 9", "2.1")
DRAWER = ("Acme", "RNG 7", "1.4")
SKIPPED = ("fair", "repeat_order")


def say(text: str, started: float | None = None) -> None:
    if started is not None:
        text += f" ({time.perf_counter() - started:.0f} s)"
    print(text, file=sys.stderr, flush=True)


def draw_checks() -> list[Callable[[], Any]]:
    return [check for check in ALL_CHECKS if check().name in DRAW_TESTS]


def own_watch(budget: FloorBudget, draw_only: bool) -> Watch:
    """A table's own watch at the floor's table budget (the draw tests alone, at the whole
    watch's thresholds, for a device that changes only the draw)."""
    config = budget.table_config()
    if draw_only:
        return Watch(config, checks=draw_checks(), shares=len(ALL_CHECKS))
    return Watch(config)


def identify(
    fw: FloorWatch, table: str, roles: Sequence[str], serial: str,
    cards: tuple[str, str, str] = SHUFFLER, position: tuple[str, str, str] = DRAWER,
) -> None:  # fmt: skip
    for role in roles:
        make, model, firmware = cards if role == "cards" else position
        fw.identify(table, role, make, model, firmware, f"{role[0].upper()}-{serial}")


def warm(fw: FloorWatch, table: str, obs: Any) -> None:
    """The table's earlier deal, known to its member history of each cards pool (as its own
    watch's ``history.push``): compared with, never counted (``FloorWatch.remember``)."""
    fw.remember(table, obs)


def fair_like(device: str) -> Scenario:
    """A fair device of the weak one's kind: a fair RNG box or fair dice every round for a
    draw-only device, else the ``fair`` scenario."""
    if device in DRAW_ONLY:
        probe = scenario(device)
        method = probe.draw(random.Random(0), 0)[0]
        draw = rng_favours(7, 1.0) if method == "rng" else die_loaded(6, 1 / 6)
        return Scenario(f"fair_{method}", fair_shuffle, draw)
    return scenario("fair")


# --- 1. pooled detection ----------------------------------------------------------------------


def detect_trial(
    device: str, k: int, trial: int, cap: int
) -> tuple[int, str, list[str], list[str]]:
    """Pool rounds until the first finding of the pool or of any table's own watch (cap + 1 if
    none), which fired (own, pool, both), the tests, and the pool findings' verdicts (every
    table is weak: ``model`` is right for k > 1, ``table`` for k = 1)."""
    budget = FloorBudget(tables=FLOOR)
    draw_only = device in DRAW_ONLY
    roles = ("position",) if draw_only else ROLES
    fw = FloorWatch(budget=budget)
    names = [f"T{t:02d}" for t in range(k)]
    scs = [scenario(device) for _ in range(k)]
    rngs = [random.Random(f"detect {device} {k} {trial} {t}") for t in range(k)]
    watches = [own_watch(budget, draw_only) for _ in range(k)]
    for t, name in enumerate(names):
        identify(fw, name, roles, name)
        first = next_observation(scs[t], rngs[t])
        watches[t].history.push(first)
        warm(fw, name, first)
    for n in range(1, cap + 1):
        t = (n - 1) % k
        obs = next_observation(scs[t], rngs[t])
        now = T0 + timedelta(seconds=n)
        own = watches[t].observe(obs, now)
        pooled = fw.observe(names[t], obs, now)
        if own or pooled:
            source = "both" if own and pooled else "own" if own else "pool"
            tests = sorted({f.test for f in own} | {p.finding.test for p in pooled})
            return n, source, tests, [p.attribution.verdict for p in pooled]
    return cap + 1, "", [], []


def kl_of(device: str) -> float | None:
    return KL[device]() if device in KL else None


def detect_rows(
    devices: list[str], pools: Sequence[int], trials: int, cap: int,
    executor: ProcessPoolExecutor, started: float,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    budget = FloorBudget(tables=FLOOR)
    table, pool = budget.table_config(), budget.pool_config()
    ln_table = math.log(table.rounds_per_year / table.false_alarms_per_year)
    ln_pool = math.log(pool.rounds_per_year / pool.false_alarms_per_year)
    futures = {
        (d, k): [executor.submit(detect_trial, d, k, i, cap) for i in range(trials)]
        for d in devices
        for k in pools
    }
    rows: dict[str, dict[str, Any]] = {}
    for d in devices:
        kl = kl_of(d)
        by_k: dict[str, Any] = {}
        for k in pools:
            results = [f.result() for f in futures[(d, k)]]
            per_table = [n / k for n, *_ in results]
            by_k[str(k)] = {
                "median": round(percentile(per_table, 50), 2),
                "p90": round(percentile(per_table, 90), 2),
                "pool_rounds_median": int(percentile([n for n, *_ in results], 50)),
                "never": round(sum(1 for n, *_ in results if n > cap) / len(results), 3),
                "fired": dict(Counter(s for _, s, _, _ in results if s)),
                "tests": sorted({t for _, _, tests, _ in results for t in tests}),
                "verdicts": dict(Counter(v for *_, verdicts in results for v in verdicts)),
                "bound": round(ln_pool / kl / k, 2) if kl else None,
            }
        single = by_k[str(pools[0])]["median"] if pools[0] == 1 else None
        ratio = None
        if single and "20" in by_k:
            ratio = round(by_k["20"]["median"] / single, 3)
        rows[d] = {
            "draw_only": d in DRAW_ONLY,
            "single": single,
            "bound_table": round(ln_table / kl, 1) if kl else None,
            "pools": by_k,
            "ratio_20_1": ratio,
            "target": None if single is None or single <= 20 or ratio is None else ratio <= 0.1,
        }
        parts = ", ".join(
            f"k={k} {by_k[str(k)]['median']:g}/table (never {by_k[str(k)]['never']:.0%})"
            for k in pools
        )
        say(f"detect {d}: {parts}", started)
    return rows


# --- 2. false alarms of the pools ---------------------------------------------------------


def fair_chunk(chunk: int, rounds: int, tables: int) -> tuple[int, list[list[Any]], float]:
    """``rounds`` fair rounds of one floor of ``tables`` tables through its pools (each test
    reset as soon as it alarms); the alarms and the CPU seconds."""
    budget = FloorBudget(tables=tables)
    fw = FloorWatch(budget=budget)
    names = [f"F{chunk}-{t:02d}" for t in range(tables)]
    scs = [scenario("fair") for _ in range(tables)]
    rngs = [random.Random(f"fair {chunk} {t}") for t in range(tables)]
    for name in names:
        identify(fw, name, ROLES, name)
    alarms: list[list[Any]] = []
    step = max(1, rounds // 20)
    cpu = time.process_time()
    for n in range(rounds):
        t = n % tables
        obs = next_observation(scs[t], rngs[t])
        now = T0 + timedelta(seconds=n)
        for pf in fw.observe(names[t], obs, now):
            alarms.append([pf.pool.id, pf.finding.test, n, pf.attribution.verdict])
            fw.reset(pf.pool.id, pf.finding.test, now)
        if (n + 1) % step == 0:
            say(
                f"fair floor {chunk}: {n + 1:,} of {rounds:,} rounds, {len(alarms)} alarms, "
                f"{(time.process_time() - cpu) / (n + 1) * 1e3:.3f} ms CPU a round"
            )
    return rounds, alarms, time.process_time() - cpu


def poisson_tail(mean: float, k: int) -> float:
    """P(X ≥ k) for X ~ Poisson(mean)."""
    if k <= 0:
        return 1.0
    return max(0.0, 1.0 - sum(math.exp(-mean) * mean**i / math.factorial(i) for i in range(k)))


def fair_figures(
    total: int, chunks: int, executor: ProcessPoolExecutor, started: float
) -> dict[str, Any]:
    sizes = [total // chunks + (1 if i < total % chunks else 0) for i in range(chunks)]
    futures = [executor.submit(fair_chunk, i, n, FLOOR) for i, n in enumerate(sizes) if n]
    done, cpu = 0, 0.0
    alarms: list[list[Any]] = []
    for f in futures:
        n, found, seconds = f.result()
        done, alarms, cpu = done + n, alarms + found, cpu + seconds
    budget = FloorBudget(tables=FLOOR)
    year = budget.tables * budget.rounds_per_table_year
    bound = budget.false_alarms_per_year * budget.pooled_share * done / year
    bound_model = bound / 2
    say(f"fair: {done:,} rounds, {len(alarms)} pool false alarms", started)
    return {
        "rounds": done,
        "floors": len(futures),
        "tables": FLOOR,
        "false_alarms": len(alarms),
        "alarms": alarms,
        "bound": float(f"{bound:.4g}"),
        "bound_model_pools": float(f"{bound_model:.4g}"),
        "p_at_least": poisson_tail(bound, len(alarms)),
        "ms_cpu_per_round": round(cpu / done * 1e3, 4) if done else None,
    }


# --- 3. attribution -------------------------------------------------------------------------


def attribution_run(device: str, trial: int, cap: int) -> dict[str, Any]:
    """One weak table among ``ATTRIBUTION_TABLES``: its rounds until the first finding naming
    it (cap + 1 if none), which detector, and the pool findings before that by verdict."""
    budget = FloorBudget(tables=FLOOR)
    draw_only = device in DRAW_ONLY
    roles = ("position",) if draw_only else ROLES
    k = ATTRIBUTION_TABLES
    weak = trial % k
    fw = FloorWatch(budget=budget)
    names = [f"A{t:02d}" for t in range(k)]
    scs = [scenario(device) if t == weak else fair_like(device) for t in range(k)]
    rngs = [random.Random(f"attribution {device} {trial} {t}") for t in range(k)]
    own = own_watch(budget, draw_only)
    for t, name in enumerate(names):
        identify(fw, name, roles, name)
        first = next_observation(scs[t], rngs[t])
        if t == weak:
            own.history.push(first)
        warm(fw, name, first)
    before: Counter[str] = Counter()
    first_kind = ""
    weak_rounds = 0
    n = 0
    while weak_rounds <= cap:
        t = n % k
        n += 1
        obs = next_observation(scs[t], rngs[t])
        now = T0 + timedelta(seconds=n)
        own_found: list[Any] = []
        if t == weak:
            weak_rounds += 1
            own_found = own.observe(obs, now)
        pool_named = False
        for pf in fw.observe(names[t], obs, now):
            a = pf.attribution
            if a.verdict == "table" and a.table == names[weak]:
                pool_named = True
                continue
            kind = a.verdict if a.table == names[weak] or a.verdict == "model" else "other table"
            before[kind] += 1
            first_kind = first_kind or kind
            fw.reset(pf.pool.id, pf.finding.test, now)
        if own_found or pool_named:
            by = "both" if own_found and pool_named else "own" if own_found else "pool"
            return {
                "rounds": weak_rounds,
                "by": by,
                "first": first_kind or "named",
                "before": dict(before),
            }
    return {"rounds": cap + 1, "by": "", "first": first_kind or "none", "before": dict(before)}


def attribution_rows(
    trials: int, cap: int, singles: dict[str, float], executor: ProcessPoolExecutor,
    started: float,
) -> dict[str, dict[str, Any]]:  # fmt: skip
    futures: dict[str, list[Future[Any]]] = {
        d: [executor.submit(attribution_run, d, i, cap) for i in range(trials)]
        for d in ATTRIBUTION_DEVICES
    }
    rows: dict[str, dict[str, Any]] = {}
    for d in ATTRIBUTION_DEVICES:
        runs = [f.result() for f in futures[d]]
        rounds = [r["rounds"] for r in runs]
        median = percentile(rounds, 50)
        single = singles.get(d)
        named_first = sum(1 for r in runs if r["first"] == "named" and r["rounds"] <= cap)
        ratio = round(median / single, 3) if single else None
        rate = named_first / len(runs)
        rows[d] = {
            "median": int(median),
            "p90": int(percentile(rounds, 90)),
            "never": round(sum(1 for n in rounds if n > cap) / len(runs), 3),
            "single": single,
            "ratio": ratio,
            "named_first_rate": round(rate, 3),
            "misattributed_model": sum(r["before"].get("model", 0) for r in runs),
            "undecided": sum(r["before"].get("undecided", 0) for r in runs),
            "other_table": sum(r["before"].get("other table", 0) for r in runs),
            "first_fired": dict(Counter(r["by"] for r in runs if r["by"])),
            "target": ratio is not None and ratio <= 1.2 and rate >= 0.95,
        }
        row = rows[d]
        say(
            f"attribution {d}: median {row['median']} rounds of the weak table (single "
            f"{single}, ratio {ratio}), named first in {rate:.0%}, model verdicts "
            f"{row['misattributed_model']}, fired first {row['first_fired']}",
            started,
        )
    return rows


def singles_for(
    devices: Sequence[str], trials: int, cap: int, executor: ProcessPoolExecutor
) -> dict[str, float]:
    """Single-table medians (k = 1, part 1's measurement) of devices part 1 did not run."""
    futures = {
        d: [executor.submit(detect_trial, d, 1, i, cap) for i in range(trials)] for d in devices
    }
    return {d: percentile([f.result()[0] for f in fs], 50) for d, fs in futures.items()}


# --- 4. pit CPU ------------------------------------------------------------------------------


def cpu_figures(warm_rounds: int, timed_rounds: int, started: float) -> dict[str, Any]:
    tables = CPU_TABLES
    budget = FloorBudget(tables=tables)
    fw = FloorWatch(budget=budget)
    names = [f"C{t:04d}" for t in range(tables)]
    for t, name in enumerate(names):
        identify(
            fw, name, ROLES, name,
            cards=("Acme", f"Riffler {t % 4}", "2.1"), position=("Acme", f"RNG {t % 2}", "1.4"),
        )  # fmt: skip
    scs = [Scenario("fair_rng", fair_shuffle, rng_favours(7, 1.0)) for _ in range(tables)]
    rngs = [random.Random(f"cpu {t}") for t in range(tables)]
    order_rng = random.Random("cpu order")
    rounds: list[tuple[str, Any]] = []
    while len(rounds) < warm_rounds + timed_rounds:
        order = list(range(tables))
        order_rng.shuffle(order)
        for t in order[: warm_rounds + timed_rounds - len(rounds)]:
            rounds.append((names[t], next_observation(scs[t], rngs[t])))
    say(f"cpu: {len(rounds):,} rounds made for {tables:,} tables", started)
    base = Watch()
    alarms = 0
    for i, (name, obs) in enumerate(rounds[:warm_rounds]):
        now = T0 + timedelta(seconds=i)
        alarms += len(fw.observe(name, obs, now))
        base.observe(obs, now)
    timed = rounds[warm_rounds:]
    cpu = time.process_time()
    for i, (name, obs) in enumerate(timed, warm_rounds):
        alarms += len(fw.observe(name, obs, T0 + timedelta(seconds=i)))
    pooled = time.process_time() - cpu
    cpu = time.process_time()
    for i, (_, obs) in enumerate(timed, warm_rounds):
        base.observe(obs, T0 + timedelta(seconds=i))
    baseline = time.process_time() - cpu
    n = max(1, len(timed))
    out = {
        "tables": tables,
        "pools": len(fw.pools),
        "warm_rounds": warm_rounds,
        "timed_rounds": len(timed),
        "ms_per_round": round(pooled / n * 1e3, 4),
        "baseline_ms_per_round": round(baseline / n * 1e3, 4),
        "ratio": round(pooled / baseline, 3) if baseline else None,
        "pool_findings": alarms,
    }
    say(
        f"cpu: {out['ms_per_round']} ms a round through the floor's pools, "
        f"{out['baseline_ms_per_round']} ms through one table's Watch()",
        started,
    )
    return out


# --- main ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--parts", default="detect,fair,attribution,cpu")
    parser.add_argument("--trials", type=int, help="runs a device and pool size (20)")
    parser.add_argument("--pools", default="", help="pool sizes (default 1,5,20,50)")
    parser.add_argument("--cap", type=int, default=CAP, help="pool rounds before giving up")
    parser.add_argument("--devices", default="", help="comma-separated (default: all weak)")
    parser.add_argument("--fair-rounds", type=int, help="(1,000,000)")
    parser.add_argument("--fair-chunks", type=int, default=2, help="independent fair floors")
    parser.add_argument("--attribution-trials", type=int, help="(40)")
    parser.add_argument("--cpu-rounds", type=int, default=4_000, help="warm, then as many timed")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--quick", action="store_true",
        help="5 trials, pools of 1 and 20, 20,000 fair rounds, 5 attribution runs (each "
        "unless given)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    quick = args.quick
    pools = tuple(int(x) for x in args.pools.split(",") if x) or (QUICK_POOLS if quick else POOLS)
    if args.trials is None:
        args.trials = 5 if quick else 20
    if args.fair_rounds is None:
        args.fair_rounds = 20_000 if quick else 1_000_000
    if args.attribution_trials is None:
        args.attribution_trials = 5 if quick else 40
    parts = {p for p in args.parts.split(",") if p}
    unknown = parts - {"detect", "fair", "attribution", "cpu"}
    if unknown:
        parser.error(f"unknown parts {sorted(unknown)}")
    if min(args.trials, args.workers, args.cap, args.fair_chunks, args.attribution_trials) < 1:
        parser.error(
            "--trials, --attribution-trials, --workers, --cap and --fair-chunks must be at least 1"
        )
    if args.fair_rounds < 0 or args.cpu_rounds < 1:
        parser.error("--fair-rounds must be at least 0, --cpu-rounds at least 1")
    if any(k < 1 for k in pools):
        parser.error("--pools: pool sizes must be at least 1")
    pools = tuple(sorted(set(pools)))
    devices = [d for d in BIASED if d not in SKIPPED]
    if args.devices:
        devices = [d for d in args.devices.split(",") if d]
        for d in devices:
            scenario(d)  # ValueError names the devices
    started = time.perf_counter()
    budget = FloorBudget(tables=FLOOR)
    figures: dict[str, Any] = {
        "budget": budget.to_dict(),
        "trials": args.trials,
        "cap_pool_rounds": args.cap,
        "pools": list(pools),
        "quick": args.quick,
        "attribution_trials": args.attribution_trials,
        "workers": args.workers,
    }
    targets: dict[str, bool | None] = {}
    rows: dict[str, dict[str, Any]] = {}
    with ProcessPoolExecutor(args.workers) as executor:
        if "detect" in parts:
            rows = detect_rows(devices, pools, args.trials, args.cap, executor, started)
            figures["detect"] = rows
            checked = [r["target"] for r in rows.values() if r["target"] is not None]
            targets["pooled_k20_tenth_of_single"] = all(checked) if checked else None
        if "fair" in parts and args.fair_rounds > 0:
            figures["fair"] = fair_figures(args.fair_rounds, args.fair_chunks, executor, started)
            targets["pool_false_alarms_within_bound"] = figures["fair"]["p_at_least"] >= 0.01
        if "attribution" in parts:
            singles = {
                d: rows[d]["single"] for d in ATTRIBUTION_DEVICES if d in rows and rows[d]["single"]
            }
            missing = [d for d in ATTRIBUTION_DEVICES if d not in singles]
            if missing:
                say(f"attribution: single-table medians of {', '.join(missing)} first", started)
                singles |= singles_for(missing, args.trials, args.cap, executor)
            att = attribution_rows(args.attribution_trials, args.cap, singles, executor, started)
            figures["attribution"] = att
            targets["attribution"] = all(r["target"] for r in att.values())
    if "cpu" in parts:
        figures["cpu"] = cpu_figures(args.cpu_rounds, args.cpu_rounds, started)
        targets["cpu_at_most_1_ms"] = figures["cpu"]["ms_per_round"] <= 1.0
    print_table(figures, pools)
    figures["targets"] = targets
    figures["wall_s"] = round(time.perf_counter() - started, 1)
    print(f"targets: {targets}")
    print(f"wall {figures['wall_s']:.0f} s")
    last_line(figures)
    return 0


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:,.0f}" if x >= 100 else f"{x:,.2f}".rstrip("0").rstrip(".")


def print_table(figures: dict[str, Any], pools: Sequence[int]) -> None:
    if "detect" in figures:
        print(
            "pooled detection: median rounds per table to the first finding (pool or own "
            "watch); 50-table floor budget; bound: ln(R/F)/KL per table"
        )
        head = f"{'device':18} " + " ".join(f"{'k=' + str(k):>9}" for k in pools)
        print(head + f" {'k20/k1':>7} {'bound 1':>8} {'bound 20':>8}  never  target")
        for d, row in figures["detect"].items():
            cells = " ".join(f"{_num(row['pools'][str(k)]['median']):>9}" for k in pools)
            never = max(row["pools"][str(k)]["never"] for k in pools)
            b20 = row["pools"].get("20", {}).get("bound")
            target = {None: "—", True: "pass", False: "FAIL"}[row["target"]]
            print(
                f"{d:18} {cells} {_num(row['ratio_20_1']):>7} {_num(row['bound_table']):>8} "
                f"{_num(b20):>8}  {never:>5.0%}  {target}"
            )
    if "fair" in figures:
        f = figures["fair"]
        print(
            f"pool false alarms: {f['false_alarms']} in {f['rounds']:,} fair rounds over "
            f"{f['floors']} floors of {f['tables']} tables; the budget's bound {f['bound']:.3g} "
            f"expected (model pools' share {f['bound_model_pools']:.3g}); P(≥ that many) "
            f"{f['p_at_least']:.3g}; {f['ms_cpu_per_round']} ms CPU a round incl. dealing"
        )
    if "attribution" in figures:
        print("attribution: one weak table among 20 of its model")
        for d, r in figures["attribution"].items():
            print(
                f"  {d:16} median {r['median']:,} rounds (p90 {r['p90']:,}, never "
                f"{r['never']:.0%}), single {_num(r['single'])}, ratio {_num(r['ratio'])}; "
                f"named first {r['named_first_rate']:.0%}; model verdicts "
                f"{r['misattributed_model']}, undecided {r['undecided']}, other table "
                f"{r['other_table']}; fired first {r['first_fired']}"
            )
    if "cpu" in figures:
        c = figures["cpu"]
        print(
            f"pit CPU at {c['tables']:,} tables ({c['pools']} pools): {c['ms_per_round']} ms a "
            f"round over {c['timed_rounds']:,} rounds; one table's Watch() "
            f"{c['baseline_ms_per_round']} ms; ratio {c['ratio']}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
