"""Seeded, multi-process Monte Carlo of whole deals, and the statistics of its results.

Rounds are split into fixed chunks of ``CHUNK_ROUNDS``; chunk ``i`` draws its deals from
``random.Random(f"paigow-analysis/{seed}/{i}")``. So a result depends on the rounds and the seed
only, never on how many worker processes played the chunks, and two simulations with the same
seed see the same deals (a paired comparison of two strategies).
"""

from __future__ import annotations

import math
import multiprocessing
import random
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from controller.analysis.census import finish_pool
from controller.analysis.progress import Progress

CHUNK_ROUNDS: Final = 10_000
Z95: Final = 1.959963984540054
DEAL_CODES: Final = tuple(range(53))
DEAL_SIZE: Final = 14  # the dealer's seven cards, then the player's


class Simulation(Protocol):
    """A picklable game: ``play`` deals ``rounds`` rounds from ``rng`` and tallies outcomes."""

    def play(self, rng: random.Random, rounds: int) -> Counter[str]: ...


def chunk_rng(seed: int, index: int) -> random.Random:
    """The generator of chunk ``index`` of a run with ``seed`` (seeded from a string: sha512)."""
    return random.Random(f"paigow-analysis/{seed}/{index}")


def deal(rng: random.Random) -> tuple[list[int], list[int]]:
    """The dealer's seven cards and a player's seven, from a shuffled 53-card deck."""
    cards = rng.sample(DEAL_CODES, DEAL_SIZE)
    return cards[:7], cards[7:]


@dataclass(frozen=True, slots=True)
class RunResult:
    """Tallies of a run, its size, wall-clock seconds, and the CPU seconds the workers spent
    playing (so the rate per core does not count time a busy machine gave to other work)."""

    tally: Counter[str]
    rounds: int
    seed: int
    workers: int
    seconds: float
    cpu_seconds: float

    @property
    def rounds_per_second(self) -> float:
        return self.rounds / self.seconds if self.seconds else 0.0

    @property
    def rounds_per_second_per_core(self) -> float:
        return self.rounds / self.cpu_seconds if self.cpu_seconds else 0.0


def _play_chunk(job: tuple[Simulation, int, int, int]) -> tuple[Counter[str], float]:
    sim, seed, index, rounds = job
    start = time.process_time()
    tally = sim.play(chunk_rng(seed, index), rounds)
    return tally, time.process_time() - start


def simulate(
    sim: Simulation,
    rounds: int,
    *,
    seed: int,
    workers: int = 1,
    progress: Progress | None = None,
) -> RunResult:
    """Play ``rounds`` rounds of ``sim`` in ``workers`` processes; reproducible from ``seed``."""
    if rounds <= 0:
        raise ValueError(f"rounds must be positive, got {rounds}")
    jobs = [
        (sim, seed, i, min(CHUNK_ROUNDS, rounds - start))
        for i, start in enumerate(range(0, rounds, CHUNK_ROUNDS))
    ]
    tally: Counter[str] = Counter()
    cpu = 0.0
    if progress is not None:
        progress.start(rounds)
    start = time.perf_counter()
    workers = max(1, min(workers, len(jobs)))
    if workers == 1:
        parts = map(_play_chunk, jobs)
        for job, (part, seconds) in zip(jobs, parts, strict=True):
            tally.update(part)
            cpu += seconds
            if progress is not None:
                progress.advance(job[3])
    else:
        # forkserver, not fork: see census._parts (a fork of a threaded process may hang).
        with multiprocessing.get_context("forkserver").Pool(workers) as pool:
            for job, (part, seconds) in zip(jobs, pool.imap(_play_chunk, jobs), strict=True):
                tally.update(part)
                cpu += seconds
                if progress is not None:
                    progress.advance(job[3])
            finish_pool(pool)
    seconds = time.perf_counter() - start
    if progress is not None:
        progress.finish()
    return RunResult(tally, rounds, seed, workers, seconds, cpu)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean result per round, its standard error and its 95% confidence interval."""

    mean: float
    stderr: float

    @property
    def ci95(self) -> tuple[float, float]:
        return (self.mean - Z95 * self.stderr, self.mean + Z95 * self.stderr)


def house_edge(outcomes: Iterable[tuple[float, int]]) -> Estimate:
    """The house edge (minus the mean result per unit wagered) of a run whose rounds ended with
    the results given as (result, rounds) pairs; its interval is the normal one, from the sample
    variance."""
    pairs = list(outcomes)
    n = sum(c for _, c in pairs)
    if n == 0:
        return Estimate(math.nan, math.nan)
    mean = sum(x * c for x, c in pairs) / n
    second = sum(x * x * c for x, c in pairs) / n
    variance = max(0.0, second - mean * mean) * n / max(1, n - 1)
    return Estimate(-mean, math.sqrt(variance / n))
