"""Who did what, in the pure table (issue 14, docs/audit.md): latched critical alarms and their
acknowledgement, dealer sign-in and rotations, a player's setting entered twice (a correction:
only with a supervisor and a reason, alarmed, and limited a round and an hour), a void naming
its supervisor, and commands refused before the table (alarmed once a source keeps failing)."""

from __future__ import annotations

from datetime import timedelta
from typing import TypedDict, Unpack

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.messages import (
    AcknowledgeAlarm,
    PlayerSetting,
    RoundPayload,
    SeatOut,
    SignIn,
    SignOut,
    VoidRound,
)
from controller.table import (
    AlarmAcknowledged,
    AlarmRaised,
    CommandReply,
    NoiseSummary,
    PlayerSettled,
    Refusal,
    StatusChanged,
    Table,
)
from controller.table.machine import REFUSAL_WINDOW
from drivers.events import DeviceFault
from tests.table.test_machine import Clock, closed, make_table, packet_events, rng, run, shuffled


def _critical(table: Table, clock: Clock) -> AlarmRaised:
    flood = NoiseSummary(
        device="shuffler",
        since=clock.now,
        until=clock.now + timedelta(seconds=60),
        dropped=900,
        dropped_kinds=(("packet_dealt", 900),),
    )
    [alarm] = [e for e in table.handle(flood) if isinstance(e, AlarmRaised)]
    return alarm


def _reply(effects: list) -> CommandReply:  # type: ignore[type-arg]
    [reply] = [e for e in effects if isinstance(e, CommandReply)]
    return reply


def test_a_critical_alarm_is_latched_until_a_named_person_acknowledges_it() -> None:
    table, clock = make_table()
    alarm = _critical(table, clock)
    assert alarm.payload.ack_required and alarm.payload.raised_at == clock.now
    assert [a.alarm_id for a in table.status().alarms_unacknowledged] == [alarm.payload.alarm_id]
    clock.now += timedelta(minutes=3)
    ack = AcknowledgeAlarm(alarm_id=alarm.payload.alarm_id, by="S-0042", note="swapped cable")
    effects = table.handle(ack, ("kiosk", "127.0.0.1"))
    assert _reply(effects).ok
    [acknowledged] = [e for e in effects if isinstance(e, AlarmAcknowledged)]
    p = acknowledged.payload
    assert (p.by, p.channel, p.identity, p.note) == (
        "S-0042",
        "kiosk",
        "127.0.0.1",
        "swapped cable",
    )
    assert p.acknowledged_at == clock.now and p.raised_at == alarm.payload.raised_at
    assert p.code == "device_flood"
    [status] = [e for e in effects if isinstance(e, StatusChanged)]
    assert status.payload.alarms_unacknowledged == []
    # Twice, or an id nobody raised: refused, nothing changes.
    again = _reply(table.handle(ack))
    assert not again.ok and "no unacknowledged alarm" in (again.error or "")


def test_warnings_are_not_latched() -> None:
    table, _ = make_table()
    effects = table.handle(DeviceFault(device="shuffler", code="jam", detail="card jam"))
    [warning] = [e for e in effects if isinstance(e, AlarmRaised)]
    assert warning.payload.severity == "warning" and not warning.payload.ack_required
    assert warning.payload.alarm_id and table.status().alarms_unacknowledged == []
    assert not any(isinstance(e, StatusChanged) for e in effects)


def test_latched_alarms_survive_a_restart_through_restore() -> None:
    table, clock = make_table()
    alarm = _critical(table, clock)
    fresh, _ = make_table()
    fresh.restore_latched(table.status().alarms_unacknowledged)
    assert fresh.latched == {alarm.payload.alarm_id: alarm.payload}
    assert _reply(fresh.handle(AcknowledgeAlarm(alarm_id=alarm.payload.alarm_id, by="x"))).ok


def test_a_journal_refusal_rolls_back_the_latch() -> None:
    table, clock = make_table()
    snapshot = table.snapshot()
    _critical(table, clock)
    table.restore(snapshot)
    assert table.latched == {}


def test_every_round_records_who_dealt_and_a_rotation_is_said() -> None:
    table, _ = make_table()
    first = _reply(table.handle(SignIn(dealer_id="D-17")))
    assert first.ok and first.data == {"dealer_id": "D-17", "replaces": None, "rotation": False}
    [r1] = closed(run(table, [rng(1), *packet_events(shuffled(1))]))
    assert r1.payload.dealer_id == "D-17"
    rotation = _reply(table.handle(SignIn(dealer_id="D-23")))
    assert rotation.data == {"dealer_id": "D-23", "replaces": "D-17", "rotation": True}
    assert table.status().dealer_id == "D-23"
    [r2] = closed(run(table, [rng(2), *packet_events(shuffled(2))]))
    assert r2.payload.dealer_id == "D-23"
    assert _reply(table.handle(SignOut())).data == {"dealer_id": "D-23"}
    [r3] = closed(run(table, [rng(3), *packet_events(shuffled(3))]))
    assert r3.payload.dealer_id is None
    assert not _reply(table.handle(SignOut())).ok


def _settled(table: Table, seed: int = 4) -> RoundPayload:
    [result] = closed(run(table, [rng(seed % 7 + 1), *packet_events(shuffled(seed))]))
    return result.payload


class _Correction(TypedDict, total=False):
    """What a correction adds to a setting: the supervisor who allows it and why."""

    by: str
    reason: str


def _correct(seat: SeatOut, **fields: Unpack[_Correction]) -> PlayerSetting:
    """Seat ``seat``'s setting entered again (front: its first two cards)."""
    return PlayerSetting(seat=seat.seat, front=(seat.cards[0], seat.cards[1]), **fields)


def test_a_setting_entered_again_is_a_correction_of_the_earlier_one() -> None:
    table, _ = make_table()
    table.handle(SignIn(dealer_id="D-17"))
    result = _settled(table)
    round_id = result.round_id
    seat = result.seats[0]
    first = [e for e in table.handle(PlayerSetting(seat=seat.seat, house_way=True))]
    [p1] = [e.payload for e in first if isinstance(e, PlayerSettled)]
    assert p1.setting_id == f"{round_id}/{seat.seat}/1" and p1.corrects is None
    assert p1.dealer_id == "D-17" and p1.by is None
    assert not any(isinstance(e, AlarmRaised) for e in first)  # a first entry alarms nobody
    # Entered again: a correction, which needs a supervisor and a reason (docs/audit.md).
    second = table.handle(_correct(seat, by="S-0042", reason="keyed the wrong cards"))
    [p2] = [e.payload for e in second if isinstance(e, PlayerSettled)]
    assert p2.setting_id == f"{round_id}/{seat.seat}/2" and p2.corrects == p1.setting_id
    assert (p2.by, p2.reason) == ("S-0042", "keyed the wrong cards")
    third = table.handle(
        PlayerSetting(seat=seat.seat, house_way=True, by="S-0042", reason="asked for House Way")
    )
    [p3] = [e.payload for e in third if isinstance(e, PlayerSettled)]
    assert p3.corrects == p2.setting_id
    # Another seat's first entry is no correction.
    other = result.seats[1]
    [q] = [
        e.payload
        for e in table.handle(PlayerSetting(seat=other.seat, house_way=True))
        if isinstance(e, PlayerSettled)
    ]
    assert q.corrects is None and q.setting_id.endswith("/1")


def test_a_correction_without_a_supervisor_or_a_reason_is_refused() -> None:
    """The outside audit: a correction needed no PIN and no reason, and raised nothing."""
    table, _ = make_table()
    seat = _settled(table).seats[0]
    entered = table.handle(PlayerSetting(seat=seat.seat, house_way=True))
    [first] = [e.payload for e in entered if isinstance(e, PlayerSettled)]
    # The attack as the audit sent it: the seat's setting simply entered again.
    attack = table.handle(_correct(seat))
    assert not _reply(attack).ok and not any(isinstance(e, PlayerSettled) for e in attack)
    for attempt, why in (
        (_correct(seat), "a correction needs a supervisor (badge and PIN) and a reason"),
        (_correct(seat, reason="keyed wrong"), "a correction needs a supervisor"),
        (_correct(seat, by="S-0042"), "needs a reason"),
        (_correct(seat, by="S-0042", reason="   "), "needs a reason"),
    ):
        effects = table.handle(attempt)
        reply = _reply(effects)
        assert not reply.ok and why in (reply.error or ""), reply.error
        assert effects == [reply]  # nothing settled, nothing else changed
    r = table.round
    assert r is not None and r.players[seat.seat] == first and r.corrections == 0


def test_a_correction_raises_a_warning_naming_the_supervisor() -> None:
    table, clock = make_table()
    result = _settled(table)
    seat = result.seats[0]
    table.handle(PlayerSetting(seat=seat.seat, house_way=True))
    effects = table.handle(_correct(seat, by="S-0042", reason="keyed the wrong cards"))
    assert _reply(effects).ok
    [alarm] = [e.payload for e in effects if isinstance(e, AlarmRaised)]
    assert (alarm.code, alarm.severity, alarm.by) == ("setting_corrected", "warning", "S-0042")
    assert alarm.round_id == result.round_id and alarm.raised_at == clock.now
    assert not alarm.ack_required and table.latched == {}  # seen on the supervisor page
    assert f"seat {seat.seat}'s setting in round #{result.round_seq}" in alarm.detail
    assert "corrected by S-0042: keyed the wrong cards" in alarm.detail


def test_corrections_are_limited_per_round() -> None:
    table, _ = make_table()
    table.limit_corrections(per_round=1, per_hour=10)
    seat = _settled(table).seats[0]
    table.handle(PlayerSetting(seat=seat.seat, house_way=True))
    assert _reply(table.handle(_correct(seat, by="S-0042", reason="wrong cards"))).ok
    effects = table.handle(_correct(seat, by="S-0042", reason="once more"))
    reply = _reply(effects)
    assert not reply.ok
    assert reply.error == (
        f"the correction of seat {seat.seat}'s setting is refused: round #1 has had 1 "
        "correction(s), the most [limits] corrections_per_round allows; the entry stands"
    )
    assert not any(isinstance(e, PlayerSettled) for e in effects)
    [alarm] = [e.payload for e in effects if isinstance(e, AlarmRaised)]
    assert (alarm.code, alarm.severity, alarm.by) == ("correction_refused", "warning", "S-0042")
    # The next round has its own count.
    seat = _settled(table, seed=5).seats[0]
    table.handle(PlayerSetting(seat=seat.seat, house_way=True))
    assert _reply(table.handle(_correct(seat, by="S-0042", reason="wrong cards"))).ok


def test_corrections_are_limited_per_hour_across_rounds() -> None:
    table, clock = make_table()
    table.limit_corrections(per_round=5, per_hour=2)
    for seed in (4, 5):
        seat = _settled(table, seed).seats[0]
        table.handle(PlayerSetting(seat=seat.seat, house_way=True))
        assert _reply(table.handle(_correct(seat, by="S-0042", reason="wrong"))).ok
        clock.now += timedelta(minutes=20)
    seat = _settled(table, 6).seats[0]
    table.handle(PlayerSetting(seat=seat.seat, house_way=True))
    refused = _reply(table.handle(_correct(seat, by="S-0042", reason="wrong")))
    assert not refused.ok and "2 correction(s) in the last hour at this table, the most " in (
        refused.error or ""
    )
    clock.now += timedelta(minutes=21)  # the first correction is now over an hour old
    assert _reply(table.handle(_correct(seat, by="S-0042", reason="wrong"))).ok


def test_no_corrections_at_all_when_the_limit_is_zero() -> None:
    table, _ = make_table()
    table.limit_corrections(per_round=0, per_hour=0)
    seat = _settled(table).seats[0]
    table.handle(PlayerSetting(seat=seat.seat, house_way=True))
    reply = _reply(table.handle(_correct(seat, by="S-0042", reason="wrong")))
    assert not reply.ok and "corrections are off at this table" in (reply.error or "")


def test_a_journal_refusal_rolls_back_the_correction_counts() -> None:
    table, _ = make_table()
    table.limit_corrections(per_round=1, per_hour=1)
    seat = _settled(table).seats[0]
    table.handle(PlayerSetting(seat=seat.seat, house_way=True))
    snapshot = table.snapshot()
    assert _reply(table.handle(_correct(seat, by="S-0042", reason="wrong"))).ok
    table.restore(snapshot)  # the journal refused the correction's writes
    assert _reply(table.handle(_correct(seat, by="S-0042", reason="wrong"))).ok


def test_a_void_names_the_supervisor_who_allowed_it() -> None:
    table, _ = make_table()
    result = _settled(table)
    effects = table.handle(VoidRound(reason="cards exposed", by="S-0042"))
    assert _reply(effects).ok
    [alarm] = [e.payload for e in effects if isinstance(e, AlarmRaised)]
    assert (alarm.code, alarm.by) == ("round_voided", "S-0042")
    assert f"round {result.round_id} voided by S-0042 after settlement" in alarm.detail


def _refusal(source: str, reason: str = "wrong_pin") -> Refusal:
    return Refusal("display", source, "void_round", reason, "wrong PIN")


def test_a_source_refused_n_times_raises_one_critical_alarm() -> None:
    table, clock = make_table()
    alarms = []
    for _ in range(10):
        alarms += [e for e in table.handle(_refusal("10.0.0.9")) if isinstance(e, AlarmRaised)]
        clock.now += timedelta(seconds=5)
    [alarm] = alarms
    p = alarm.payload
    assert p.code == "command_refused" and p.severity == "critical" and p.ack_required
    assert "3 void_round commands from display 10.0.0.9" in p.detail
    # A new window: a new alarm after N more.
    clock.now += REFUSAL_WINDOW
    again = [e for _ in range(3) for e in table.handle(_refusal("10.0.0.9"))]
    assert sum(isinstance(e, AlarmRaised) for e in again) == 1


def test_a_rate_summary_counts_as_many_refusals() -> None:
    table, _ = make_table()
    flood = Refusal("mqtt", "pg/PG-01/cmd/void_round", "void_round", "rate_limited", "over", 50)
    [alarm] = [e for e in table.handle(flood) if isinstance(e, AlarmRaised)]
    assert "50 void_round commands" in alarm.payload.detail


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(min_value=0, max_value=300)),
        max_size=60,
    )
)
def test_alarms_follow_the_count_per_source_and_window(steps: list[tuple[str, int]]) -> None:
    table, clock = make_table()
    expected = 0
    windows: dict[str, tuple[object, int]] = {}
    raised = 0
    for source, wait in steps:
        clock.now += timedelta(seconds=wait)
        first, count = windows.get(source, (clock.now, 0))
        if clock.now - first > REFUSAL_WINDOW:  # type: ignore[operator]
            first, count = clock.now, 0
        count += 1
        windows[source] = (first, count)
        expected += count == table.refusals_before_alarm
        raised += sum(isinstance(e, AlarmRaised) for e in table.handle(_refusal(source)))
    assert raised == expected


def test_dice_naming_another_round_are_refused_where_they_would_act() -> None:
    """The MQTT layer checks a signed enter_dice's round when it arrives; the table checks it
    again when it acts, so dice meant for a deal that just ended never reach the next one."""
    from controller.messages import EnterDice
    from drivers.events import DealStarted

    table, _ = make_table()
    table.handle(DealStarted(device="shuffler", shuffle_id="s-1"))
    dealing = table.round
    assert dealing is not None
    late = table.handle(EnterDice(dice=(1, 2, 3), round_id="PG-01-OLD"))
    reply = next(e for e in late if isinstance(e, CommandReply))
    assert not reply.ok and "nothing was changed" in (reply.error or "")
    assert table.round is dealing and dealing.draw is None
    between = table.handle(EnterDice(dice=(1, 2, 3), round_id=None))
    assert not next(e for e in between if isinstance(e, CommandReply)).ok
    right = table.handle(EnterDice(dice=(1, 2, 3), round_id=dealing.round_id))
    assert next(e for e in right if isinstance(e, CommandReply)).ok


def test_the_status_lists_at_most_fifty_latched_alarms_and_counts_them_all() -> None:
    """A burst of latched alarms (a flood adds one a minute) must not make every retained
    status message grow without bound: the oldest 50 are listed, all are counted."""
    from controller.table.machine import STATUS_ALARMS

    table, _ = make_table()
    for n in range(STATUS_ALARMS + 25):
        table.alarms.raise_alarm("device_flood", "critical", f"flood {n}", "shuffler")
    status = table.status()
    assert status.alarms_unacknowledged_total == STATUS_ALARMS + 25
    assert len(status.alarms_unacknowledged) == STATUS_ALARMS
    assert status.alarms_unacknowledged[0].detail == "flood 0"  # the oldest first
