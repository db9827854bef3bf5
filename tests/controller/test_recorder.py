"""The Recorder (controller/recorder.py): what each effect becomes in the journal and on MQTT, in
one transaction with the kept state it changed and with every StateKeeper's state."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from controller.journal import Journal, Transaction
from controller.kept_state import CHAIN_VERIFIED_KEY, DEALER_KEY, LATCHED_KEY, SEATS_KEY, load_kept
from controller.messages import AcknowledgeAlarm, SetSeats, SignIn
from controller.recorder import EFFECTS, Recorder, durable
from controller.table import (
    AlarmRaised,
    CommandReply,
    DeviceChanged,
    Effect,
    KeptTableState,
    RoundProgress,
    Table,
    Tick,
)
from drivers.events import DeviceOffline, DeviceOnline
from tests.table.test_machine import T0, make_table, packet_events, rng, shuffled

PREFIX = "casino/test/PG-01/"


class Keeper:
    """A service keeping state: it saves a count of the alarms it saw, in their transaction."""

    name = "keeper"

    def __init__(self) -> None:
        self.seen = 0

    def keep(self, tx: Transaction, effect: Effect) -> None:
        if isinstance(effect, AlarmRaised):
            self.seen += 1
            tx.remember("keeper_count", self.seen)


def _apply(
    journal: Journal, recorder: Recorder, table: Table, event: Any, origin: Any = None
) -> list[Effect]:
    before = table.round_ids()
    effects = table.handle(event)
    with journal.transaction(durable=durable(event, effects)) as tx:
        recorder.record(tx, event, effects, before, origin)
    return effects


def _rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def test_every_effect_a_round_makes_is_journaled_and_routed(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    table, _clock = make_table()
    recorder = Recorder(table_id="PG-01", prefix=PREFIX, publishing=True)
    with Journal.open(path, "PG-01", clock=lambda: T0) as journal:
        _apply(journal, recorder, table, DeviceOnline(device="shuffler"))
        _apply(journal, recorder, table, SetSeats(occupied=dict.fromkeys(table.occupied, True)))
        for event in [rng(3), *packet_events(shuffled(11))]:
            _apply(journal, recorder, table, event)
    kinds = [k for (k,) in _rows(path, "SELECT kind FROM events ORDER BY id")]
    assert kinds[0] == "device_online" and "round_sealed" in kinds
    assert "deal_seen" in kinds and kinds.count("packet_dealt") == 7
    topics = _rows(path, "SELECT topic, retain FROM outbox ORDER BY seq")
    # A device's state is retained on its own topic; a round and its players are not.
    assert topics[0] == (f"{PREFIX}device/shuffler", 1)
    assert (f"{PREFIX}round", 0) in topics
    assert {t for t, _ in topics} <= {f"{PREFIX}{n}" for n in ("round", "player", "alarm")} | {
        f"{PREFIX}device/shuffler"
    }


def test_an_mqtt_off_table_queues_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j.sqlite3"
    table, _clock = make_table()
    recorder = Recorder(table_id="PG-01", prefix=PREFIX, publishing=False)
    with Journal.open(path, "PG-01", clock=lambda: T0) as journal:
        for event in [rng(2), *packet_events(shuffled(11))]:
            _apply(journal, recorder, table, event)
    assert _rows(path, "SELECT count(*) FROM outbox") == [(0,)]
    assert _rows(path, "SELECT count(*) FROM rounds WHERE status = 'settled'") == [(1,)]


def test_kept_state_is_saved_with_the_command_that_changed_it_and_read_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite3"
    table, _clock = make_table()
    recorder = Recorder(table_id="PG-01", prefix=PREFIX, publishing=True)
    with Journal.open(path, "PG-01", clock=lambda: T0) as journal:
        _apply(journal, recorder, table, SetSeats(occupied={"1": True, "2": False}))
        _apply(journal, recorder, table, SignIn(dealer_id="D-77"))
        assert journal.kept.remembered(SEATS_KEY)["2"] is False
        assert journal.kept.remembered(DEALER_KEY) == "D-77"
        kept = load_kept(journal, lambda: T0, str)
    assert kept.table.dealer_id == "D-77" and kept.table.occupied["1"] is True
    # Given to the next table as constructor arguments, never written into it afterwards.
    fresh, _ = make_table()
    again = Table(fresh.settings, new_round_id=lambda: "r", clock=lambda: T0, kept=kept.table)
    assert again.dealer_id == "D-77" and again.occupied["2"] is False
    chained = [
        json.loads(p)["name"]
        for (p,) in _rows(path, "SELECT payload FROM events WHERE kind = 'state_kept'")
    ]
    # Each change is also in the hash chain; then the start's own: the row it verified up to.
    assert chained == [SEATS_KEY, DEALER_KEY, CHAIN_VERIFIED_KEY]


def test_a_latching_alarm_and_its_acknowledgement_save_the_latched_list_and_the_keepers(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite3"
    table, _clock = make_table()
    keeper = Keeper()
    recorder = Recorder(table_id="PG-01", prefix=PREFIX, publishing=True, keepers=[keeper])
    with Journal.open(path, "PG-01", clock=lambda: T0) as journal:
        # A second joker in a deal is a misdeal and a deck-integrity alarm, latched.
        deck = shuffled(11)
        deck[deck.index("JK") ^ 1] = "JK"  # a second joker
        effects: list[Effect] = []
        for event in [rng(4), *packet_events(deck)]:
            effects += _apply(journal, recorder, table, event)
        alarms = [e.payload for e in effects if isinstance(e, AlarmRaised)]
        latched = [a for a in alarms if a.ack_required]
        assert latched, [a.code for a in alarms]
        assert [a["alarm_id"] for a in journal.kept.remembered(LATCHED_KEY)] == [
            a.alarm_id for a in latched
        ]
        assert journal.kept.remembered("keeper_count") == keeper.seen == len(alarms)
        ack = AcknowledgeAlarm(alarm_id=latched[0].alarm_id, by="Floor: A. Lee", note="seen")
        replies = _apply(journal, recorder, table, ack)
        assert any(isinstance(e, CommandReply) and e.ok for e in replies)
        assert latched[0].alarm_id not in [
            a["alarm_id"] for a in journal.kept.remembered(LATCHED_KEY)
        ]


def test_a_refused_transaction_keeps_neither_the_effect_nor_the_keepers_state(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.sqlite3"
    table, _clock = make_table()

    class Failing(Keeper):
        def keep(self, tx: Transaction, effect: Effect) -> None:
            super().keep(tx, effect)
            if isinstance(effect, AlarmRaised):
                raise sqlite3.OperationalError("disk I/O error")

    recorder = Recorder(table_id="PG-01", prefix=PREFIX, publishing=True, keepers=[Failing()])
    with Journal.open(path, "PG-01", clock=lambda: T0) as journal:
        _apply(journal, recorder, table, DeviceOnline(device="shuffler"))
        with pytest.raises(sqlite3.OperationalError):
            _apply(journal, recorder, table, DeviceOffline(device="shuffler", reason="unplugged"))
        assert journal.kept.remembered("keeper_count") is None
    kinds = [k for (k,) in _rows(path, "SELECT kind FROM events")]
    assert "device_offline" not in kinds and "alarm" not in kinds  # all or nothing


def test_the_table_of_effects_names_every_effect_that_is_journaled() -> None:
    assert DeviceChanged in EFFECTS and AlarmRaised in EFFECTS and CommandReply in EFFECTS
    assert RoundProgress not in EFFECTS  # heard, never journaled on its own
    assert durable(Tick(T0), [RoundProgress.__new__(RoundProgress)]) is False
    assert durable(Tick(T0), []) is False
    assert durable(SetSeats(occupied={}), []) is True


def test_kept_table_state_is_only_a_constructor_argument() -> None:
    kept = KeptTableState(occupied={"1": True, "nine": True}, dealer_id="")
    table, _ = make_table()
    fresh = Table(table.settings, new_round_id=lambda: "r", clock=lambda: T0, kept=kept)
    assert fresh.occupied["1"] is True and "nine" not in fresh.occupied  # unknown seats dropped
    assert fresh.dealer_id is None
