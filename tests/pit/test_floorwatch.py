"""The floor's pooled game protection in the pit (pit/floorwatch.py), on SQLite and PostgreSQL:
stored rounds taken once into the pools of the devices the tables said they have, a finding
raised as a record alarm with its attribution, acknowledged with a supervisor's name (which
restarts the test), and a restart that neither counts a round twice nor raises an alarm twice."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.messages import DeviceIdentity
from pit.floorwatch import FloorProtection, floor_view
from pit.pooling import FloorBudget
from pit.sessions import Sessions
from pit.store import Incoming, Store, migrate
from simulators.feed import SimTable, SimulatedKeys, wire
from tests.pit.conftest import KEY

ROOT = "casino/demo/paigow/"
SHUFFLER = DeviceIdentity(make="Acme", model="MDX-2", firmware="4.1", role="cards")
RNG = DeviceIdentity(make="Acme", model="RNG-7", firmware="1.0", role="position")
POOL = "model:position:Acme|RNG-7|1.0"


def _one(store: Store, sql: str) -> tuple[Any, ...]:
    """A query's one row."""
    row = store.db.one(sql)
    assert row is not None
    return row


def _store(url: str) -> Store:
    migrate(url)
    return Store(url, default_checkpoint_key=KEY, root=ROOT, feed_keys=SimulatedKeys())


def _incoming(messages: list[tuple[str, dict[str, object]]]) -> list[Incoming]:
    return [Incoming(t, wire(b), False, time.time()) for t, b in messages]


def _tables(store: Store, n: int, start: datetime) -> list[SimTable]:
    tables = []
    for i in range(n):
        t = SimTable(f"PG-{i:02d}", key=KEY, seed=i + 1)
        ids = {
            "shuffler": SHUFFLER.model_copy(update={"serial": f"S-{i}"}),
            "rng": RNG.model_copy(update={"serial": f"R-{i}"}),
        }
        store.ingest(_incoming(t.devices(start, ids)), {})
        tables.append(t)
    return tables


def _deal(store: Store, tables: list[SimTable], rounds: int, start: datetime) -> None:
    for n in range(rounds):
        batch = []
        for t in tables:
            batch += t.next_round(start + timedelta(seconds=n))
        store.ingest(_incoming(batch), {})


def raised(db_url: str) -> tuple[Store, list[SimTable], datetime, FloorProtection, list[Any]]:
    """Four simulated tables whose RNG boxes all draw 1 (a model's weakness, as far as the floor
    can tell), 14 rounds each, and the floor's first step over them: the store, the tables, the
    deals' start, the floor and the record alarms that step raised."""
    store = _store(db_url)
    start = datetime.now(UTC) - timedelta(minutes=5)
    tables = _tables(store, 4, start)
    _deal(store, tables, 14, start)
    floor = FloorProtection(db_url, FloorBudget(tables=4))
    return store, tables, start, floor, floor.step()


def test_a_models_weakness_raised_once_attributed_acknowledged_and_restarted(db_url: str) -> None:
    """The simulated tables' RNG boxes all draw 1 (a model's weakness, as far as the floor can
    tell): the pool of that model finds it, says the model and names the tables; a pit started
    again on the same database takes no round twice and raises nothing twice; the supervisor's
    acknowledgement restarts the test."""
    store, tables, start, floor, alarms = raised(db_url)
    settled = _one(store, "SELECT count(*) FROM rounds WHERE status = 'settled'")[0]
    assert floor.rounds_taken == _one(store, "SELECT count(*) FROM rounds")[0] >= settled > 20
    assert [a["kind"] for a in alarms] == ["pooled_protection"]
    assert alarms[0]["table_id"] == "floor" and "RNG-7" in alarms[0]["detail"]
    view = floor_view(store.db)
    finding = view["findings"][0]
    assert finding["pool"] == POOL and finding["attribution"]["verdict"] == "model"
    assert finding["finding"]["test"] in ("rng_number", "rng_bias")
    assert {s["table"] for s in finding["attribution"]["shares"]} == {t.table_id for t in tables}
    pools = {p["pool"]: p for p in view["pools"]}
    assert set(pools) == {POOL, "model:cards:Acme|MDX-2|4.1"}
    assert {t["table"] for t in pools[POOL]["tables"]} == {t.table_id for t in tables}
    assert view["budget"]["tables"] == 4 and view["budget"]["table_false_alarms_per_year"] == 0.0125
    rounds_before = pools[POOL]["rounds"]

    # Nothing new: nothing taken, nothing raised. A pit started again (a new worker on the
    # same database) carries on from the saved state: no round counted twice, no alarm twice.
    assert floor.step() == []
    floor.close()
    again = FloorProtection(db_url, FloorBudget(tables=4))
    assert again.step() == []
    _deal(store, tables, 3, start + timedelta(minutes=1))
    assert again.step() == []  # the test stays alarmed until acknowledged: no second alarm
    pools = {p["pool"]: p for p in floor_view(store.db)["pools"]}
    assert pools[POOL]["rounds"] > rounds_before
    assert _one(store, "SELECT count(*) FROM rounds WHERE pooled = 0")[0] == 0
    count = _one(store, "SELECT count(*) FROM record_alarms WHERE kind = 'pooled_protection'")
    assert count is not None and count[0] == 1

    # Acknowledged by a named supervisor (the page does it with badge + PIN): the test
    # restarts, and the same weakness is found again from fresh evidence.
    assert Sessions(store.db).acknowledge_record_alarm(alarms[0]["id"], "S-1 Sam")
    assert again.step() == []
    state = {
        t["name"]: t for t in {p["pool"]: p for p in floor_view(store.db)["pools"]}[POOL]["tests"]
    }
    assert state[finding["finding"]["test"]]["alarmed_since"] is None
    _deal(store, tables, 14, start + timedelta(minutes=2))
    second = again.step()
    assert [a["kind"] for a in second] == ["pooled_protection"]
    assert floor_view(store.db)["findings"][1]["acked_by"] == "S-1 Sam"
    again.close()
    store.close()


def test_rounds_without_named_devices_are_not_pooled_and_a_correction_is_not_taken_twice(
    db_url: str,
) -> None:
    store = _store(db_url)
    start = datetime.now(UTC) - timedelta(minutes=5)
    table = SimTable("PG-50", key=KEY, seed=5)
    store.ingest(_incoming(table.devices(start)), {})  # no identity: the table named nothing
    _deal(store, [table], 5, start)
    floor = FloorProtection(db_url, FloorBudget(tables=1))
    assert floor.step() == []
    assert floor_view(store.db)["pools"] == []
    # The same round sent again (a correction, a replay): stored as its later message, not
    # taken into any pool a second time.
    row = _one(store, "SELECT body FROM messages WHERE schema_name = 'paigow.round' LIMIT 1")
    body = json.loads(row[0])
    table.seq += 1
    body.update(msg_id=f"{table.table_id}-AGAIN", seq=table.seq)
    store.ingest(_incoming([(f"{table.prefix}round", body)]), {})
    assert _one(store, "SELECT count(*) FROM rounds WHERE pooled = 0")[0] == 0
    floor.close()
    store.close()


def test_a_stored_round_altered_in_the_database_is_logged_and_passed_over(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Someone with the database's password rewrites four stored round messages: one is no
    JSON, one has no payload, one carries a packet's cards as a number, one nests 100,000
    arrays deep (the standard library's parser raised RecursionError on it, which stopped
    every step). The floor says each on its log by table and round, counts none of them in any
    pool, takes the rest, and carries on: nothing raised, nothing taken twice."""
    store = _store(db_url)
    start = datetime.now(UTC) - timedelta(minutes=5)
    tables = _tables(store, 2, start)
    _deal(store, tables, 4, start)
    rows = store.db.all(
        "SELECT r.table_id, r.round_id, m.seq, m.body FROM rounds r JOIN messages m "
        "ON m.table_id = r.table_id AND m.seq = r.msg_seq AND m.sequenced = 1 "
        "WHERE r.status = 'settled' ORDER BY r.table_id, m.seq"
    )
    assert len(rows) >= 5
    wrong_type = json.loads(rows[2][3])
    wrong_type["payload"]["positions"][0]["cards"] = 7
    altered = {
        rows[0][1]: "not json {",
        rows[1][1]: json.dumps({"time": "2026-12-05T20:00:00Z"}),
        rows[2][1]: json.dumps(wrong_type),
        rows[3][1]: '{"time": "2026-12-05T20:00:00Z", "payload": ' + "[" * 100_000 + "]" * 100_000,
    }
    for table, round_id, seq, _ in rows[:4]:
        store.db.x(
            "UPDATE messages SET body = ? WHERE table_id = ? AND seq = ? AND sequenced = 1",
            (altered[round_id], table, seq),
        )
    floor = FloorProtection(db_url, FloorBudget(tables=2))
    with caplog.at_level(logging.ERROR, logger="pit.floorwatch"):
        assert floor.step() == []
    said = [r.getMessage() for r in caplog.records if "pit_pooled_round_unreadable" in r.message]
    assert len(said) == 4
    assert all("\n" not in line and "[[[" not in line for line in said)  # one line, no input
    for table, round_id, _, _ in rows[:4]:  # each once, whatever order the floor took them in
        assert sum(f"table={table} round={round_id}:" in line for line in said) == 1
    assert floor.rounds_taken == _one(store, "SELECT count(*) FROM rounds")[0]
    pools = {p["pool"]: p for p in floor_view(store.db)["pools"]}
    assert pools["model:cards:Acme|MDX-2|4.1"]["rounds"] == len(rows) - 4
    assert (
        floor.step() == [] and _one(store, "SELECT count(*) FROM rounds WHERE pooled = 0")[0] == 0
    )
    floor.close()
    store.close()


def test_a_saved_state_rewritten_too_deep_to_read_is_logged_and_started_afresh(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The saved pooled state rewritten in the database as arrays nested 100,000 deep: a
    worker that reads it says so and starts afresh, and steps on (it raised RecursionError and
    no step ever ended)."""
    store = _store(db_url)
    start = datetime.now(UTC) - timedelta(minutes=5)
    tables = _tables(store, 2, start)
    _deal(store, tables, 2, start)
    first = FloorProtection(db_url, FloorBudget(tables=2))
    first.step()
    first.close()
    store.db.x("UPDATE floor_protection SET state = ? WHERE id = 1", ("[" * 100_000,))
    _deal(store, tables, 2, start + timedelta(minutes=1))
    again = FloorProtection(db_url, FloorBudget(tables=2))
    with caplog.at_level(logging.ERROR, logger="pit.floorwatch"):
        assert again.step() == []
    assert any("pit_floor_protection_state_unreadable" in r.message for r in caplog.records)
    assert again.rounds_taken == 2 * len(tables)
    assert _one(store, "SELECT count(*) FROM rounds WHERE pooled = 0")[0] == 0
    assert floor_view(store.db)["pools"]  # saved again, readable
    again.close()
    store.close()


@pytest.mark.parametrize(
    "rewritten",
    ["not json {", json.dumps({"pool": POOL, "label": "x"}), "[" * 100_000],
    ids=["no-json", "members-missing", "nested-100000-deep"],
)
def test_a_pooled_finding_rewritten_in_the_database_is_said_and_passed_over(
    db_url: str, rewritten: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Someone with the database's password rewrites a raised finding's stored text (and then
    the floor's saved view). Each step read every open finding's text and stopped at the first
    it could not parse or lacked a member of: no step ended, nothing more was pooled, and the
    page's /api/protection failed. Now the floor says which (once), steps on, the page shows the
    finding as unreadable with its record alarm, which a supervisor still acknowledges, and a
    rewritten view is shown as such until the next step writes it again."""
    store, tables, start, floor, alarms = raised(db_url)
    assert [a["kind"] for a in alarms] == ["pooled_protection"]
    tests = [row[0] for row in store.db.all("SELECT test FROM pooled_findings")]
    store.db.x("UPDATE pooled_findings SET body = ?", (rewritten,))

    _deal(store, tables, 2, start + timedelta(minutes=1))
    with caplog.at_level(logging.ERROR, logger="pit.floorwatch"):
        assert floor.step() == []
        _deal(store, tables, 2, start + timedelta(minutes=2))
        assert floor.step() == []  # said once, not at every step
    said = [r.getMessage() for r in caplog.records if "pit_pooled_finding_unreadable" in r.message]
    assert sorted(said) == sorted(
        line for line in said if f"alarm={alarms[0]['id']} test=" in line
    ) and len(said) == len(tests)
    assert all("\n" not in line and "[[[" not in line for line in said)
    assert _one(store, "SELECT count(*) FROM rounds WHERE pooled = 0")[0] == 0  # pooled on

    view = floor_view(store.db)  # the rewritten ones shown as such; any raised since, whole
    unreadable = [item for item in view["findings"] if item.get("unreadable")]
    assert view["pools"] and len(unreadable) == len(tests)
    for item in view["findings"]:
        assert item["alarm_id"] == alarms[0]["id"] and item["acked_at"] is None
        assert item.get("unreadable") or item["pool"] == POOL
    assert Sessions(store.db).acknowledge_record_alarm(alarms[0]["id"], "S-1 Sam")
    assert floor.step() == []
    assert floor_view(store.db)["findings"][0]["acked_by"] == "S-1 Sam"

    for text in (rewritten, json.dumps({"budget": None, "pools": [1]})):  # and well-formed
        store.db.x("UPDATE floor_protection SET view = ? WHERE id = 1", (text,))
        assert floor_view(store.db)["unreadable"] is True, text
    _deal(store, tables, 2, start + timedelta(minutes=3))
    assert floor.step() == []
    again = floor_view(store.db)
    assert "unreadable" not in again and again["pools"]
    floor.close()
    store.close()


def test_a_finding_or_view_given_a_number_json_cannot_carry_is_shown_as_unreadable(
    db_url: str,
) -> None:
    """A raised finding's text and the saved view rewritten with NaN and Infinity where the
    floor writes finite numbers (well-formed to Python's parser): the page's answer would carry
    them, which a browser's JSON refuses, and the whole protection panel stopped updating. Both
    are shown as unreadable; the same texts with the numbers put back read as before."""
    store, _, _, floor, alarms = raised(db_url)
    assert alarms
    (body,) = store.db.one("SELECT body FROM pooled_findings LIMIT 1") or ("",)
    finding = json.loads(body)
    finding["attribution"]["shares"][0]["llr"] = float("inf")
    finding["finding"]["statistic"] = float("nan")
    (view_text,) = store.db.one("SELECT view FROM floor_protection WHERE id = 1") or ("",)
    view = json.loads(view_text)
    view["pools"][0]["tests"][0]["threshold"] = float("inf")
    store.db.x("UPDATE pooled_findings SET body = ?", (json.dumps(finding),))
    store.db.x("UPDATE floor_protection SET view = ? WHERE id = 1", (json.dumps(view),))
    shown = floor_view(store.db)
    assert shown["unreadable"] is True and shown["pools"] == []
    assert all(item.get("unreadable") for item in shown["findings"])
    store.db.x("UPDATE pooled_findings SET body = ?", (body,))
    store.db.x("UPDATE floor_protection SET view = ? WHERE id = 1", (view_text,))
    shown = floor_view(store.db)
    assert "unreadable" not in shown and shown["pools"]
    assert not any(item.get("unreadable") for item in shown["findings"])
    json.dumps(shown, allow_nan=False)  # what the page is sent is JSON a browser reads
    floor.close()
    store.close()


def test_two_pits_take_turns_on_one_state(db_url: str) -> None:
    """Two pits' workers on one database: each step reads the state the other saved first, so
    every round is pooled once whichever pit takes it; on PostgreSQL a worker that cannot get
    the floor's lock (the other is stepping) takes nothing."""
    store = _store(db_url)
    start = datetime.now(UTC) - timedelta(minutes=5)
    tables = _tables(store, 2, start)
    one, two = (FloorProtection(db_url, FloorBudget(tables=2)) for _ in range(2))
    total = 0
    for k in range(4):
        _deal(store, tables, 2, start + timedelta(minutes=k))
        (one if k % 2 else two).step()
        total += 2 * len(tables)
        pools = {p["pool"]: p for p in floor_view(store.db)["pools"]}
        settled = _one(
            store, "SELECT count(*) FROM rounds WHERE status = 'settled' AND table_id LIKE 'PG-0%'"
        )
        assert pools["model:cards:Acme|MDX-2|4.1"]["rounds"] == settled[0]
    assert one.rounds_taken + two.rounds_taken == total
    if store.db.kind == "postgresql":
        from pit.floorwatch import LOCK

        _deal(store, tables, 1, start + timedelta(minutes=9))
        holder = Store(db_url, root=ROOT, feed_keys=SimulatedKeys())
        with holder.db.transaction():
            holder.db.one("SELECT pg_advisory_xact_lock(?)", (LOCK,))
            assert one.step() == [] and one.rounds_taken + two.rounds_taken == total
        holder.close()
        one.step()
        assert one.rounds_taken + two.rounds_taken == total + len(tables)
    one.close()
    two.close()
    store.close()


def test_the_floor_steps_in_a_process_of_its_own_lower_in_priority_and_outlives_its_death(
    db_url: str,
) -> None:
    """The floor's step runs in a child process (issue 42: in a thread of the pit it held the
    interpreter's lock from the ingest for seconds at 2,000 tables), at a lower priority; a
    child killed mid-life is said as a failed step, the next step starts a new one, which reads
    the saved state: no round is taken twice, none is lost, no alarm is raised twice. A SIGTERM
    (systemd stops every process of the unit) leaves it to the pit to end the child."""
    import os
    import signal

    from pit.floorwatch import NICE, FloorProcess

    store = _store(db_url)
    start = datetime.now(UTC) - timedelta(minutes=5)
    tables = _tables(store, 4, start)
    _deal(store, tables, 8, start)
    floor = FloorProcess(db_url, FloorBudget(tables=4))
    try:
        first = floor.step()
        child = floor.pid()
        assert child is not None and child != os.getpid()
        assert os.getpriority(os.PRIO_PROCESS, child) >= os.getpriority(os.PRIO_PROCESS, 0) + min(
            NICE, 19 - os.getpriority(os.PRIO_PROCESS, 0)
        )
        assert _one(store, "SELECT count(*) FROM rounds WHERE pooled = 0")[0] == 0
        # A stop's SIGTERM to every process of the unit is the pit's to act on, not the child's.
        os.kill(child, signal.SIGTERM)
        time.sleep(0.5)
        assert floor.step() == [] and floor.pid() == child
        os.kill(child, signal.SIGKILL)
        _deal(store, tables, 6, start + timedelta(minutes=1))
        try:
            floor.step()
            raise AssertionError("a dead child's step was said to have run")
        except Exception as exc:
            assert "terminated abruptly" in str(exc) or type(exc).__name__ == "BrokenProcessPool"
        second = floor.step()  # a new child, the saved state
        assert floor.pid() not in (None, child)
        assert _one(store, "SELECT count(*) FROM rounds WHERE pooled = 0")[0] == 0
        state = json.loads(_one(store, "SELECT state FROM floor_protection")[0])
        assert state  # saved by the children, read again by the second
        raised = _one(store, "SELECT count(*) FROM record_alarms WHERE kind = 'pooled_protection'")
        assert raised[0] == len(first) + len(second) == 1  # the RNG model's finding, once
    finally:
        floor.close()


def test_the_floors_process_ends_when_the_pit_is_killed(db_url: str, tmp_path: Any) -> None:
    """A pit killed with SIGKILL (the OOM killer, kill -9) tells its floor's process nothing:
    the child sees it is orphaned and ends, its step rolled back, instead of living on idle
    with a database connection (found by bench/pit.py's restarts)."""
    import os
    import signal
    import subprocess
    import sys

    store = _store(db_url)
    start = datetime.now(UTC) - timedelta(minutes=5)
    _deal(store, _tables(store, 2, start), 3, start)
    script = (
        "import sys, time\n"
        "from pit.floorwatch import FloorProcess\n"
        "from pit.pooling import FloorBudget\n"
        "floor = FloorProcess(sys.argv[1], FloorBudget(tables=2))\n"
        "floor.step()\n"
        "print(floor.pid(), flush=True)\n"
        "time.sleep(600)\n"
    )
    pit = subprocess.Popen([sys.executable, "-c", script, db_url], stdout=subprocess.PIPE)
    try:
        assert pit.stdout is not None
        child = int(pit.stdout.readline())
        os.kill(child, 0)  # alive
        pit.send_signal(signal.SIGKILL)
        pit.wait(30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                stat = Path(f"/proc/{child}/stat").read_text()
            except FileNotFoundError:
                break
            if stat.rsplit(")", 1)[1].split()[0] == "Z":  # ended, not yet reaped by init
                break
            time.sleep(0.1)
        else:
            os.kill(child, signal.SIGKILL)
            raise AssertionError("the floor's process outlived its pit")
    finally:
        if pit.poll() is None:
            pit.kill()
            pit.wait()
