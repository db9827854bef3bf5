"""Every message the table's own signed words (issue 30), attacked over a real Mosquitto and the
pit's real ingest, on SQLite and PostgreSQL: an unsigned message, one signed by another key, one
changed after signing, one carrying another message's signature, and another table's genuine
message on this table's topic are each a reject with a record alarm, never the table's state,
and the next good message is stored at once on the same connection. A table the pit has no key
for is refused with an alarm naming the key id it signs with. And the checkpoints' links, live:
a real table whose journal is rewritten, and one whose tail is cut, raise a record alarm at their
next checkpoint (tests/mqtt/test_checkpoints.py made them on the table's side)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.feed_signature import FeedSigner
from pit.keys import FeedKeys
from pit.sessions import Sessions
from pit.store import Incoming, Store, migrate
from simulators.feed import SimTable, sim_signer, unsigned, wire
from simulators.mosquitto import Mosquitto
from simulators.tables import TableDaemon, table_mqtt_section
from tests.forgery import cut_last_round, rewrite_row
from tests.pit.conftest import KEY, RunningIngest, feed_keys_file, make_config, publish, read_store
from tests.pit.test_tables import _outbox, _wait

Attack = tuple[str, Callable[[SimTable, SimTable], bytes], str, str]


def _round(table: SimTable) -> dict[str, Any]:
    return table.next_round(datetime.now(UTC))[0][1]


def _changed(table: SimTable, other: SimTable) -> bytes:
    """A genuine round, its dealer changed after signing (the sig kept)."""
    data = json.loads(wire(_round(table)))
    data["payload"]["dealer_id"] = "D-666"
    return json.dumps(data).encode()


def _copied(table: SimTable, other: SimTable) -> bytes:
    """A forged round carrying the signature of a genuine message of the same table."""
    genuine = json.loads(wire(_round(table)))
    forged = _round(table)
    forged["sig"] = genuine["sig"]
    return json.dumps(forged).encode()


ATTACKS: list[Attack] = [
    ("unsigned", lambda t, o: unsigned(_round(t)), "unsigned", "unsigned"),
    (
        "signed by another key",
        lambda t, o: FeedSigner(Ed25519PrivateKey.generate()).sign(_round(t)),
        "key_changed",
        "key_changed",
    ),
    ("a field changed after signing", _changed, "bad_signature", "forged"),
    ("a signature copied from another message", _copied, "bad_signature", "forged"),
    ("another table's message on its topic", lambda t, o: wire(_round(o)), "wrong_table",
     "wrong_table"),
]  # fmt: skip


async def test_a_message_not_the_tables_own_signed_words_is_a_reject_with_an_alarm(
    broker: Mosquitto, db_url: str
) -> None:
    config = make_config(broker.port, db_url, protocol="5", client_id="pit-signed")
    table, other = SimTable("PG-01", key=KEY), SimTable("PG-02", key=KEY)
    # The forgeries are made from a copy of PG-01's feed (the table's own goes on unbroken).
    shadow = SimTable("PG-01", key=KEY, seed=99)
    topic = f"{table.prefix}round"
    async with RunningIngest(config) as pit:
        await publish(broker.port, [(t, wire(b)) for t, b in [table.status(datetime.now(UTC))]])
        await pit.until(lambda: pit.ingest.stats.stored == 1, 10)
        store = read_store(config)
        try:
            for n, (what, attack, reason, kind) in enumerate(ATTACKS, start=1):
                forged = attack(shadow, other)
                good = [(t, wire(b)) for t, b in table.next_round(datetime.now(UTC))]
                want = pit.ingest.stats.stored + len(good)
                await publish(broker.port, [(topic, forged), *good])
                try:
                    await pit.until(lambda n=n: pit.ingest.stats.rejected >= n, 10)
                    await pit.until(lambda want=want: pit.ingest.stats.stored >= want, 10)
                except TimeoutError:
                    raise AssertionError(f"{what}: not refused, or the next not stored") from None
                (last,) = store.db.all(
                    "SELECT reason FROM rejects ORDER BY received_at DESC LIMIT 1"
                )
                assert last[0].startswith(reason), (what, last[0])
                alarms = store.pages.tiles(["PG-01"])[0]["record_alarms"]
                assert [a["kind"] for a in alarms] == [kind], (what, alarms)
                assert Sessions(store.db).acknowledge_record_alarm(alarms[0]["id"], "S100")
            assert pit.ingest.stats.connects == 1 and pit.ingest.stats.database_errors == 0
            # None of them is the table's state: its copy holds only its own messages.
            dealers = store.db.all("SELECT DISTINCT dealer_id FROM rounds WHERE table_id = 'PG-01'")
            assert dealers == [("D-100",)]
            assert store.pages.seqs("PG-01") == list(range(1, table.seq + 1))
            assert store.pages.table_ids() == ["PG-01"]
            bodies = [json.loads(b) for (b,) in store.db.all("SELECT body FROM messages")]
            assert all(b["sig"]["key_id"] == sim_signer("PG-01").key_id for b in bodies)
        finally:
            store.close()


def test_a_table_without_a_registered_key_is_refused_naming_its_key(
    db_url: str, tmp_path: Path
) -> None:
    """No line for PG-05: refused, alarmed with the key id it signs with; once IT adds its
    line (the file read again when it changes), its next message is stored."""
    migrate(db_url)
    keys_file = feed_keys_file(tmp_path / "feed-keys", ["PG-01"])
    store = Store(db_url, root="casino/demo/paigow/", feed_keys=FeedKeys(path=keys_file))
    table = SimTable("PG-05", key=KEY)
    try:
        items = [Incoming(t, wire(b), False, time.time()) for t, b in table.next_round(
            datetime.now(UTC))]  # fmt: skip
        outcome = store.ingest(items)
        assert outcome.stored == 0 and outcome.rejected == len(items)
        assert [a["kind"] for a in outcome.alarms] == ["key_unregistered"]
        assert sim_signer("PG-05").key_id in outcome.alarms[0]["detail"]
        assert "PG-05" not in store.pages.table_ids()  # any name can be published under: no tile
        # A registered table never heard yet: a forgery in its name shows on its tile at once.
        forged = SimTable("PG-01", key=KEY).next_round(datetime.now(UTC))[0]
        store.ingest([Incoming(forged[0], unsigned(forged[1]), False, time.time())])
        assert [a["kind"] for a in store.pages.tiles(["PG-01"])[0]["record_alarms"]] == ["unsigned"]
        keys_file.write_text(keys_file.read_text() + feed_keys_file(
            tmp_path / "more", ["PG-05"]).read_text())  # fmt: skip
        waited = len(items)  # refused for their key alone: judged again now (issue 39)
        items = [Incoming(t, wire(b), False, time.time()) for t, b in table.next_round(
            datetime.now(UTC))]  # fmt: skip
        assert store.ingest(items).stored == waited + len(items)
    finally:
        store.close()


# --- the checkpoints' links, live, with real tables ------------------------------------------


def _rewrite(journal: Path) -> None:
    """The first dealt packet changed and every link after it recomputed: a whole chain."""
    with sqlite3.connect(journal) as conn:
        (row,) = conn.execute("SELECT min(id) FROM events WHERE kind = 'packet_dealt'").fetchone()
    rewrite_row(journal, row)


@pytest.mark.parametrize(
    ("change", "kind"), [(_rewrite, "chain_rewritten"), (cut_last_round, "chain_cut")]
)
async def test_a_real_tables_rewritten_or_cut_journal_is_a_live_record_alarm(
    broker: Mosquitto, db_url: str, tmp_path: Path, change: Callable[[Path], None], kind: str
) -> None:
    key_file = tmp_path / "checkpoint.key"
    key_file.write_text(KEY.hex() + "\n")
    key_file.chmod(0o600)
    keys = feed_keys_file(tmp_path / "feed-keys", daemons={"PG-07": tmp_path / "PG-07"})
    extra = f'[record]\nfeed_keys_file = "{keys}"\n'
    config = make_config(broker.port, db_url, protocol="5", client_id="pit-chain", extra=extra)
    section = table_mqtt_section(broker.port, checkpoint_key_file=key_file, protocol="5")
    table = TableDaemon("PG-07", tmp_path / "PG-07", extra=section, seed=7)
    try:
        async with RunningIngest(config) as pit:
            store = read_store(config)

            def checkpoints() -> int:
                rows = store.db.all("SELECT count(*) FROM checkpoints WHERE table_id = 'PG-07'")
                return int(rows[0][0])

            await table.start()
            for n in (1, 2):
                await table.deal()
                await pit.until(lambda n=n: checkpoints() >= n, 30)
            assert store.pages.tiles(["PG-07"])[0]["record_alarms"] == []  # the honest chain
            await _wait(lambda: _outbox(table.journal) == 0, 30)
            await table.stop()
            change(table.journal)
            await table.start()
            await table.deal()
            await pit.until(lambda: kind in _kinds(store), 30)
            valid = store.db.all("SELECT DISTINCT signature FROM checkpoints")
            assert valid == [("valid",)]  # genuinely the table's checkpoints, link included
            store.close()
    finally:
        await table.close()


def _kinds(store: Store) -> list[str]:
    return [a["kind"] for a in store.pages.tiles(["PG-07"])[0]["record_alarms"]]
