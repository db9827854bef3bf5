"""The running protection tests of one table: ``Watch.observe`` each settled round, read
``states`` for the supervisor's panel, act on the ``Finding``s, persist with ``to_state``."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from controller.game.hands import evaluate
from controller.protection.bias import CardSeat, DiceBias, RankSeat, RngBias
from controller.protection.checks import CHECKS, Cell, Check, Round
from controller.protection.exact import DEALT, DECK_CARDS, PACKET_SIZE, PACKETS
from controller.protection.observation import DealObservation
from controller.protection.orders import OrderView, order_view, where_dealt
from controller.protection.shuffles import (
    LAGS,
    KeptTogether,
    PickupOrder,
    Riffles,
    ShelfShuffler,
)

STATE_VERSION = 1  # later additions are optional keys: a state without them still loads
#: Every test, in panel order: today's first, then those of issue 24 (docs/protection.md).
ALL_CHECKS = (
    *CHECKS,
    Riffles,
    ShelfShuffler,
    KeptTogether,
    PickupOrder,
    RngBias,
    DiceBias,
    CardSeat,
    RankSeat,
)
Severity = Literal["info", "warning", "critical"]


@dataclass(frozen=True, slots=True)
class ProtectionConfig:
    """How strict the watch is. Each test's CUSUMs share ``false_alarms_per_year`` equally;
    construction raises ValueError naming the setting that is out of range."""

    false_alarms_per_year: float = 0.1
    rounds_per_year: int = 300_000
    recent_deals: int = 10  # deals a repeat is looked for among
    chart_every: int = 50  # rounds between two points of a test's chart
    chart_points: int = 200  # points a chart keeps

    def __post_init__(self) -> None:
        fa = self.false_alarms_per_year
        if (
            isinstance(fa, bool)
            or not isinstance(fa, (int, float))
            or not math.isfinite(fa)
            or fa <= 0
        ):
            raise ValueError(f"false_alarms_per_year must be a positive number, got {fa!r}")
        for name, low, high in (
            ("rounds_per_year", 1, 10**9),
            ("recent_deals", 1, 1000),
            ("chart_every", 1, 10**6),
            ("chart_points", 2, 10_000),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValueError(f"{name} must be a whole number {low}–{high}, got {value!r}")
        if fa >= self.rounds_per_year:
            raise ValueError(
                f"false_alarms_per_year ({fa}) must be below rounds_per_year "
                f"({self.rounds_per_year}): an alarm a round protects nothing"
            )

    @property
    def false_alarm_rate(self) -> float:
        """False alarms a round allowed over all tests together."""
        return self.false_alarms_per_year / self.rounds_per_year

    def to_dict(self) -> dict[str, Any]:
        return {
            "false_alarms_per_year": self.false_alarms_per_year,
            "rounds_per_year": self.rounds_per_year,
            "recent_deals": self.recent_deals,
            "chart_every": self.chart_every,
            "chart_points": self.chart_points,
        }


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


@dataclass(frozen=True, slots=True)
class Finding:
    """A test newly past its threshold. ``statistic`` is the CUSUM's log-likelihood ratio
    (``llr``); ``p_value`` bounds the chance a fair device pushes this test this high within
    ``rounds_seen`` rounds; ``since`` is when the evidence window began (``rounds`` rounds)."""

    test: str
    title: str
    detail: str
    statistic: float
    threshold: float
    llr: float
    p_value: float
    since: datetime | None
    at: datetime
    rounds: int
    rounds_seen: int
    advice: str
    severity: Severity
    reference: str = ""
    alternative: str = ""
    evidence: str = ""
    cusum: int = -1  # which of the test's CUSUMs (``Watch.check(test).label(cusum)``)

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "title": self.title,
            "detail": self.detail,
            "statistic": self.statistic,
            "threshold": self.threshold,
            "llr": self.llr,
            "p_value": self.p_value,
            "since": _iso(self.since),
            "at": self.at.isoformat(),
            "rounds": self.rounds,
            "rounds_seen": self.rounds_seen,
            "advice": self.advice,
            "severity": self.severity,
            "reference": self.reference,
            "alternative": self.alternative,
            "evidence": self.evidence,
        }


@dataclass(frozen=True, slots=True)
class TestState:
    """One test for the supervisor's panel (see ``to_dict`` for the JSON shape)."""

    __test__ = False  # a data class, not a pytest test

    name: str
    title: str
    watches: str
    severity: Severity
    rounds: int
    statistic: float
    threshold: float
    llr: float
    p_value: float
    worst: str
    alarmed_since: datetime | None
    reset_at: datetime | None
    history: tuple[tuple[int, float], ...]
    cells: tuple[Cell, ...]
    advice: str = field(default="")
    reference: str = ""
    alternative: str = ""
    evidence: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "watches": self.watches,
            "severity": self.severity,
            "rounds": self.rounds,
            "statistic": self.statistic,
            "threshold": self.threshold,
            "llr": self.llr,
            "p_value": self.p_value,
            "worst": self.worst,
            "alarmed_since": _iso(self.alarmed_since),
            "reset_at": _iso(self.reset_at),
            "history": [[n, s] for n, s in self.history],
            "cells": [c.to_dict() for c in self.cells],
            "advice": self.advice,
            "reference": self.reference,
            "alternative": self.alternative,
            "evidence": self.evidence,
        }


def _draw_round(obs: DealObservation) -> Round:
    """A round as the draw's tests read it (they read only ``obs``): no work on the cards."""
    return Round(obs, [], [], [], [], 0, (), None, [], [])


def p_value(check: Check, statistic: float) -> float:
    """P(a fair device drives any of the check's CUSUMs to ``statistic`` within its rounds) ≤
    CUSUMs · rounds · e^-statistic (Ville's inequality for each start, and a union bound)."""
    return min(1.0, check.size * max(1, check.rounds) * math.exp(-statistic))


class _Slot:
    """A check with its alarm latch and chart."""

    __slots__ = ("alarmed_since", "check", "history", "reset_at")

    def __init__(self, check: Check, points: int) -> None:
        self.check = check
        self.alarmed_since: datetime | None = None
        self.reset_at: datetime | None = None
        self.history: deque[tuple[int, float]] = deque(maxlen=points)


class DealHistory:
    """The deals a watch compares each new deal with (the last ``recent_deals``, newest last).
    A table's watch keeps its own; the floor's pooled watch (``pit.pooling``) keeps one per
    table and passes it to :meth:`Watch.observe`, so one table's deal is only ever compared
    with that table's earlier deals, never with another table's."""

    __slots__ = ("recent", "where")

    def __init__(self, recent_deals: int) -> None:
        self.recent: deque[tuple[tuple[int, ...], frozenset[int]]] = deque(maxlen=recent_deals)
        self.where: dict[int, list[int]] = {}  # id of a recent deal's tuple → ``where_dealt``

    def orders(self, obs: DealObservation, dealt: list[int]) -> list[OrderView]:
        """This deal against the earlier deals of ``LAGS`` (those there are)."""
        orders: list[OrderView] = []
        for lag in LAGS:
            if len(self.recent) >= lag:
                earlier = self.recent[-lag][0]
                where = self.where.get(id(earlier))
                if where is None:
                    where = self.where[id(earlier)] = where_dealt(earlier)
                orders.append(order_view(lag, earlier, dealt, obs.stub, where))
        return orders

    def push(self, obs: DealObservation) -> None:
        """Remember a deal (after it was observed; or one dealt before the watch began)."""
        self.recent.append((tuple(obs.dealt), frozenset(obs.stub)))
        kept = {id(d) for d, _ in list(self.recent)[-len(LAGS) :]}
        self.where = {k: v for k, v in self.where.items() if k in kept}


class Watch:
    """Every protection test of one table. Pure: no I/O and no clock; times come in as
    arguments. Not thread-safe: call it from one task."""

    def __init__(
        self,
        config: ProtectionConfig | None = None,
        *,
        checks: Sequence[Callable[[], Check]] = ALL_CHECKS,
        shares: int | None = None,
    ) -> None:
        """``checks``: the tests to run (all by default; the bench times today's alone).
        ``shares``: how many tests the yearly false alarms are shared among (by default those
        run): ``len(ALL_CHECKS)`` runs a few tests at the thresholds of the whole watch."""
        self.config = config or ProtectionConfig()
        self._slots = [_Slot(cls(), self.config.chart_points) for cls in checks]
        per_check = self.config.false_alarm_rate / (shares or len(self._slots))
        for slot in self._slots:
            # Each CUSUM may false-alarm at most per_check / size a round: e^-threshold.
            slot.check.threshold = math.log(slot.check.size / per_check)
        self._by_name = {slot.check.name: slot for slot in self._slots}
        self.history = DealHistory(self.config.recent_deals)
        #: whether any test reads the cards (a watch of the draw's tests alone does not)
        self._reads_deal = any(slot.check.reads_deal for slot in self._slots)
        self.rounds = 0

    @property
    def names(self) -> list[str]:
        """The tests' names, in panel order."""
        return [slot.check.name for slot in self._slots]

    def observe(
        self, obs: DealObservation, now: datetime, history: DealHistory | None = None
    ) -> list[Finding]:
        """Count one settled round in every test it concerns; the tests that crossed their
        threshold in this round and had not already alarmed since their last reset.
        ``history``: the earlier deals of the table this deal is from (default: the watch's own,
        a table's watch)."""
        self.rounds += 1
        history = self.history if history is None else history
        r = self._round(obs, history) if self._reads_deal else _draw_round(obs)
        findings: list[Finding] = []
        every = self.config.chart_every
        for slot in self._slots:
            check = slot.check
            if not check.applies(r):
                continue
            check.rounds += 1
            i, value = check.update(r, now)
            if value >= check.threshold and slot.alarmed_since is None:
                slot.alarmed_since = now
                findings.append(self._finding(slot, i, value, now))
            if check.rounds % every == 0:
                slot.history.append((check.rounds, check.bank.top(check.rounds)[1]))
        if self._reads_deal:
            history.push(obs)
        return findings

    @staticmethod
    def _round(obs: DealObservation, history: DealHistory) -> Round:
        """What the tests read of a deal: each card's packet, place and seat, each position's
        hand category, and its order against the earlier deals of ``history``."""
        dealt = obs.dealt
        packet_of = [PACKETS] * DECK_CARDS
        place_of = [PACKET_SIZE] * DECK_CARDS
        seat_of = [PACKETS] * DECK_CARDS
        categories = [0] * PACKETS
        dealer_key = 0
        for k, packet in enumerate(obs.packets):
            seat = obs.positions[k] - 1
            for j, c in enumerate(packet):
                packet_of[c] = k
                place_of[c] = j
                seat_of[c] = seat
            key = evaluate(packet)
            categories[seat] = key >> 20
            if seat == 0:
                dealer_key = key
        orders = history.orders(obs, dealt)
        # The previous deal's relative order (``checks.relative_order``), from the view.
        inverse = orders[0].place if orders else None
        return Round(
            obs,
            dealt,
            packet_of,
            place_of,
            categories,
            dealer_key,
            history.recent,
            inverse,
            seat_of,
            orders,
        )

    def _finding(self, slot: _Slot, i: int, value: float, now: datetime) -> Finding:
        check = slot.check
        start = check.bank.start[i]
        return Finding(
            test=check.name,
            title=check.title,
            detail=check.label(i),
            statistic=value,
            threshold=check.threshold,
            llr=value,
            p_value=p_value(check, value),
            since=check.bank.start_time[i],
            at=now,
            rounds=check.rounds - start + 1 if start else 0,
            rounds_seen=check.rounds,
            advice=check.advice,
            severity=check.severity,  # type: ignore[arg-type]
            reference=check.reference(i),
            alternative=check.alternative(i),
            evidence=check.evidence(i),
            cusum=i,
        )

    def check(self, name: str) -> Check:
        """The running test of that name; KeyError for one this watch does not run."""
        return self._by_name[name].check

    def reset(self, test: str | None, now: datetime) -> None:
        """Clear one test (or every test, for None): its evidence, counts, chart and alarm, so it
        can alarm again. ValueError names an unknown test."""
        if test is not None and test not in self._by_name:
            raise ValueError(f"no protection test {test!r}; the tests are {', '.join(self.names)}")
        for slot in self._slots if test is None else [self._by_name[test]]:
            slot.check.clear()
            slot.alarmed_since = None
            slot.reset_at = now
            slot.history.clear()

    def states(self) -> list[TestState]:
        """Every test as the panel shows it, in panel order."""
        out = []
        for slot in self._slots:
            check = slot.check
            worst, value = check.bank.top(check.rounds)
            out.append(
                TestState(
                    name=check.name,
                    title=check.title,
                    watches=check.watches,
                    severity=check.severity,  # type: ignore[arg-type]
                    rounds=check.rounds,
                    statistic=value,
                    threshold=check.threshold,
                    llr=value,
                    p_value=p_value(check, value),
                    worst=check.label(worst) if value > 0 else "",
                    alarmed_since=slot.alarmed_since,
                    reset_at=slot.reset_at,
                    history=tuple(slot.history),
                    cells=tuple(check.cells(worst)),
                    advice=check.advice,
                    reference=check.reference(worst) if value > 0 else "",
                    alternative=check.alternative(worst) if value > 0 else "",
                    evidence=check.evidence(worst) if value > 0 else "",
                )
            )
        return out

    def to_state(self) -> dict[str, Any]:
        """Everything the watch knows, as JSON-able data for ``from_state``."""
        return {
            "version": STATE_VERSION,
            "rounds": self.rounds,
            "recent": [[list(dealt), sorted(stub)] for dealt, stub in self.history.recent],
            "tests": {
                slot.check.name: {
                    "rounds": slot.check.rounds,
                    "cusums": slot.check.bank.to_state(),
                    "counts": slot.check.counts_state(),
                    "alarmed_since": _iso(slot.alarmed_since),
                    "reset_at": _iso(slot.reset_at),
                    "history": [[n, s] for n, s in slot.history],
                }
                for slot in self._slots
            },
        }

    @classmethod
    def from_state(
        cls,
        state: dict[str, Any],
        config: ProtectionConfig | None = None,
        *,
        checks: Sequence[Callable[[], Check]] = ALL_CHECKS,
        shares: int | None = None,
    ) -> Watch:
        """A watch that carries on from ``to_state``'s data (thresholds from ``config``; the
        tests ``checks`` as in the constructor). ValueError says what does not fit; a test the
        state does not hold starts afresh."""
        watch = cls(config, checks=checks, shares=shares)
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            raise ValueError(f"protection state: not a version {STATE_VERSION} state")
        rounds = state.get("rounds")
        if not isinstance(rounds, int) or rounds < 0:
            raise ValueError("protection state: rounds must be a whole number")
        watch.rounds = rounds
        recent = state.get("recent")
        if not isinstance(recent, list):
            raise ValueError("protection state: recent must be a list")
        for item in recent:
            if (
                not isinstance(item, list)
                or len(item) != 2
                or not isinstance(item[0], list)
                or len(item[0]) != DEALT
            ):
                raise ValueError("protection state: a recent deal must be [49 cards, stub]")
            watch.history.recent.append(
                (tuple(int(c) for c in item[0]), frozenset(int(c) for c in item[1]))
            )
        tests = state.get("tests")
        if not isinstance(tests, dict):
            raise ValueError("protection state: tests must be an object")
        for name, data in tests.items():
            slot = watch._by_name.get(name)
            if slot is None:
                raise ValueError(f"protection state: unknown test {name!r}")
            if not isinstance(data, dict) or not isinstance(data.get("rounds"), int):
                raise ValueError(f"protection state: test {name} is malformed")
            slot.check.rounds = data["rounds"]
            slot.check.bank.load(data.get("cusums", []))
            slot.check.load_counts(data.get("counts", {}))
            since, reset_at = data.get("alarmed_since"), data.get("reset_at")
            slot.alarmed_since = None if since is None else datetime.fromisoformat(since)
            slot.reset_at = None if reset_at is None else datetime.fromisoformat(reset_at)
            slot.history.extend((int(n), float(s)) for n, s in data.get("history", []))
        return watch
