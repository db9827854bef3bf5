"""A key registered late leaves no hole (issue 39): a table that publishes before IT adds its
line (or while the wrong config's key is registered) has its messages refused and kept
(``pit.awaiting``), its tile and page say how many wait, and when the keys file gains the key
they are judged again and stored, so the casino's copy starts at the table's first seq with no
gap. The keys file is re-read by its content: an edit that keeps its size and mtime is seen.
Attacked: a forgery under the table's name is never stored by the late registration, and a
flood under a made-up name is bounded."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from controller.feed_signature import FeedSigner
from pit.awaiting import AwaitingKeys
from pit.keys import FeedKeys, keys_line
from pit.store import Incoming, Store, migrate
from simulators.feed import SimTable, sim_signer, wire
from tests.pit.conftest import KEY, feed_keys_file

ROOT = "casino/demo/paigow/"


def _rounds(table: SimTable, n: int, signer: FeedSigner | None = None) -> list[Incoming]:
    items: list[Incoming] = []
    for _ in range(n):
        for topic, body in table.next_round(datetime.now(UTC)):
            items.append(Incoming(topic, wire(body, signer), False, time.time()))
    return items


def test_messages_before_the_key_is_registered_are_stored_once_it_is(
    db_url: str, tmp_path: Path
) -> None:
    migrate(db_url)
    keys_file = feed_keys_file(tmp_path / "feed-keys", ["PG-01"])
    store = Store(db_url, root=ROOT, feed_keys=FeedKeys(path=keys_file))
    table = SimTable("PG-05", key=KEY)
    try:
        early = _rounds(table, 9)
        outcome = store.ingest(early)
        assert outcome.stored == 0 and outcome.awaiting == len(early)
        assert "key_unregistered" in [a["kind"] for a in outcome.alarms]
        # Registered late: the next batch takes what waited first, then its own.
        keys_file.write_text(
            keys_file.read_text() + keys_line("PG-05", sim_signer("PG-05").public_key)
        )
        late = _rounds(table, 1)
        outcome = store.ingest(late)
        assert outcome.rejudged == len(early) and outcome.stored == len(early) + len(late)
        assert store.pages.seqs("PG-05") == list(range(1, table.seq + 1))
        [tile] = store.pages.tiles(["PG-05"])
        assert tile["first_seq"] == 1 and tile["open_gaps"] == 0 and tile["awaiting_key"] == 0
        assert store.db.all("SELECT count(*) FROM missing WHERE table_id = 'PG-05'") == [(0,)]
        assert store.db.all("SELECT count(*) FROM awaiting_key") == [(0,)]
    finally:
        store.close()


def test_the_wrong_key_first_then_the_right_one_and_the_tile_says_how_many_wait(
    db_url: str, tmp_path: Path
) -> None:
    """The table is registered, but with another table's config's key: its tile says its
    messages wait for a key (never "missing none"); the right line added, its copy is whole."""
    migrate(db_url)
    wrong = FeedSigner(Ed25519PrivateKey.generate())
    keys_file = tmp_path / "feed-keys"
    keys_file.write_text(keys_line("PG-07", wrong.public_key))
    store = Store(db_url, root=ROOT, feed_keys=FeedKeys(path=keys_file))
    table = SimTable("PG-07", key=KEY)
    try:
        first = _rounds(table, 4)
        outcome = store.ingest(first)
        assert outcome.stored == 0 and "key_changed" in {a["kind"] for a in outcome.alarms}
        [tile] = store.pages.tiles(["PG-07"])
        assert tile["awaiting_key"] == len(first)
        keys_file.write_text(keys_line("PG-07", sim_signer("PG-07").public_key))
        assert store.ingest([]).stored == len(first)  # even a batch of nothing takes them
        assert store.pages.seqs("PG-07") == list(range(1, table.seq + 1))
        assert store.pages.tiles(["PG-07"])[0]["awaiting_key"] == 0
    finally:
        store.close()


def test_a_forgery_in_the_tables_name_is_not_stored_by_the_late_registration(
    db_url: str, tmp_path: Path
) -> None:
    """The adversary publishes under PG-05's name with a key of its own before PG-05 is
    registered: kept like the table's own, but when PG-05's real key is registered it is judged
    again and refused (its key id is not the registered one: it never even leaves the wait)."""
    migrate(db_url)
    keys_file = feed_keys_file(tmp_path / "feed-keys", ["PG-01"])
    store = Store(db_url, root=ROOT, feed_keys=FeedKeys(path=keys_file))
    attacker = FeedSigner(Ed25519PrivateKey.generate())
    try:
        forged = _rounds(SimTable("PG-05", key=KEY), 2, attacker)
        genuine = _rounds(SimTable("PG-05", key=KEY, seed=9), 2)
        assert store.ingest(forged + genuine).stored == 0
        keys_file.write_text(
            keys_file.read_text() + keys_line("PG-05", sim_signer("PG-05").public_key)
        )
        assert store.ingest([]).stored == len(genuine)
        bodies = store.db.all("SELECT body FROM messages WHERE table_id = 'PG-05'")
        assert all(attacker.key_id not in str(b) for (b,) in bodies)
        left = store.db.all("SELECT key_id, count(*) FROM awaiting_key GROUP BY key_id")
        assert left == [(attacker.key_id, len(forged))]  # still refused, still waiting
    finally:
        store.close()


def test_the_wait_is_bounded_per_table(db_url: str, tmp_path: Path) -> None:
    migrate(db_url)
    store = Store(db_url, root=ROOT, feed_keys=FeedKeys(path=feed_keys_file(tmp_path / "k")))
    store.awaiting = AwaitingKeys(store.db.all, store.db.x, per_table=5)
    try:
        outcome = store.ingest(_rounds(SimTable("PG-66", key=KEY), 4))
        assert outcome.rejected > 5 and outcome.awaiting == 5
        assert store.db.all("SELECT count(*) FROM awaiting_key") == [(5,)]
    finally:
        store.close()


def test_an_edit_that_keeps_the_size_and_mtime_is_seen(db_url: str, tmp_path: Path) -> None:
    """The keys file is re-read by its content: a key removed with the file's size and mtime
    kept as they were is no longer trusted."""
    migrate(db_url)
    keys_file = feed_keys_file(tmp_path / "feed-keys", ["PG-01", "PG-02"])
    store = Store(db_url, root=ROOT, feed_keys=FeedKeys(path=keys_file))
    table = SimTable("PG-02", key=KEY)
    try:
        assert store.ingest(_rounds(table, 1)).rejected == 0
        before = keys_file.stat()
        text = keys_file.read_text()
        line = next(line for line in text.splitlines(keepends=True) if line.startswith("PG-02"))
        keys_file.write_text(text.replace(line, "#" + " " * (len(line) - 2) + "\n"))
        os.utime(keys_file, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = keys_file.stat()
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        outcome = store.ingest(_rounds(table, 1))
        assert outcome.stored == 0 and outcome.rejected > 0
        assert {a["kind"] for a in outcome.alarms} == {"key_unregistered"}
    finally:
        store.close()
