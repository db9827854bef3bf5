"""The table's fail-closed rules, pure (docs/faults.md): a replayed deal is refused, the state
rolls back exactly, the fault state tallies what it could not apply and its recovery voids it."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.messages import SetWagers, Wagers
from controller.table import (
    AlarmRaised,
    DealRecorded,
    FaultCleared,
    JournalRecovered,
    NoiseSummary,
    RoundOpened,
    StatusChanged,
    Table,
)
from drivers.events import DealStarted, DeviceOffline, PacketDealt
from tests.table.test_machine import closed, make_table, packet_events, rng, run, shuffled


def _deal(table: Table, seed: int, shuffle_id: str | None = None, first: int = 3) -> list:  # type: ignore[type-arg]
    return run(table, [rng(first), *packet_events(shuffled(seed), shuffle_id=shuffle_id)])


def test_the_same_cards_again_are_refused_as_a_replayed_deal() -> None:
    table, _ = make_table()
    [first] = closed(_deal(table, 7, shuffle_id="A"))
    assert first.payload.status == "settled"
    effects = _deal(table, 7, shuffle_id="B")  # a new id, the very same order of cards
    [again] = closed(effects)
    assert again.payload.status == "dead"
    assert [r.code for r in again.payload.reasons] == ["replayed_deal"]
    [alarm] = [e for e in effects if isinstance(e, AlarmRaised)]
    assert alarm.payload.code == "deck_integrity" and alarm.payload.severity == "critical"
    assert f"round #{first.payload.round_seq}" in alarm.payload.detail


def test_a_repeated_shuffle_id_is_refused_even_with_other_cards() -> None:
    table, _ = make_table()
    assert closed(_deal(table, 1, shuffle_id="SH-9"))[0].payload.status == "settled"
    [again] = closed(_deal(table, 2, shuffle_id="SH-9"))
    assert again.payload.status == "dead" and "SH-9" in again.payload.reasons[0].detail


def test_a_replay_is_refused_across_a_restart_from_the_journaled_deals() -> None:
    table, clock = make_table()
    effects = _deal(table, 5, shuffle_id="X1")
    [recorded] = [e for e in effects if isinstance(e, DealRecorded)]
    restarted = Table(  # as the wiring builds it at a start, from the journal's deals
        table.settings,
        new_round_id=lambda: "PG-01-after",
        clock=clock,
        recent_deals=[(1, recorded.shuffle_id, recorded.fingerprint)],
    )
    [again] = closed(_deal(restarted, 5, shuffle_id="X2"))
    assert again.payload.status == "dead" and "round #1" in again.payload.reasons[0].detail


def test_different_shoes_without_shuffle_ids_are_not_confused() -> None:
    table, _ = make_table()
    outcomes = [closed(_deal(table, seed, shuffle_id=""))[0].payload.status for seed in range(20)]
    assert outcomes == ["settled"] * 20


@settings(max_examples=40, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10), seed=st.integers(0, 10_000))
def test_restore_undoes_any_event_exactly(cut: int, seed: int) -> None:
    table, clock = make_table()
    run(table, [SetWagers(seat="1", wagers=Wagers(pai_gow=10, chan_chu=5))])
    events = [rng(2), *packet_events(shuffled(seed))]
    run(table, events[:cut])
    before = table.snapshot()
    status_before = table.status().model_dump()
    round_before = repr(table.round)
    clock.now += timedelta(seconds=1)
    table.handle(events[cut] if cut < len(events) else DealStarted(device="s", shuffle_id="n"))
    table.restore(before)
    assert table.status().model_dump() == status_before
    assert repr(table.round) == round_before
    # And the restored table goes on exactly as if the event had never come.
    rest = run(table, events[cut:])
    if cut < 10:
        assert closed(rest)[-1].payload.status == "settled"


def test_the_fault_tallies_and_its_recovery_voids_every_deal_seen() -> None:
    table, clock = make_table()
    deck = shuffled(11)
    events = [rng(4), *packet_events(deck, shuffle_id="MID")]
    run(table, events[:4])  # a deal under way when the journal fails
    mid_round = table.round
    assert mid_round is not None
    entered = table.enter_fault("database or disk is full", clock.now)
    assert {type(e) for e in entered} == {AlarmRaised, StatusChanged}
    assert table.status().state == "fault" and not table.enter_fault("again", clock.now)
    for e in events[4:]:
        table.lost(e)
    for e in packet_events(shuffled(12), shuffle_id="LOST"):
        table.lost(e)
    table.lost(DeviceOffline(device="rng", reason="unplugged"))
    assert table.fault is not None and table.fault.deals == ["LOST"]
    lost = table.fault.events_lost
    clock.now += timedelta(seconds=30)
    effects = table.handle(JournalRecovered(clock.now))
    voided = [e.payload for e in closed(effects)]
    assert voided[0].round_id == mid_round.round_id
    assert [p.shuffle_id for p in voided] == ["MID", "LOST"]
    assert all(p.status == "void" and p.reasons[0].code == "journal_fault" for p in voided)
    assert sum(isinstance(e, RoundOpened) for e in effects) == 1
    [record] = [e.record for e in effects if isinstance(e, FaultCleared)]
    assert record["events_lost"] == lost and record["rounds_voided"] == [p.round_id for p in voided]
    assert table.devices["rng"] is False  # the device change seen meanwhile is applied
    assert table.status().state == "online" and table.fault is None
    # The next deal settles as usual.
    assert closed(_deal(table, 13))[0].payload.status == "settled"


def test_a_noise_summary_is_one_alarm_with_the_counts() -> None:
    table, clock = make_table()
    summary = NoiseSummary(
        device="shuffler",
        since=clock.now,
        until=clock.now + timedelta(seconds=60),
        frame_errors=51_199,
    )
    [alarm] = table.handle(summary)
    assert isinstance(alarm, AlarmRaised) and alarm.payload.code == "frame_error"
    assert "51199 more frame errors" in alarm.payload.detail and "60 s" in alarm.payload.detail
    flood = NoiseSummary(
        device="rng",
        since=clock.now,
        until=clock.now + timedelta(seconds=60),
        dropped=900,
        dropped_kinds=(("packet_dealt", 900),),
    )
    [alarm, status] = table.handle(flood)
    assert isinstance(alarm, AlarmRaised)
    assert alarm.payload.code == "device_flood" and alarm.payload.severity == "critical"
    # A critical alarm is latched until acknowledged: the retained status lists it.
    assert alarm.payload.ack_required and isinstance(status, StatusChanged)
    assert [a.alarm_id for a in status.payload.alarms_unacknowledged] == [alarm.payload.alarm_id]


def test_packets_of_a_flood_never_settle_a_round_by_themselves() -> None:
    table, _ = make_table()
    effects = run(table, [PacketDealt(device="s", index=i, cards=()) for i in range(3)])
    assert not closed(effects)
