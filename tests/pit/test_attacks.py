"""Issue 30, "The floor trusts nothing": each row of the issue's table as an attack, on SQLite and
PostgreSQL, each failing on the code before the fix.

- One poison message (JSON 100,000 deep, a UTF-16 envelope, seq 2^63, a lone surrogate, a NUL
  in a string, a NUL in what becomes a reject) over a real Mosquitto: the pit keeps it as a
  reject, acknowledges it, and stores the next good message at once with no reconnect.
- A round, a player's setting, an alarm or an acknowledgement on one table's topic naming
  another table's round or alarm: refused, a record alarm, the other table's copy untouched.
- A status claiming the year 9999: not the table's state; the real ``offline`` after it shows.
- A round numbered 10^9: refused; the tile's last round keeps following the table's seq.
- seq 2^62 after 5: refused; gap detection stays on; no flood of ``missing`` rows.
- A burst of rejects on one table's topic: a record alarm; rejects counted on the tile.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from controller.messages import AlarmAckPayload, AlarmPayload, envelope
from pit.store import Incoming, Store, migrate
from simulators.feed import SimTable, SimulatedKeys, wire
from simulators.mosquitto import Mosquitto
from tests.pit.conftest import KEY, RunningIngest, make_config, publish, read_store

ROOT = "casino/demo/paigow/"


def _store(url: str) -> Store:
    migrate(url)
    return Store(url, default_checkpoint_key=KEY, root=ROOT, feed_keys=SimulatedKeys())


def _incoming(
    messages: list[tuple[str, dict[str, Any]]], at: float | None = None
) -> list[Incoming]:
    return [Incoming(t, wire(b), False, time.time() if at is None else at) for t, b in messages]


def _alarm(table: SimTable, payload: AlarmPayload | AlarmAckPayload) -> tuple[str, dict[str, Any]]:
    table.seq += 1
    body = envelope(
        payload,
        msg_id=f"{table.table_id}-A{table.seq}",
        table_id=table.table_id,
        seq=table.seq,
        time=datetime.now(UTC),
    )
    return f"{table.prefix}{payload.TOPIC}", body


def _poison(table: SimTable) -> list[tuple[str, str, bytes]]:
    """(what, topic, bytes): each one message that stopped the pit before issue 30."""
    now = datetime.now(UTC)
    topic, good = table.next_round(now)[0]
    utf16 = json.dumps(good).encode("utf-16")
    table.seq += 1
    huge = dict(good, seq=2**63, msg_id=f"{table.table_id}-HUGE")
    alarm_topic, alarm = _alarm(
        table, AlarmPayload(code="deal_timeout", severity="warning", detail="x")
    )
    surrogate = wire(alarm).replace(b'"detail":"x"', b'"detail":"\\ud800"')
    nul = wire(alarm).replace(b'"detail":"x"', b'"detail":"a\\u0000b"')
    deep = b"[" * 100_000 + b"]" * 100_000
    return [
        ("JSON 100,000 deep", topic, deep),
        ("an envelope in UTF-16", topic, utf16),
        ("seq 2^63", topic, wire(huge)),
        ("a lone surrogate", alarm_topic, surrogate),
        ("a NUL in a string", alarm_topic, nul),
        ("a NUL in a reject", topic, b"not json \x00 at all"),
    ]


async def test_no_poison_message_stops_the_pit(broker: Mosquitto, db_url: str) -> None:
    """A real Mosquitto, the pit's real ingest: after each poison message the next good one is
    stored at once, on the same connection, and the poison is a reject (escaped, no NUL)."""
    config = make_config(broker.port, db_url, protocol="5", client_id="pit-poison")
    table = SimTable("PG-01", key=KEY)
    async with RunningIngest(config) as pit:
        await publish(broker.port, [(t, wire(b)) for t, b in [table.status(datetime.now(UTC))]])
        await pit.until(lambda: pit.ingest.stats.stored == 1, 10)
        poison = _poison(table)
        for n, (what, topic, body) in enumerate(poison, start=1):
            good = [(t, wire(b)) for t, b in table.next_round(datetime.now(UTC))]
            await publish(broker.port, [(topic, body), *good])
            want = pit.ingest.stats.stored + len(good)
            try:
                await pit.until(lambda n=n: pit.ingest.stats.rejected >= n, 10)
                await pit.until(lambda want=want: pit.ingest.stats.stored >= want, 10)
            except TimeoutError:
                raise AssertionError(f"{what}: the next good message was not stored") from None
        assert pit.ingest.stats.connects == 1, "the pit reconnected"
        assert pit.ingest.stats.database_errors == 0
    store = read_store(config)
    try:
        rejects = store.db.all("SELECT reason, body, table_id FROM rejects ORDER BY received_at")
        assert len(rejects) == len(poison)
        assert all("\x00" not in r + b and len(b) <= 16 * 1024 for r, b, _ in rejects)
        assert {t for _, _, t in rejects} == {"PG-01"}
        reasons = " | ".join(r for r, _, _ in rejects)
        for expected in ("nested deeper", "not UTF-8", "out of range", "surrogate", "NUL"):
            assert expected in reasons, reasons
        assert store.pages.seqs("PG-01")[-1] == table.seq
        tile = store.pages.tiles(["PG-01"])[0]
        assert tile["rejected_last_hour"] == len(poison)
    finally:
        store.close()


def test_a_table_speaks_only_for_itself(db_url: str) -> None:
    """On PG-08's topic: PG-07's settled round sent again as void, a player's setting on it, an
    alarm and an acknowledgement of PG-07's alarm. Each is refused with a record alarm."""
    store = _store(db_url)
    pg07, pg08 = SimTable("PG-07", key=KEY, seed=7), SimTable("PG-08", key=KEY, seed=8)
    now = datetime.now(UTC)
    first = pg07.next_round(now)
    store.ingest(_incoming(first))
    store.ingest(_incoming(pg08.next_round(now)))
    alarm = AlarmPayload(code="deal_timeout", severity="critical", detail="7's", alarm_id="A-7")
    store.ingest(_incoming([_alarm(pg07, alarm)]))
    round_id = first[0][1]["payload"]["round_id"]
    void = json.loads(json.dumps(first[0][1]))
    pg08.seq += 1
    void.update(table_id="PG-08", seq=pg08.seq, msg_id="PG-08-VOID")
    void["payload"]["status"] = "void"
    ack = AlarmAckPayload(
        alarm_id="A-7", code="deal_timeout", by="S100", acknowledged_at=now, channel="mqtt"
    )
    foreign = [(f"{pg08.prefix}round", void), _alarm(pg08, ack)]
    outcome = store.ingest(_incoming(foreign))
    assert outcome.rejected == 2 and outcome.stored == 0
    assert [a["kind"] for a in outcome.alarms] == ["foreign_id"]
    assert store.db.all("SELECT table_id, status FROM rounds WHERE round_id = ?", (round_id,)) == [
        ("PG-07", "settled")
    ]
    assert store.pages.round_message(round_id) is not None
    assert store.db.all("SELECT acked_by FROM alarms WHERE alarm_id = 'A-7'") == [(None,)]
    kinds = [a["kind"] for a in store.pages.tiles(["PG-08"])[0]["record_alarms"]]
    assert kinds == ["foreign_id"]
    assert store.pages.tiles(["PG-07"])[0]["record_alarms"] == []
    store.close()


def test_state_follows_the_tables_seq_never_a_claimed_time(db_url: str) -> None:
    """A status claiming 9999-12-31 is not the table's state (a record alarm); the real
    ``offline`` after it shows. A round numbered 10^9 is refused; the next real round shows."""
    store = _store(db_url)
    table = SimTable("PG-05", key=KEY)
    now = datetime.now(UTC)
    store.ingest(_incoming([table.status(now), *table.next_round(now)]))
    topic, forged = table.status(now)
    forged["time"] = "9999-12-31T23:59:59Z"
    outcome = store.ingest(_incoming([(topic, forged)]))
    assert [a["kind"] for a in outcome.alarms] == ["time_implausible"]
    store.ingest(_incoming([table.status(datetime.now(UTC), state="offline")]))
    assert store.pages.tiles(["PG-05"])[0]["state"] == "offline"
    # Back online; then its last will, built when it connected 30 days ago, seq no newer.
    will = table.status(now - timedelta(days=30), state="offline")
    store.ingest(_incoming([table.status(datetime.now(UTC))]))
    assert store.pages.tiles(["PG-05"])[0]["state"] != "offline"
    assert store.ingest(_incoming([will])).alarms == []
    assert store.pages.tiles(["PG-05"])[0]["state"] == "offline"
    absurd = table.next_round(now)
    absurd[0][1]["payload"]["round_seq"] = 10**9
    outcome = store.ingest(_incoming(absurd[:1]))
    assert outcome.rejected == 1 and [a["kind"] for a in outcome.alarms] == ["round_jump"]
    table.seq -= len(absurd) - 1  # the refused round's seq is reused by the next real one
    table.round_seq -= 1
    store.ingest(_incoming(table.next_round(datetime.now(UTC))))
    assert store.pages.tiles(["PG-05"])[0]["last_round"]["round_seq"] == 2
    store.close()


def test_an_absurd_seq_never_switches_gap_detection_off(db_url: str) -> None:
    store = _store(db_url)
    table = SimTable("PG-06", key=KEY)
    now = datetime.now(UTC)
    messages = table.next_round(now) + table.next_round(now)
    store.ingest(_incoming(messages))
    high = table.seq
    topic, body = table.next_round(now)[0]
    body["seq"] = 2**62  # beyond any integer the pit takes
    jump = dict(body, seq=high + 100_001, msg_id="PG-06-JUMP")  # a number, but a jump
    outcome = store.ingest(_incoming([(topic, body), (topic, jump)]))
    assert outcome.rejected == 2 and [a["kind"] for a in outcome.alarms] == ["seq_jump"]
    assert store.db.all("SELECT count(*) FROM missing") == [(0,)]
    # The next real message skips one seq: reported missing at once (detection is on).
    table.seq = high + 1
    later = table.next_round(now)
    outcome = store.ingest(_incoming(later))
    assert outcome.gaps_reported == [("PG-06", high + 1)]
    assert store.db.all("SELECT count(*) FROM missing") == [(1,)]
    store.close()


def test_a_burst_of_rejects_is_a_record_alarm(db_url: str) -> None:
    store = _store(db_url)
    table = SimTable("PG-04", key=KEY)
    store.ingest(_incoming([table.status(datetime.now(UTC))]))
    junk = [Incoming(f"{table.prefix}round", b"junk %d" % i, False, time.time()) for i in range(25)]
    outcome = store.ingest(junk)
    assert outcome.rejected == 25
    assert [a["kind"] for a in outcome.alarms] == ["reject_burst"]
    assert store.pages.tiles(["PG-04"])[0]["rejected_last_hour"] == 25
    store.close()


def test_an_old_retained_state_far_below_the_copy_is_no_jump(db_url: str) -> None:
    """A pit that meets a table late: its retained device states (seq 3) arrive before and again
    after (MQTT 3.1.1 resends them on every subscribe) live seq 200,001: neither is refused."""
    store = _store(db_url)
    table = SimTable("PG-03", key=KEY)
    now = datetime.now(UTC)
    retained = [Incoming(t, wire(b), True, time.time()) for t, b in table.devices(now)]  # seqs 1, 2
    table.seq = 200_000
    store.ingest(retained)
    store.ingest(_incoming(table.next_round(now)))
    outcome = store.ingest(retained)
    assert outcome.rejected == 0 and outcome.alarms == [] and outcome.duplicates == len(retained)
    assert store.pages.tiles(["PG-03"])[0]["first_seq"] == 200_001
    store.close()


def test_what_the_database_refuses_of_one_message_is_its_reject_alone(db_url: str) -> None:
    """Past every check, a message the database still refuses (here a NUL in the topic, which
    PostgreSQL's text cannot hold) rolls back to its own savepoint: it is a reject, the table
    row it made is gone with it, and the rest of the batch is stored."""
    store = _store(db_url)
    table = SimTable("PG-09", key=KEY)
    now = datetime.now(UTC)
    topic, first = table.next_round(now)[0]
    rest = _incoming(table.next_round(now))
    odd = Incoming(topic + "\x00", wire(first), False, time.time())
    outcome = store.ingest([odd, *rest])
    assert outcome.stored == len(rest) + (1 if store.db.kind == "sqlite" else 0)
    if store.db.kind == "postgresql":
        assert outcome.rejected == 1
        reason = store.db.all("SELECT reason, topic FROM rejects")[0]
        assert "refused by the database" in reason[0] and "\x00" not in reason[1]
    assert store.pages.table_ids() == ["PG-09"]
    store.close()


def test_a_signed_message_without_a_true_envelope_is_a_reject_by_the_tables_own_model(
    db_url: str,
) -> None:
    """The envelope is checked by the model the table's messages are written by
    (``controller.messages.Envelope``; issue 41: the pit checked it by hand beside it): each of
    these is the table's own signature over a header that is not one, and a reject naming the
    field, never stored."""
    store = _store(db_url)
    table = SimTable("PG-05", key=KEY, seed=5)
    _, good = _alarm(table, AlarmPayload(code="deal_timeout", severity="warning", detail="x"))
    bad = {
        "seq": dict(good, seq=True),
        "seq ": dict(good, seq="7"),
        "msg_id": dict(good, msg_id=""),
        "payload": dict(good, payload=["not", "an", "object"]),
        "table_id": dict(good, table_id="PG-05" * 20),
    }
    for field_name, body in bad.items():
        out = store.ingest(_incoming([(f"{table.prefix}alarm", body)]))
        assert out.stored == 0 and out.rejected == 1, field_name
        row = store.db.one("SELECT reason FROM rejects ORDER BY received_at DESC LIMIT 1")
        assert row is not None
        reason = row[0]
        if field_name != "table_id":  # a long name is no name on this topic, first of all
            assert reason.startswith(f"no envelope: {field_name.strip()}:"), reason
    assert store.ingest(_incoming([(f"{table.prefix}alarm", good)])).stored == 1
    store.close()
