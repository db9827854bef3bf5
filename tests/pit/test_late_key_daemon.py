"""A real table daemon started before IT registered its key with the pit (issue 39): its first
rounds are refused and kept, its key registered while it deals, and the pit's copy of it is then
complete: every round of its journal, seqs from 1 with no gap, none waiting."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from controller.mqtt.feed_key import create_feed_key
from pit.keys import keys_line
from pit.store import Store
from simulators.mosquitto import Mosquitto
from simulators.tables import TableDaemon, table_mqtt_section
from tests.pit.conftest import KEY, feed_keys_file
from tests.pit.test_tables import (
    _deal_and_close,
    _journal_rounds,
    _open_gaps,
    _outbox,
    _pit_process,
    _unsent,
    _wait,
)


def _awaiting(store: Store) -> int:
    return int(store.db.all("SELECT count(*) FROM awaiting_key")[0][0])


async def test_a_table_registered_after_it_started_has_a_whole_copy(
    broker: Mosquitto, db_url: str, tmp_path: Path
) -> None:
    key_file = tmp_path / "checkpoint.key"
    key_file.write_text(KEY.hex() + "\n")
    key_file.chmod(0o600)
    keys = feed_keys_file(tmp_path / "feed-keys", ["PG-01"])  # not PG-03 yet
    (tmp_path / "PG-03").mkdir()
    signer, _ = create_feed_key(tmp_path / "PG-03" / "feed.key")  # made at its install
    config = tmp_path / "pit.toml"
    config.write_text(
        f'[site]\nid = "demo"\n[broker]\nport = {broker.port}\nprotocol = "5"\n'
        f'client_id = "pit-late"\n[database]\nurl = "{db_url}"\n'
        f'[record]\ncheckpoint_key_file = "{key_file}"\nfeed_keys_file = "{keys}"\n'
        "[web]\nenabled = false\n"
    )
    extra = table_mqtt_section(broker.port, checkpoint_key_file=key_file)
    table = TableDaemon("PG-03", tmp_path / "PG-03", extra=extra, seed=3)
    pit = _pit_process(config, tmp_path / "pit.log")
    store: Store | None = None
    try:
        await _wait(lambda: "pit_subscribed" in (tmp_path / "pit.log").read_text(), 60)
        await table.start()
        store = Store(db_url, root="casino/demo/paigow/")
        for _ in range(3):
            await _deal_and_close([table])
        await _wait(lambda: _awaiting(store) >= 6, 60)
        assert store.pages.seqs("PG-03") == []
        keys.write_text(keys.read_text() + keys_line("PG-03", signer.public_key))
        await _deal_and_close([table])
        await _wait(lambda: _outbox(table.journal) == 0, 60)
        # Gaps (a status naming seqs still on their way) fill while the table runs and can
        # answer a resend; then it closes.
        await _wait(lambda: store.pages.counts()["gaps_open"] == 0, 60)
        await table.close()
        expected = _journal_rounds(table.journal)
        await _wait(
            lambda: {r[0] for r in store.db.all("SELECT round_id FROM rounds")} >= expected, 60
        )
        with sqlite3.connect(f"file:{table.journal}?mode=ro", uri=True) as conn:
            sent = int(conn.execute("SELECT max(seq) FROM sent").fetchone()[0] or 0)
            pending = {int(r[0]) for r in conn.execute("SELECT seq FROM outbox")}
        # Every message the broker took from the table (its ``sent``), in the copy once and in
        # order. Beyond it only what left as the table closed, before the broker's answer came
        # back (still pending in its outbox): a loaded machine's close can leave one so.
        await _wait(lambda: set(range(1, sent + 1)) <= set(store.pages.seqs("PG-03")), 120)
        seqs = store.pages.seqs("PG-03")
        print(f"PG-03 registered late: the pit holds seqs {seqs[0]}..{seqs[-1]} ({len(seqs)}), "
              f"the table sent 1..{sent}; rounds {len(expected)} of {len(expected)}")  # fmt: skip
        assert seqs[:sent] == list(range(1, sent + 1))
        assert set(seqs[sent:]) <= pending, (seqs[sent:], pending)
        # Open after the close: only what the table has not sent yet (tests/pit/test_tables).
        await _wait(lambda: _open_gaps(store) <= _unsent([table]), 60)
        assert _awaiting(store) == 0
        assert "pit_key_registered" in (tmp_path / "pit.log").read_text()
    finally:
        if store is not None:
            store.close()
        pit.terminate()
        await asyncio.to_thread(pit.wait, 30)
        await table.close()
