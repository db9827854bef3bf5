"""The casino's copy of each table's record, on SQLite and PostgreSQL: checkpoint signatures
checked; a table whose chain was rewritten (another hash at a row it had checkpointed), whose
tail went missing (a later checkpoint at an earlier row), whose seq was reused (its journal
replaced) raises an alarm that stays until a named person acknowledges it; a forged checkpoint
is refused. The shift's numbers and the signed end-of-shift report come from the same copy."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

from controller.journal.checkpoints import sign_checkpoint
from controller.messages import DeviceIdentity
from pit import devices, shift
from pit.pages import PageQueries
from pit.sessions import Sessions
from pit.store import Incoming, Store, migrate
from simulators.feed import SimTable, SimulatedKeys, wire
from tests.pit.conftest import KEY

ROOT = "casino/demo/paigow/"


def _store(url: str) -> Store:
    migrate(url)
    return Store(url, default_checkpoint_key=KEY, root=ROOT, feed_keys=SimulatedKeys())


def _incoming(messages: list[tuple[str, dict[str, object]]]) -> list[Incoming]:
    return [Incoming(t, wire(b), False, time.time()) for t, b in messages]


def _checkpoint(
    table: SimTable, event_id: int, chain: str, made_at: str, prev: tuple[int, str] | None = None
) -> Incoming:
    body: dict[str, object] = {
        "table_id": table.table_id, "event_id": event_id, "chain": chain, "made_at": made_at,
    }  # fmt: skip
    if prev is not None:  # the checkpoint before it, as the table names it (issue 30)
        body["prev_event_id"], body["prev_chain"] = prev
    table.seq += 1
    message = {
        "schema": "paigow.checkpoint", "version": 1, "msg_id": f"{table.table_id}-X{table.seq}",
        "table_id": table.table_id, "seq": table.seq, "time": made_at, "replayed": False,
        "payload": {**body, "key_id": "k", "hmac": sign_checkpoint(KEY, body)},
    }  # fmt: skip
    return Incoming(f"{table.prefix}checkpoint", wire(message), False, time.time())


def _kinds(store: Store, table: str) -> list[str]:
    return [a["kind"] for a in store.pages.tiles([table])[0]["record_alarms"]]


def test_checkpoints_kept_and_checked(db_url: str) -> None:
    store = _store(db_url)
    table = SimTable("PG-01", key=KEY)
    now = datetime.now(UTC)
    for i in range(3):
        store.ingest(_incoming(table.next_round(now + timedelta(seconds=i))))
    rows = store.db.all("SELECT signature FROM checkpoints WHERE table_id = 'PG-01'")
    assert rows == [("valid",)] * 3
    head = store.pages.tiles(["PG-01"])[0]["chain"]
    assert head["event_id"] == table.event_id
    assert _kinds(store, "PG-01") == []
    # A checkpoint signed with another key: refused, alarmed.
    forger = SimTable("PG-01", key=bytes(32), seq=table.seq, event_id=table.event_id)
    forged = forger.next_round(now + timedelta(seconds=10))[-1]
    outcome = store.ingest(_incoming([forged]))
    assert [a["kind"] for a in outcome.alarms] == ["checkpoint_forged"]
    store.close()


def test_a_rewritten_chain_and_a_cut_tail_raise_alarms_until_acknowledged(db_url: str) -> None:
    store = _store(db_url)
    table = SimTable("PG-02", key=KEY)
    t0 = datetime.now(UTC)
    at = [(t0 + timedelta(seconds=i)).isoformat().replace("+00:00", "Z") for i in range(5)]
    first = _checkpoint(table, 10, "a" * 64, at[0])
    store.ingest([first, _checkpoint(table, 20, "b" * 64, at[1], prev=(10, "a" * 64))])
    assert _kinds(store, "PG-02") == []
    # Row 10 again, with another hash: the journal was rewritten under the checkpoint.
    outcome = store.ingest([_checkpoint(table, 10, "c" * 64, at[2])])
    assert [a["kind"] for a in outcome.alarms] == ["chain_rewritten", "chain_cut"]
    assert "row 10" in outcome.alarms[0]["detail"]
    kinds = _kinds(store, "PG-02")
    assert sorted(kinds) == ["chain_cut", "chain_rewritten"]
    # One open alarm per kind: the next rewrite adds none.
    assert store.ingest([_checkpoint(table, 10, "d" * 64, at[3])]).alarms == []
    # Acknowledged by a named person, it leaves the tile.
    for alarm in store.pages.tiles(["PG-02"])[0]["record_alarms"]:
        assert Sessions(store.db).acknowledge_record_alarm(alarm["id"], "Sam Supervisor")
    assert _kinds(store, "PG-02") == []
    assert store.db.all("SELECT DISTINCT acked_by FROM record_alarms") == [("Sam Supervisor",)]
    store.close()


def test_a_reused_seq_means_the_journal_was_replaced(db_url: str) -> None:
    store = _store(db_url)
    table = SimTable("PG-03", key=KEY)
    now = datetime.now(UTC)
    store.ingest(_incoming(table.next_round(now) + table.next_round(now)))
    replaced = SimTable("PG-03", key=KEY, seed=99)  # a fresh journal: seq 1 again
    outcome = store.ingest(_incoming(replaced.next_round(now)))
    kinds = [a["kind"] for a in outcome.alarms]
    # Its seq 1 is another message than the pit has; its chain has another hash at row 12.
    assert kinds == ["sequence_reused", "chain_rewritten"]
    store.close()


def test_shift_numbers_csv_and_signed_report(db_url: str) -> None:
    store = _store(db_url)
    table = SimTable("PG-04", key=KEY, seed=4)
    now = datetime.now(UTC)
    for i in range(30):
        store.ingest(_incoming(table.next_round(now + timedelta(seconds=6 * i), wager=10)))
    known = shift.shifts(store.pages)
    rows = shift.numbers(store.pages, known[0])
    total = sum(r["rounds"] for r in rows)
    assert total == sum(1 for _ in store.db.all("SELECT 1 FROM rounds WHERE shift = ?", known[:1]))
    row = rows[0]
    assert row["table_id"] == "PG-04" and row["dealer_id"] == "D-100"
    assert row["settled"] + row["dead"] == row["rounds"]
    assert row["seats_played"] == 6 * row["settled"]
    assert row["side_wagered"] == 10 * row["seats_played"]
    assert row["theoretical_hold"] == round(0.080008, 4)  # Chan Chu PT3 (docs/math.md)
    assert row["rounds_per_hour"] > 0
    text = shift.to_csv(rows)
    assert text.splitlines()[0].startswith("shift,table_id,dealer_id,rounds")
    report = shift.report(store.pages, known[0], KEY, "report.key", "demo")
    assert shift.verify_report(KEY, report)
    tampered = json.loads(json.dumps(report))
    tampered["numbers"][0]["rounds"] += 1
    assert not shift.verify_report(KEY, tampered)
    store.close()


def test_game_protection_pooled_by_shuffler_and_model(db_url: str) -> None:
    """Tables sharing a shuffler (and a model) are pooled: their rounds, the rounds misdealt for
    a deck's reason, the protection alarms and the tests that fired."""
    from controller.messages import AlarmPayload, ProtectionPayload, envelope

    store = _store(db_url)
    now = datetime.now(UTC)
    tables = [SimTable(f"PG-2{i}", key=KEY, seed=20 + i) for i in range(3)]
    for t in tables:
        for i in range(5):
            store.ingest(_incoming(t.next_round(now + timedelta(seconds=6 * i))))
    t = tables[0]
    alarm_id = "PG-20-ALARM-1"
    protection = ProtectionPayload(
        alarm_id=alarm_id, test="card_packet", title="cards by packet", detail="skewed",
        statistic=9.1, threshold=8.0, llr=9.1, p_value=0.0001, since=now, at=now, rounds=40,
        rounds_seen=40, advice="swap the shuffler", severity="critical",
    )  # fmt: skip
    alarm = AlarmPayload(
        code="game_protection", severity="critical", detail="cards by packet", alarm_id=alarm_id
    )
    messages = []
    for payload in (protection, alarm):
        t.seq += 1
        body = envelope(payload, msg_id=f"PG-20-P{t.seq}", table_id="PG-20", seq=t.seq, time=now)
        messages.append((f"{t.prefix}{payload.TOPIC}", body))
    store.ingest(_incoming(messages))
    shufflers = {"PG-20": "MDX-2 0451", "PG-21": "MDX-2 0451", "PG-22": "MDX-2 0733"}
    pools = {(p["pool"], p["id"]): p for p in store.pages.pooled_protection(shufflers)}
    shared = pools[("shuffler", "MDX-2 0451")]
    assert shared["tables"] == ["PG-20", "PG-21"] and shared["rounds"] == 10
    assert shared["protection_alarms"] == 1 and shared["tests"] == ["card_packet"]
    model = pools[("model", "MDX-2")]
    assert model["tables"] == ["PG-20", "PG-21", "PG-22"] and model["rounds"] == 15
    assert model["protection_alarms"] == 1
    assert pools[("shuffler", "MDX-2 0733")]["protection_alarms"] == 0
    store.close()


def test_each_tables_device_history_keeps_every_identity_once_in_sequence_order(
    db_url: str,
) -> None:
    """What a table's devices are, from its signed device messages: a row per identity from the
    message that first carried it; the same identity again (a reconnect, a retained state) adds
    nothing; a swap adds a row; a message read out of order is compared with the one before
    its own seq, so the history is the table's, whatever order the broker gave."""
    store = _store(db_url)
    now = datetime.now(UTC)
    a = DeviceIdentity(make="Acme Shufflers", model="MDX-2", firmware="4.1", serial="A-0001")
    b = a.model_copy(update={"serial": "A-0002"})  # the shuffler swapped for another unit
    c = b.model_copy(update={"firmware": "4.2"})  # then its firmware updated
    table = SimTable("PG-02", key=KEY, seed=2)
    first = table.devices(now, {"shuffler": a})  # seq 1 (shuffler), 2 (rng: no identity)
    again = table.devices(now, {"shuffler": a})  # 3, 4
    swap = table.devices(now, {"shuffler": b})  # 5, 6
    later = table.devices(now, {"shuffler": c})  # 7, 8
    store.ingest(_incoming(first), {})
    # The broker gave the later ones first: the reconnect's seq 3 (identity a) arrives after
    # seq 7 (identity c): compared with seq 1's, it is no swap back.
    store.ingest(_incoming([*later, *swap, *again]), {})
    rows = devices.history(store.db, "PG-02")
    assert [(r["device"], r["since_seq"], r["serial"], r["firmware"]) for r in rows] == [
        ("shuffler", 1, "A-0001", "4.1"),
        ("shuffler", 5, "A-0002", "4.1"),
        ("shuffler", 7, "A-0002", "4.2"),
    ]
    assert rows[0]["make"] == "Acme Shufflers" and rows[0]["model"] == "MDX-2"
    # The page's table detail carries it.
    detail = PageQueries(store.db).table_detail("PG-02")
    assert detail is not None and detail["device_history"] == rows
    store.close()
