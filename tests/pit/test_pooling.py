"""The floor's pooled game protection, pure (pit/pooling.py): the same tests as a table's, over
pools; each table's deals compared only with its own; the floor's budget; attribution of a
finding to one table or to the model; the state across a restart."""

from __future__ import annotations

import json
import math
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.game.cards import JOKER_CODE
from controller.protection import ProtectionConfig, Watch
from controller.protection.cusum import Bank, SumBank
from controller.protection.watch import ALL_CHECKS
from pit.pooling import (
    ATTRIBUTION_NATS,
    ROLE_CHECKS,
    FloorBudget,
    FloorWatch,
    PooledFinding,
    PoolKey,
    Share,
    decide,
)
from simulators.biased import next_observation, scenario

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _floor(tables: int, budget_tables: int | None = None, *, serial_base: str = "S") -> FloorWatch:
    fw = FloorWatch(FloorBudget(tables=budget_tables or tables))
    for t in range(tables):
        fw.identify(f"T{t}", "cards", "Acme", "MDX-2", "4.1", f"{serial_base}{t}")
        fw.identify(f"T{t}", "position", "Acme", "RNG-7", "1.0", f"N{t}")
    return fw


def test_each_role_runs_its_own_tests_and_every_test_is_somewhere() -> None:
    cards = {c().name for c in ROLE_CHECKS["cards"]}
    draw = {c().name for c in ROLE_CHECKS["position"]}
    assert draw == {"rng_number", "dice_sum", "dice_face", "rng_bias", "dice_bias"}
    assert cards & draw == set() and cards | draw == {c().name for c in ALL_CHECKS}


def test_the_budget_is_the_floors_and_its_arithmetic_holds() -> None:
    """Tables' own watches get (1 − share) of F spread over N tables; each kind of pool gets
    share/2 of F over the floor's N·R rounds: thresholds are ln(m·K·N·R·2 / (F·share))."""
    b = FloorBudget(false_alarms_per_year=0.1, pooled_share=0.5, tables=20)
    assert b.table_false_alarms_per_year == pytest.approx(0.0025)
    fw = _floor(1, 20)
    fw.observe("T0", next_observation(scenario("fair"), random.Random(1)), T0)
    pool = fw.pools["model:cards:Acme|MDX-2|4.1"]
    k = len(ALL_CHECKS)
    for name in ("card_packet", "riffles", "repeat_order"):
        check = pool.watch.check(name)
        expected = math.log(check.size * k * 20 * 300_000 * 2 / (0.1 * 0.5))
        assert check.threshold == pytest.approx(expected)
    own = Watch(b.table_config())
    assert own.check("card_packet").threshold == pytest.approx(math.log(424 * k * 300_000 / 0.0025))
    with pytest.raises(ValueError, match="pooled_share"):
        FloorBudget(pooled_share=1.0)
    with pytest.raises(ValueError, match="tables"):
        FloorBudget(tables=0)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.floats(-3, 3, allow_nan=False)), min_size=1, max_size=40
    ),
    st.lists(st.floats(-1, 0, allow_nan=False), min_size=6, max_size=6),
)
def test_a_sum_bank_is_the_unclamped_cusum(
    events: list[tuple[int, float]], base: list[float]
) -> None:
    """Property: ``SumBank`` sums exactly what a ``Bank`` adds, without the clamp at zero."""
    bank = SumBank(base)
    sums = [0.0] * 6
    for n, (i, x) in enumerate(events, start=1):
        for j in range(6):
            sums[j] += x if j == i else base[j]
        bank.add(i, x, n, T0)
    n = len(events)
    for j in range(6):
        assert bank.total(j, n) == pytest.approx(sums[j], abs=1e-9)
    clamped = Bank(base)
    for n, (i, x) in enumerate(events, start=1):
        clamped.add(i, x, n, T0)
    assert all(clamped.at(j, n) >= 0 for j in range(6))


def test_a_tables_deals_are_compared_only_with_its_own() -> None:
    """Two tables whose shufflers each riffle their own previous deal once: pooled, each deal is
    compared with its own table's last deal (caught at once), never the other table's (which
    would look like a fair shuffle); a pool that mixed them would see nothing."""
    fw = _floor(2)
    scs = [scenario("one_riffle"), scenario("one_riffle")]
    rng = random.Random(3)
    found = []
    for n in range(6):
        for t in (0, 1):
            found += fw.observe(f"T{t}", next_observation(scs[t], rng), T0 + timedelta(minutes=n))
        if found:
            break
    assert found and found[0].finding.test in ("riffles", "pair_survival", "rising_sequences",
                                               "kept_together")  # fmt: skip
    pool = fw.pools["model:cards:Acme|MDX-2|4.1"]
    assert set(pool.members) == {"T0", "T1"}
    for t in (0, 1):
        mine = {tuple(d) for d, _ in pool.members[f"T{t}"].recent}
        theirs = {tuple(d) for d, _ in pool.members[f"T{1 - t}"].recent}
        assert mine and not mine & theirs
    # Three tables' deals in one history (what a pool that mixed them would do): each deal is
    # compared with other tables' deals (a lag of 1 and of 2), and no order test sees a riffle.
    mixed = Watch(FloorBudget(tables=3).pool_config(), checks=ROLE_CHECKS["cards"],
                  shares=len(ALL_CHECKS))  # fmt: skip
    scs = [scenario("one_riffle") for _ in range(3)]
    rng = random.Random(3)
    for n in range(6):
        for t in (0, 1, 2):
            assert mixed.observe(next_observation(scs[t], rng), T0 + timedelta(minutes=n)) == []


def test_a_models_weakness_is_found_in_a_fraction_of_one_tables_rounds_and_called_the_models() -> (
    None
):
    """Twenty tables whose shufflers all riffle seven times (a firmware's weakness): one table's
    own watch needs a median of about 80 deals; the pool finds it in a few deals a table and
    says the model, naming the tables with their shares."""
    fw = _floor(20)
    scs = [scenario("riffles_7") for _ in range(20)]
    rng = random.Random(7)
    found: list[PooledFinding] = []
    n = 0
    while not found and n < 40:
        n += 1
        for t in range(20):
            found += fw.observe(
                f"T{t}", next_observation(scs[t], rng), T0 + timedelta(seconds=n * 20 + t)
            )
            if found:
                break
    assert found, "the pool found nothing in 40 deals a table"
    assert n <= 12, n  # a table alone: median 82
    f = found[0]
    assert f.pool.kind == "model" and f.finding.test == "riffles"
    assert f.attribution.verdict == "model"
    assert f.attribution.others_llr >= ATTRIBUTION_NATS
    assert len([s for s in f.attribution.shares if s.llr > 0]) >= 10
    assert "the model" in f.advice and "send the maker the finding" in f.advice
    assert json.loads(json.dumps(f.to_dict()))["attribution"]["verdict"] == "model"


def test_one_weak_table_among_fair_ones_is_named_not_its_model() -> None:
    """An RNG box that draws 3 at 2.5/7 at one table of twenty: the pool's finding names that
    table, since its model-mates' evidence says they are fair (heterogeneity)."""
    fw = _floor(20)
    fair = [scenario("fair") for _ in range(20)]
    rng = random.Random(11)
    weak = 7
    found: list[PooledFinding] = []
    n = 0
    while not found and n < 3000:
        n += 1
        for t in range(20):
            obs = next_observation(fair[t], rng)
            if t == weak:  # its box draws 3 far too often
                draw = 3 if rng.random() < 2.5 / 7 else rng.choice([1, 2, 4, 5, 6, 7])
                obs = type(obs)(obs.round_id, obs.packets, obs.stub, obs.positions, "rng", draw)
            else:
                obs = type(obs)(obs.round_id, obs.packets, obs.stub, obs.positions, "rng",
                                rng.randint(1, 7))  # fmt: skip
            found += [f for f in fw.observe(f"T{t}", obs, T0 + timedelta(seconds=n * 20 + t))
                      if f.pool.role == "position"]  # fmt: skip
    assert found
    f = found[0]
    assert f.attribution.verdict == "table" and f.attribution.table == f"T{weak}"
    assert f.attribution.others_llr <= -ATTRIBUTION_NATS
    assert "alone" in f.advice


def test_a_table_that_fabricates_weak_rounds_gets_itself_named_not_a_model() -> None:
    """An adversary with one table's key publishes deals in which the joker always lands in
    packet 3, to have a model pulled from the floor: the finding names that table."""
    fw = _floor(10)
    fair = [scenario("fair") for _ in range(10)]
    rng = random.Random(5)
    found = []
    for n in range(400):
        for t in range(10):
            obs = next_observation(fair[t], rng)
            if t == 4:  # the forger puts the joker first in packet 3, every deal
                packets, stub = [list(p) for p in obs.packets], list(obs.stub)
                where = next(((k, j) for k, p in enumerate(packets) for j, c in enumerate(p)
                              if c == JOKER_CODE), None)  # fmt: skip
                if where is None:  # from the stub
                    stub[stub.index(JOKER_CODE)] = packets[2][0]
                    packets[2][0] = JOKER_CODE
                elif where[0] != 2:
                    k, j = where
                    packets[k][j], packets[2][0] = packets[2][0], JOKER_CODE
                obs = type(obs)(obs.round_id, tuple(map(tuple, packets)), tuple(sorted(stub)),
                                obs.positions, obs.draw_method, obs.number, obs.dice)  # fmt: skip
            found += fw.observe(f"T{t}", obs, T0 + timedelta(seconds=n * 10 + t))
        if found:
            break
    assert found
    assert found[0].attribution.verdict in ("table", "undecided")
    assert found[0].attribution.table == "T4"


def test_the_balance_of_evidence_decides() -> None:
    lead = Share("T1", 25.0, 300)
    assert (
        decide("model", [lead, Share("T2", -2.0, 300), Share("T3", -2.0, 300)]).verdict == "table"
    )
    assert decide("model", [lead, Share("T2", 2.0, 300), Share("T3", 2.0, 300)]).verdict == "model"
    assert decide("model", [lead, Share("T2", 1.0, 300)]).verdict == "undecided"
    assert decide("serial", [lead, Share("T2", -9.0, 30)]).verdict == "device"
    assert decide("model", [lead]).verdict == "table"  # a pool of one table
    assert decide("model", [lead], members=3).verdict == "undecided"  # the others unheard


def test_a_serial_pool_exists_once_a_device_has_moved() -> None:
    fw = _floor(2)
    rng = random.Random(2)
    sc = scenario("fair")
    fw.observe("T0", next_observation(sc, rng), T0)
    assert sorted(fw.pools) == ["model:cards:Acme|MDX-2|4.1", "model:position:Acme|RNG-7|1.0"]
    # T0's shuffler is moved to T1 (a swap): its serial now has a pool of its own.
    fw.identify("T1", "cards", "Acme", "MDX-2", "4.1", "S0")
    fw.observe("T1", next_observation(sc, rng), T0)
    assert "serial:cards:Acme|MDX-2|4.1|S0" in fw.pools
    # A device the table did not name (no model) is not pooled.
    fw.identify("T9", "cards", None, None, None, None)
    assert fw.keys_for("T9", "cards") == []
    assert PoolKey.from_id("serial:cards:Acme|MDX-2|4.1|S0").serial == "S0"
    with pytest.raises(ValueError):
        PoolKey.from_id("brand:cards:x")


def test_the_state_carries_on_exactly_and_an_alarm_is_not_raised_twice() -> None:
    """Saved mid-way and restored: the same findings on the same rounds as a floor that never
    stopped; and a test that alarmed before the save does not alarm again after it."""
    rounds = []
    rng = random.Random(9)
    scs = [scenario("riffles_6") for _ in range(5)]
    for n in range(12):
        for t in range(5):
            rounds.append(
                (f"T{t}", next_observation(scs[t], rng), T0 + timedelta(seconds=n * 5 + t))
            )

    def run(split: int | None) -> list[tuple[str, str, str | None]]:
        fw = _floor(5)
        out = []
        for i, (t, obs, at) in enumerate(rounds):
            if i == split:
                saved = json.loads(json.dumps(fw.to_state()))
                fw = _floor(5)
                fw.load(saved)
            out += [
                (f.pool.id, f.finding.test, f.attribution.table) for f in fw.observe(t, obs, at)
            ]
        return out

    whole = run(None)
    assert whole
    assert run(30) == whole
    assert run(len(rounds) - 1) == whole  # restored after the finding: raised once only
    with pytest.raises(ValueError):
        FloorWatch().load({"version": 99})


def test_an_acknowledged_finding_restarts_the_test() -> None:
    fw = _floor(3)
    scs = [scenario("one_riffle") for _ in range(3)]
    rng = random.Random(4)
    found = []
    for n in range(5):
        for t in range(3):
            found += fw.observe(f"T{t}", next_observation(scs[t], rng), T0 + timedelta(seconds=n))
    assert found
    pool = found[0].pool.id
    test = found[0].finding.test
    states = {s.name: s for s in fw.pools[pool].watch.states()}
    assert states[test].alarmed_since is not None
    fw.reset(pool, test, T0)
    states = {s.name: s for s in fw.pools[pool].watch.states()}
    assert states[test].alarmed_since is None and states[test].rounds == 0
    view = fw.view()
    assert {v["pool"] for v in view} == set(fw.pools)
    assert view[0]["tests"][0]["threshold"] > 0


def test_the_table_watch_is_unchanged_by_the_shared_history() -> None:
    """``Watch.observe`` with its own history (a table) gives what it gave before the history
    could be passed in: the same findings as one given its history explicitly."""
    rng1, rng2 = random.Random(6), random.Random(6)
    a, b = Watch(ProtectionConfig()), Watch(ProtectionConfig())
    s1, s2 = scenario("riffles_5"), scenario("riffles_5")
    for n in range(15):
        fa = a.observe(next_observation(s1, rng1), T0 + timedelta(minutes=n))
        fb = b.observe(next_observation(s2, rng2), T0 + timedelta(minutes=n), b.history)
        assert [f.to_dict() for f in fa] == [f.to_dict() for f in fb]


def test_a_round_the_alternative_rules_out_never_makes_a_share_no_number() -> None:
    """Found on a loose budget: a pooled "4 riffles" finding raised by one table's single deal,
    its model-mates' latest deals ruled out by that alternative (a ratio of 0: −∞ nats). Each
    share is a sum of its own rounds' increments (never −∞ − −∞), the leader keeps its own
    window, and the verdict names it; the finding is valid JSON."""
    fw = FloorWatch(budget=FloorBudget(false_alarms_per_year=1e5, tables=4))
    names = [f"T{t}" for t in range(4)]
    scs = [scenario("stacked_aces" if t == 1 else "fair") for t in range(4)]
    rngs = [random.Random(f"1 {t}") for t in range(4)]
    for name in names:
        fw.identify(name, "cards", "Acme", "Riffler 9", "2.1", "C-" + name)
    checked = 0
    for n in range(1, 1200):
        t = (n - 1) % 4
        at = T0 + timedelta(seconds=n)
        for pf in fw.observe(names[t], next_observation(scs[t], rngs[t]), at):
            shares = pf.attribution.shares
            assert not any(math.isnan(s.llr) for s in shares)
            assert not math.isnan(pf.attribution.others_llr)
            if pf.finding.test == "riffles":
                lead = shares[0]
                assert lead.llr > 0 and pf.attribution.table == lead.table
                checked += 1
            json.dumps(pf.to_dict(), allow_nan=False)
            fw.reset(pf.pool.id, pf.finding.test, at)
    assert checked >= 1


def test_a_deal_remembered_from_before_is_compared_with_not_counted() -> None:
    """A floor that runs already: a table's last deal before the pools saw it is remembered,
    and a shuffler that riffles it once is caught on the very next deal."""
    fw = _floor(1)
    sc, rng = scenario("one_riffle"), random.Random(8)
    fw.remember("T0", next_observation(sc, rng))
    pool = fw.pools["model:cards:Acme|MDX-2|4.1"]
    assert pool.watch.rounds == 0 and len(pool.members["T0"].recent) == 1
    found = fw.observe("T0", next_observation(sc, rng), T0)
    assert found and found[0].finding.rounds_seen == 1


def test_device_names_with_the_ids_separators_keep_their_pools_across_a_restart() -> None:
    """A table may name its devices with any printable ASCII (its config, its signed feed): a
    model called ``X|Y:Z`` or a firmware ``1%2|3`` must neither split a pool's id nor stop the
    saved state from loading (which would start the floor's evidence afresh)."""
    fw = FloorWatch(FloorBudget(tables=2))
    for t, serial in (("T0", "s|1"), ("T1", "s|1")):  # one device, moved: a serial pool too
        fw.identify(t, "cards", "A:B", "X|Y:Z", "1%2|3", serial)
    sc, rng = scenario("fair"), random.Random(1)
    for t in ("T0", "T1"):
        fw.observe(t, next_observation(sc, rng), T0)
    ids = sorted(fw.pools)
    assert len(ids) == 2 and all(PoolKey.from_id(i).model == "X|Y:Z" for i in ids)
    assert PoolKey.from_id(ids[1]).serial == "s|1" and PoolKey.from_id(ids[1]).firmware == "1%2|3"
    again = FloorWatch(FloorBudget(tables=2))
    again.load(json.loads(json.dumps(fw.to_state())))
    assert sorted(again.pools) == ids
    assert {p.watch.rounds for p in again.pools.values()} == {2}
