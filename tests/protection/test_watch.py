"""The Watch: findings, reset, panel states, persistence, and the observation from a round."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.game.cards import DECK
from controller.protection import (
    DealObservation,
    ProtectionConfig,
    Watch,
    observation_from_round,
)
from controller.protection.checks import CHECKS
from controller.protection.watch import ALL_CHECKS
from simulators.biased import BIASED, next_observation, scenario
from tests.table.test_machine import closed, make_table, packet_events, rng, run, shuffled

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)


def stream(name: str, seed: int, rounds: int) -> list[DealObservation]:
    sc, r = scenario(name), random.Random(seed)
    return [next_observation(sc, r) for _ in range(rounds)]


def run_watch(watch: Watch, observations: list[DealObservation], start: int = 0) -> list[str]:
    found: list[str] = []
    for n, obs in enumerate(observations, start=start):
        found += [f.test for f in watch.observe(obs, T0 + timedelta(minutes=n))]
    return found


def test_config_errors_name_the_setting() -> None:
    with pytest.raises(ValueError, match="false_alarms_per_year"):
        ProtectionConfig(false_alarms_per_year=0)
    with pytest.raises(ValueError, match="rounds_per_year"):
        ProtectionConfig(rounds_per_year=0)
    with pytest.raises(ValueError, match="recent_deals"):
        ProtectionConfig(recent_deals=0)
    with pytest.raises(ValueError, match="below rounds_per_year"):
        ProtectionConfig(false_alarms_per_year=10, rounds_per_year=10)


def _sizes() -> dict[str, int]:
    """Each test's number of CUSUMs (a test's own, as it is made)."""
    return {check.name: check.size for check in (make() for make in ALL_CHECKS)}


def test_thresholds_share_the_yearly_false_alarms() -> None:
    thresholds = {state.name: state.threshold for state in Watch().states()}
    sizes = _sizes()
    assert list(thresholds) == list(sizes)
    rate = ProtectionConfig().false_alarm_rate
    total = sum(sizes[name] * pow(2.718281828459045, -t) for name, t in thresholds.items())
    assert total == pytest.approx(rate, rel=1e-9)


def test_a_few_tests_keep_the_thresholds_of_the_whole_watch() -> None:
    whole = {state.name: state.threshold for state in Watch().states()}
    few = Watch(checks=ALL_CHECKS[:2], shares=len(ALL_CHECKS)).states()
    assert [(s.name, s.threshold) for s in few] == [(s.name, whole[s.name]) for s in few]
    alone = Watch(checks=ALL_CHECKS[:2]).states()  # the budget shared by two: lower thresholds
    assert all(s.threshold < whole[s.name] for s in alone)


def test_observation_errors_name_the_fault() -> None:
    good = stream("fair", 1, 1)[0]
    with pytest.raises(ValueError, match="7 packets of 7"):
        DealObservation("r", good.packets[:6], good.stub, good.positions)
    with pytest.raises(ValueError, match="whole 53-card deck"):
        DealObservation("r", good.packets, (0, 1, 2, 3), good.positions)
    with pytest.raises(ValueError, match="positions"):
        DealObservation("r", good.packets, good.stub, (1, 1, 2, 3, 4, 5, 6))
    with pytest.raises(ValueError, match="dice"):
        DealObservation("r", good.packets, good.stub, good.positions, "dice", None, (0, 1, 2))


def test_observation_from_a_settled_round_of_the_real_table() -> None:
    table, _ = make_table()
    deck = shuffled(11)
    payload = closed(run(table, [rng(3), *packet_events(deck)]))[0].payload
    obs = observation_from_round(payload)
    assert obs is not None
    codes = [int(c) for c in DECK]
    by_text = {str(DECK[c]): c for c in codes}
    assert obs.packets == tuple(
        tuple(by_text[t] for t in deck[7 * i : 7 * i + 7]) for i in range(7)
    )
    assert obs.stub == tuple(sorted(by_text[t] for t in deck[49:]))
    assert obs.positions == (3, 4, 5, 6, 7, 1, 2)
    assert (obs.draw_method, obs.number, obs.dice) == ("rng", 3, None)
    assert observation_from_round(payload.model_copy(update={"status": "dead"})) is None
    assert (
        observation_from_round(payload.model_copy(update={"positions": payload.positions[:6]}))
        is None
    )


@pytest.mark.parametrize(
    ("name", "test", "within"),
    [
        ("rng_favours_3", "rng_number|rng_bias", 2500),
        ("loaded_die", "dice_face|dice_bias", 4000),
        ("stacked_joker", "card_packet", 700),
        ("stacked_aces", "rank_packet", 300),
        ("repeat_order", "repeat_order", 20),
        ("one_riffle", "rising_sequences", 2),
        ("riffles_4", "riffles", 10),
        ("riffles_5", "riffles", 25),
        ("riffles_6", "riffles", 80),
        ("two_decks_3", "riffles", 5),
        ("shelf_10", "shelf_shuffler", 10),
        ("kept_together_03", "kept_together", 5),
        ("pickup_riffles_3", "pickup_order", 600),
        ("joker_to_seat", "card_seat", 150),
    ],
)
def test_each_biased_device_is_caught(name: str, test: str, within: int) -> None:
    watch = Watch()
    sc, r = scenario(name), random.Random(7)
    for n in range(1, within + 1):
        findings = watch.observe(next_observation(sc, r), T0 + timedelta(minutes=n))
        if findings:
            break
    fired = [f.test for f in findings]
    assert set(test.split("|")) & set(fired), (name, n, findings)
    finding = next(f for f in findings if f.test in test.split("|"))
    assert finding.statistic >= finding.threshold
    # The bound at the threshold: rounds seen times the test's share of the false-alarm rate.
    assert 0.0 <= finding.p_value <= finding.rounds_seen * ProtectionConfig().false_alarm_rate
    assert finding.since is not None and finding.since <= finding.at
    assert finding.advice and finding.severity in ("warning", "critical")
    json.dumps(finding.to_dict())


@pytest.mark.slow  # 20,000 rounds through every check: half a minute
def test_fair_devices_raise_no_alarm_in_20000_rounds() -> None:
    watch = Watch()
    sc, r = scenario("fair"), random.Random(2026)
    for n in range(20_000):
        assert watch.observe(next_observation(sc, r), T0) == [], n


def test_an_alarmed_test_alarms_again_only_after_reset() -> None:
    watch = Watch()
    observations = stream("repeat_order", 3, 200)
    found = run_watch(watch, observations)
    assert found.count("repeat_order") == 1
    watch.reset("repeat_order", T0)
    state = next(s for s in watch.states() if s.name == "repeat_order")
    assert (state.rounds, state.alarmed_since, state.reset_at) == (0, None, T0)
    assert run_watch(watch, stream("repeat_order", 4, 40)).count("repeat_order") == 1
    with pytest.raises(ValueError, match="no protection test 'nope'"):
        watch.reset("nope", T0)


def test_states_for_the_panel() -> None:
    watch = Watch(ProtectionConfig(chart_every=5, chart_points=10))
    run_watch(watch, stream("stacked_joker", 5, 400))
    states = {s.name: s for s in watch.states()}
    assert list(states) == watch.names and len(states) == 22
    joker = states["card_packet"]
    assert joker.alarmed_since is not None and joker.worst == "JK to packet 3 too often"
    assert len(joker.history) == 10 and joker.history[-1][0] == 400
    assert [c.label for c in joker.cells][2] == "JK packet 3"
    assert sum(c.observed for c in joker.cells) == 400
    assert sum(c.expected for c in joker.cells) == pytest.approx(400)
    assert states["rng_number"].rounds == 200
    json.dumps([s.to_dict() for s in states.values()])


@settings(max_examples=15, deadline=None)
@given(
    name=st.sampled_from(sorted(BIASED)),
    seed=st.integers(0, 2**32 - 1),
    rounds=st.integers(1, 60),
)
def test_p_values_statistics_and_expectations_are_sane(name: str, seed: int, rounds: int) -> None:
    watch = Watch()
    run_watch(watch, stream(name, seed, rounds))
    for s in watch.states():
        assert 0.0 <= s.p_value <= 1.0
        assert s.statistic >= 0.0 and s.threshold > 0.0
        assert all(c.expected >= 0 and c.observed >= 0 for c in s.cells)


@settings(max_examples=10, deadline=None)
@given(
    name=st.sampled_from(sorted(BIASED)),
    seed=st.integers(0, 2**32 - 1),
    before=st.integers(0, 80),
)
def test_state_round_trips_and_carries_on_alike(name: str, seed: int, before: int) -> None:
    observations = stream(name, seed, before + 40)
    watch = Watch()
    run_watch(watch, observations[:before])
    state = json.loads(json.dumps(watch.to_state()))
    restored = Watch.from_state(state)
    assert restored.to_state() == watch.to_state()
    assert run_watch(restored, observations[before:], before) == run_watch(
        watch, observations[before:], before
    )
    assert [s.to_dict() for s in restored.states()] == [s.to_dict() for s in watch.states()]


def test_a_bad_state_is_refused() -> None:
    with pytest.raises(ValueError, match="version"):
        Watch.from_state({"version": 99})
    state = Watch().to_state()
    state["tests"]["nope"] = {"rounds": 0}
    with pytest.raises(ValueError, match="unknown test 'nope'"):
        Watch.from_state(state)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "test", "within"),
    [("rng_7_at_1_2", "rng_bias", 20_000), ("die_6_at_019", "dice_bias", 20_000)],
)
def test_mild_draw_biases_are_caught(name: str, test: str, within: int) -> None:
    watch = Watch()
    sc, r = scenario(name), random.Random(11)
    for n in range(1, within + 1):
        findings = watch.observe(next_observation(sc, r), T0 + timedelta(minutes=n))
        if findings:
            break
    assert [f.test for f in findings] == [test], (name, n)


def test_findings_name_the_reference_the_alternative_and_the_evidence() -> None:
    watch = Watch()
    sc, r = scenario("riffles_4"), random.Random(12)
    findings = []
    for n in range(1, 20):
        findings = watch.observe(next_observation(sc, r), T0 + timedelta(minutes=n))
        if findings:
            break
    (f,) = findings
    assert f.test == "riffles" and f.reference == "the previous deal"
    assert f.alternative.endswith("riffles") and "rising sequences among" in f.evidence
    data = f.to_dict()
    assert {"reference", "alternative", "evidence"} <= set(data)
    state = next(s for s in watch.states() if s.name == "riffles")
    assert state.to_dict()["reference"] == "the previous deal" and state.evidence


def test_a_state_saved_before_issue_24_loads_and_the_new_tests_start_afresh() -> None:
    watch = Watch()
    run_watch(watch, stream("fair", 13, 30))
    state = json.loads(json.dumps(watch.to_state()))
    old_names = set(Watch(checks=CHECKS).names)
    state["tests"] = {k: v for k, v in state["tests"].items() if k in old_names}
    restored = Watch.from_state(state)
    fresh = {s.name: s for s in restored.states()}
    assert fresh["riffles"].rounds == 0 and fresh["card_packet"].rounds == 30
    assert run_watch(restored, stream("fair", 14, 5), 30) == []


def test_every_cusum_shares_the_budget_even_the_new_banks() -> None:
    sizes = _sizes()
    assert Watch().names == list(sizes)
    assert sizes["riffles"] == 40 and sizes["shelf_shuffler"] == 40
    assert sizes["card_seat"] == 53 * 8 * 2 and sizes["rng_bias"] == 35
