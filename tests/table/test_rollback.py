"""Rollback cannot forget state (issue 32): the table's snapshot is taken of the whole state by
construction, so a write the journal refuses leaves the table exactly as it was."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Callable
from dataclasses import fields
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.messages import (
    AcknowledgeAlarm,
    CloseTable,
    EnterDice,
    OpenTable,
    PlayerSetting,
    SetSeats,
    SetWagers,
    SignIn,
    SignOut,
    VoidRound,
    Wagers,
)
from controller.table import (
    ClockSync,
    DiskSpace,
    NoiseSummary,
    Refusal,
    Table,
    TableState,
    Tick,
)
from controller.table.state import clone
from drivers.events import DeviceOffline, DeviceOnline
from tests.harness import running_table
from tests.table.test_machine import Clock, make_table, packet_events, rng, run, shuffled


def test_a_refused_clock_sync_leaves_the_clock_flag_unchanged() -> None:
    # The attack of issue 32: a ClockSync whose journal write is refused must not leave the
    # flag changed (its alarm was never journaled, and the clock service resends only a change).
    table, _ = make_table()
    before = table.snapshot()
    table.handle(ClockSync(synchronized=False))
    table.restore(before)
    assert table.clock_synchronized is None
    assert table.status().clock_synchronized is None
    table.handle(ClockSync(synchronized=True))
    before = table.snapshot()
    table.handle(ClockSync(synchronized=False))
    table.restore(before)
    assert table.status().clock_synchronized is True


# --- any event, rolled back ------------------------------------------------------------------

_SEATS = ["1", "2", "3", "4", "5", "6"]


def _event(table: Table, clock: Clock, action: tuple[str, int]) -> Any:
    """The event an action names, given the table as it stands (an acknowledgement names an
    alarm it latched, a player setting a seat of the round)."""
    name, n = action
    r = table.round
    match name:
        case "deal":
            return packet_events(shuffled(n))
        case "position":
            return [rng(n % 7 + 1)]
        case "dice":
            round_id = r.round_id if r is not None and n % 2 else None
            return [EnterDice(dice=(n % 6 + 1, 2, 3), round_id=round_id)]
        case "seats":
            return [SetSeats(occupied={s: bool((n >> i) & 1) for i, s in enumerate(_SEATS)})]
        case "wagers":
            return [SetWagers(seat=_SEATS[n % 6], wagers=Wagers(pai_gow=n, chan_chu=n % 7))]
        case "sign":
            return [SignIn(dealer_id=f"D-{n}") if n % 3 else SignOut()]
        case "void":
            return [VoidRound(reason="test", by="S-1")]
        case "player":
            return [PlayerSetting(seat=_SEATS[n % 6], house_way=True, by="S-1", reason="x")]
        case "ack":
            ids = list(table.latched) or ["none"]
            return [AcknowledgeAlarm(alarm_id=ids[n % len(ids)], by="S-1")]
        case "clock":
            return [ClockSync(synchronized=bool(n % 2))]
        case "disk":
            return [DiskSpace(free_mb=n, threshold_mb=100, low=n < 100)]
        case "device":
            return [
                DeviceOnline(device="rng") if n % 2 else DeviceOffline(device="rng", reason="x")
            ]
        case "refusal":
            return [Refusal("mqtt", f"id-{n % 3}", "void_round", "signature", "bad")]
        case "noise":
            return [NoiseSummary("shuffler", clock.now, clock.now, dropped=n, frame_errors=n)]
        case "tick":
            return [Tick(clock.now + timedelta(seconds=n))]
        case _:
            return [OpenTable() if n % 2 else CloseTable()]


_ACTIONS = st.tuples(
    st.sampled_from(
        [
            "deal",
            "position",
            "dice",
            "seats",
            "wagers",
            "sign",
            "void",
            "player",
            "ack",
            "clock",
            "disk",
            "device",
            "refusal",
            "noise",
            "tick",
            "open",
        ]
    ),
    st.integers(0, 200),
)


@settings(max_examples=60, deadline=None)
@given(actions=st.lists(_ACTIONS, max_size=12))
def test_restore_after_any_event_gives_back_an_equal_table(actions: list[tuple[str, int]]) -> None:
    table, clock = make_table()
    for action in actions:
        for event in _event(table, clock, action):
            before = table.snapshot()
            kept = clone(before)
            clock.now += timedelta(seconds=7)
            table.handle(event)
            table.restore(before)
            assert table.state == kept  # every part's state, as it was
            assert before == kept  # and the snapshot is untouched by the restore
            table.handle(event)  # then the event as if the journal took it


@settings(max_examples=60, deadline=None)
@given(actions=st.lists(st.tuples(_ACTIONS, st.booleans()), max_size=12))
def test_a_prepared_snapshot_is_the_table_as_it_is_when_taken(
    actions: list[tuple[tuple[str, int], bool]],
) -> None:
    """The daemon copies the state while it waits (``prepare_snapshot``, issue 42); the next
    ``snapshot`` gives that copy only if nothing changed the table since. Here the copy is
    prepared too early (before an event the journal then took), or just before the event, and
    the rollback must still give back the table as it was right before the refused event."""
    table, clock = make_table()
    for action, early in actions:
        for event in _event(table, clock, action):
            if early:
                table.prepare_snapshot()
                table.handle(Tick(clock.now))  # a change after the copy: the copy is dropped
            table.prepare_snapshot()
            kept = clone(table.state)
            before = table.snapshot()
            assert before == kept
            clock.now += timedelta(seconds=7)
            table.handle(event)
            table.prepare_snapshot()  # a copy prepared after the event ...
            table.restore(before)  # ... is dropped by the rollback
            assert table.state == kept
            assert table.snapshot() == kept
            table.handle(event)


def test_an_assignment_to_a_tables_attribute_drops_the_prepared_copy() -> None:
    """``table.occupied = …`` (any attribute that is a field of a part's state) changes the
    table as a method does: the copy prepared before it is not what ``snapshot`` gives."""
    table, _ = make_table()
    table.prepare_snapshot()
    table.occupied = {**table.occupied, "1": not table.occupied.get("1")}
    assert table.snapshot() == clone(table.state)
    table.prepare_snapshot()
    table.dealer_id = "D-999"
    assert table.snapshot().floor.dealer_id == "D-999"


def test_the_snapshot_copies_everything_a_part_keeps() -> None:
    """By construction: every field of every part's state is in the snapshot (a field added to
    a part is copied without being named anywhere), and nothing mutable is shared."""
    table, _ = make_table()
    run(table, [rng(3), *packet_events(shuffled(4))])
    snapshot = table.snapshot()
    for part in fields(TableState):
        ours, theirs = getattr(table.state, part.name), getattr(snapshot, part.name)
        assert ours == theirs
        if ours is not None:
            assert ours is not theirs
            for f in fields(ours):
                value = getattr(ours, f.name)
                if isinstance(value, dict | list):
                    assert value is not getattr(theirs, f.name), f"{part.name}.{f.name} shared"


def test_a_state_holding_something_it_cannot_copy_is_refused() -> None:
    table, _ = make_table()
    table.state.health.devices["odd"] = bytearray(b"x")  # type: ignore[assignment]
    with pytest.raises(TypeError, match="mutable bytearray"):
        table.snapshot()


# --- the attack, through the real daemon and journal -----------------------------------------


async def test_a_clock_sync_the_journal_refuses_changes_nothing_in_the_running_table(
    tmp_path: Path,
) -> None:
    """Issue 32: the journal refuses the write of a ClockSync (here a trigger on the journal's
    file aborts it, as a full disk or an I/O error would): the daemon rolls the table back and
    tilts, and the flag must be as it was, so the status never says what was never journaled
    and the clock service's next report (it resends only a change) is still news."""
    async with running_table(tmp_path, seed=7) as t:
        t.daemon.put_nowait(ClockSync(synchronized=True))
        await _until(lambda: t.daemon.table.clock_synchronized is True)
        with sqlite3.connect(tmp_path / "journal.sqlite3") as conn:
            conn.execute(
                "CREATE TRIGGER refuse_clock BEFORE INSERT ON events "
                "WHEN NEW.kind = 'clock_sync' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        t.daemon.put_nowait(ClockSync(synchronized=False))
        await _until(lambda: t.daemon.table.fault is not None)
        assert t.daemon.table.clock_synchronized is True
        assert t.daemon.table.status().clock_synchronized is True


async def _until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
