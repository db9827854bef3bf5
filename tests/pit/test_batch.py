"""Issue 31, the ingest at the database's pace: a batch's statements bounded whatever its size;
two pits (two Stores, two connections) ingesting interleaved batches of the same tables at once
on PostgreSQL never deadlock and store every message once; and the judging's fast path gives
the strict path's verdicts, with the same reasons."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from pit import judge
from pit.store import Incoming, Limits, Store, migrate
from simulators.feed import SimTable, SimulatedKeys, sim_signer, wire
from tests.pit.conftest import KEY, postgres_database

ROOT = "casino/demo/paigow/"


def _feed(tables: list[SimTable], rounds: int) -> list[Incoming]:
    now = datetime.now(UTC)
    out: list[tuple[str, dict[str, Any]]] = []
    for t in tables:
        out += [t.status(now), *t.devices(now)]
    for _ in range(rounds):
        for t in tables:
            out += t.next_round(now)
    return [Incoming(topic, wire(body), False, time.time()) for topic, body in out]


def _store(url: str, grace: float = 0.0) -> Store:
    return Store(
        url, root=ROOT, default_checkpoint_key=KEY, feed_keys=SimulatedKeys(),
        limits=Limits(jump_gap_grace=grace, checkpoint_grace=grace),
    )  # fmt: skip


def _counting(store: Store) -> list[str]:
    """Every statement the store sends from now on (an executemany counts once)."""
    sent: list[str] = []
    x, xmany = store.db.x, store.db.xmany

    def counted(sql: str, params: Any = ()) -> Any:
        sent.append(sql)
        return x(sql, params)

    def counted_many(sql: str, rows: Any) -> None:
        sent.append(sql)
        xmany(sql, rows)

    store.db.x = counted  # type: ignore[method-assign]
    store.db.xmany = counted_many  # type: ignore[method-assign]
    return sent


@pytest.mark.parametrize("size", [40, 400])
def test_a_batch_costs_a_bounded_number_of_statements(db_url: str, size: int) -> None:
    """Once the tables are known, a batch is about a dozen statements however many messages
    it holds (before issue 31: about 4.9 a message)."""
    migrate(db_url)
    tables = [SimTable(f"B{i:03d}", key=KEY, seed=i + 1) for i in range(20)]
    store = _store(db_url)
    store.ingest(_feed(tables, 1))  # the tables' rows made
    feed = _feed(tables, 200)[:size]
    sent = _counting(store)
    out = store.ingest(feed)
    assert out.stored == len(feed) and out.rejected == 0
    assert len(sent) <= 16, sent
    store.close()


def test_gaps_reported_and_filled_cost_a_bounded_number_of_statements(db_url: str) -> None:
    """What two pits meet all the time (each holds seqs the other jumps over): a batch with
    every other message gone reports each gap, the next fills them, each in a bounded number of
    statements (before: an INSERT a gap and an UPDATE a fill, one at a time)."""
    migrate(db_url)
    tables = [SimTable(f"G{i:03d}", key=KEY, seed=i + 1) for i in range(20)]
    store = _store(db_url, grace=10.0)  # as a pit of a group: a skipped checkpoint waits
    store.ingest(_feed(tables, 1))
    feed = _feed(tables, 20)
    first, second = feed[::2], feed[1::2]
    sent = _counting(store)
    out = store.ingest(first)
    assert len(out.gaps_reported) > 400  # about one a message held back
    # A few more than a plain batch: the tables' rows change in more ways (one UPDATE each).
    assert len(sent) <= 30, sent
    sent.clear()
    filled = store.ingest(second)
    assert len(sent) <= 30, sent
    assert sorted(filled.gaps_filled) == sorted(out.gaps_reported)
    assert store.pages.counts()["gaps_open"] == 0 and store.pages.counts()["gaps_reported"] == len(
        out.gaps_reported
    )
    store.close()


@pytest.mark.parametrize("together", [True, False])
def test_a_stored_retained_message_above_the_copy_is_no_gap(db_url: str, together: bool) -> None:
    """A retained message stored before the copy began (the broker's old device state) lies
    above the first seqs the pit then gets: a later jump over it reports the seqs really
    missing, not the one stored (which would never fill: its copy is a duplicate). In one
    batch and in three."""
    migrate(db_url)
    table = SimTable("R001", key=KEY, seed=3)
    feed = [m for m in _feed([table], 3) if json.loads(m.payload)["schema"] != "paigow.status"]
    seq = {json.loads(m.payload)["seq"]: m for m in feed}
    retained = dataclasses.replace(seq[5], retained=True)
    batches = [[retained, seq[3], seq[7]]] if together else [[retained], [seq[3]], [seq[7]]]
    store = _store(db_url)
    reported = [g for b in batches for g in store.ingest(b).gaps_reported]
    assert sorted(reported) == [("R001", 4), ("R001", 6)]
    filled = store.ingest([seq[4], seq[6]])
    assert sorted(filled.gaps_filled) == [("R001", 4), ("R001", 6)]
    assert store.pages.counts()["gaps_open"] == 0
    store.close()


def _ingest_all(store: Store, batches: list[list[Incoming]], start: threading.Barrier,
                errors: list[BaseException]) -> None:  # fmt: skip
    try:
        for batch in batches:
            start.wait(30)
            store.ingest(batch)
    except BaseException as exc:  # the test asserts there was none
        errors.append(exc)
        start.abort()


def test_two_pits_interleaved_on_one_postgresql_never_deadlock() -> None:
    """Two Stores share a database and the tables, as two pits of a shared group do: each
    gets every other message (so each sees the other's seqs as jumps), in batches started
    together, one taking its batch's messages in reverse; the tables are new to both at the
    start. No deadlock (none in ``pg_stat_database``), every message stored once, every gap
    one pit reported filled by the other, and no record alarm: a checkpoint reaching one pit
    before the one it follows reached the other waits for it (the gaps' grace)."""
    with postgres_database() as url:
        migrate(url)
        tables = [SimTable(f"D{i:03d}", key=KEY, seed=i + 1) for i in range(40)]
        feed = _feed(tables, 12)
        halves = [feed[0::2], feed[1::2]]
        size = 60
        batches = [
            [h[i : i + size] for i in range(0, len(h), size)] for h in halves
        ]  # fmt: skip
        batches[1] = [list(reversed(b)) for b in batches[1]]
        rounds = min(len(batches[0]), len(batches[1]))
        stores = [_store(url, grace=60.0), _store(url, grace=60.0)]
        deadlocks = stores[0].db.one(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        )
        start = threading.Barrier(2)
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=_ingest_all, args=(s, b[:rounds], start, errors))
            for s, b in zip(stores, batches, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert errors == []
        for s, b in zip(stores, batches, strict=True):
            for batch in b[rounds:]:
                s.ingest(batch)
        check = stores[0]
        after = check.db.one(
            "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        )
        assert after == deadlocks
        assert check.pages.counts()["messages"] == len(feed)
        for t in tables:
            assert check.pages.seqs(t.table_id) == list(range(1, t.seq + 1))
        assert check.pages.counts()["gaps_open"] == 0
        assert check.db.all("SELECT kind, detail FROM record_alarms") == []
        assert check.db.all("SELECT * FROM checkpoint_waits") == []
        for s in stores:
            s.close()


def _signed_exactly(table_id: str, data: bytes) -> bytes:
    """``data`` (a JSON object's bytes, as they are) with a sig over exactly those bytes."""
    sig = json.dumps(sim_signer(table_id).signature(data), separators=(",", ":")).encode()
    return data[:-1] + b',"sig":' + sig + b"}"


def _cases() -> list[tuple[str, bytes]]:
    table = SimTable("F01", key=KEY, seed=3)
    now = datetime.now(UTC)
    _topic, body = table.next_round(now)[0]
    good = wire(body)
    canonical = good[: good.rindex(b',"sig":')] + b"}"
    deep = dict(body, extra=json.loads("[" * 40 + "]" * 40))
    big = dict(body, seq=2**60)
    spaced = json.dumps(json.loads(good), indent=1).encode()
    return [
        ("as the table signs it", good),
        ("a member twice, signed as it is", _signed_exactly(
            "F01", canonical.replace(b'{"msg_id":', b'{"msg_id":"x","msg_id":', 1))),
        ("nested 41 deep", wire(deep)),
        ("an integer beyond 2^53", wire(big)),
        ("a NUL escaped", wire(dict(body, extra="a\x00b"))),
        ("a quote in a string", wire(dict(body, extra='say "hi"'))),
        ("spaces: not the signed bytes, the same message", spaced),
        ("another table's topic", good.replace(b"F01", b"F02")),
        ("a forged signature", good[:-20] + b"0" * 17 + b'"}}'),
        ("the signature's S plus the group order (malleated)", _malleated(good)),
        ("signed exactly, by another key", _signed_by_another(canonical)),
    ]  # fmt: skip


#: The order of Ed25519's base point: a signature whose S is S + L verifies on a lax verifier.
_L = 2**252 + 27742317777372353535851937790883648493


def _malleated(good: bytes) -> bytes:
    at = good.rindex(b'"value":"') + len(b'"value":"')
    sig = bytes.fromhex(good[at : at + 128].decode())
    s = int.from_bytes(sig[32:], "little") + _L
    return good[:at] + (sig[:32] + s.to_bytes(32, "little")).hex().encode() + good[at + 128 :]


def _signed_by_another(canonical: bytes) -> bytes:
    """Canonical bytes signed by another key, under the registered key's id."""
    from controller.feed_signature import key_id

    other = Ed25519PrivateKey.generate()
    kid = key_id(sim_signer("F01").public_key)
    sig = {"alg": "ed25519", "key_id": kid, "value": other.sign(canonical).hex()}
    return canonical[:-1] + b',"sig":' + json.dumps(sig, separators=(",", ":")).encode() + b"}"


@pytest.mark.parametrize("verifier", ["libsodium", "cryptography"])
@pytest.mark.parametrize("name", [name for name, _ in _cases()])
def test_the_fast_path_gives_the_strict_paths_verdict(
    name: str, verifier: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each case, its fast path checking signatures with libsodium (pit.sodium) or with
    cryptography (where libsodium is not installed), against the strict path alone."""
    payload = dict(_cases())[name]
    keys = SimulatedKeys()
    if verifier == "libsodium":
        assert judge.FAST_VERIFY is not None, "libsodium23 is installed by make deb-tools"
    else:
        monkeypatch.setattr(judge, "FAST_VERIFY", None)

    def verdict() -> tuple[str, Any]:
        try:
            msg = judge.read(payload, "F01", keys.for_table)
        except judge.Refused as exc:
            return "refused", (exc.reason, exc.kind)
        return "stored", (msg.data, msg.payload)

    fast = verdict()
    monkeypatch.setattr(judge, "_fast", lambda *args: None)  # the strict path alone
    assert fast == verdict()
    if name == "as the table signs it":
        assert fast[0] == "stored"
    if name.startswith(("the signature's S", "signed exactly, by another")):
        assert fast == ("refused", (fast[1][0], "forged")), fast
    if name == "a member twice, signed as it is":
        assert fast == ("refused", ("a JSON object names a member twice (which one was "
                                    "signed?)", None))  # fmt: skip


def test_a_checkpoint_that_never_comes_is_chain_skipped_after_the_grace(db_url: str) -> None:
    """A pit of a shared group: round 2's checkpoint never arrives; round 3's names it. No
    finding at once; at the first batch after the grace, ``chain_skipped``."""
    migrate(db_url)
    table = SimTable("W01", key=KEY, seed=5)
    now = datetime.now(UTC)
    rounds = [table.next_round(now) for _ in range(4)]
    store = _store(db_url, grace=5.0)

    def batch(messages: list[tuple[str, dict[str, Any]]], at: float) -> None:
        store.ingest([Incoming(topic, wire(body), False, at) for topic, body in messages])

    t0 = time.time()
    batch(rounds[0], t0)
    batch(rounds[2], t0 + 1)
    alarms = "SELECT kind FROM record_alarms"
    assert store.db.all(alarms) == []
    assert store.db.one("SELECT count(*) FROM checkpoint_waits") == (1,)
    batch(rounds[3], t0 + 3)
    assert store.db.all(alarms) == []
    batch(rounds[3], t0 + 7)  # the same again: duplicates, but a batch of the table's
    assert store.db.all(alarms) == [("chain_skipped",)]
    assert store.db.one("SELECT count(*) FROM checkpoint_waits") == (0,)
    store.close()


def test_placeholders_outside_quotes_only_and_percent_kept() -> None:
    """The pit writes its SQL once with SQLite's ``?``; psycopg is given ``%s`` only where a
    ``?`` stands outside quotes, ``%%`` for every ``%``, and ``??`` for PostgreSQL's own ``?``
    operator (issue 41: a blind replace took quoted ``?`` and the operator for placeholders)."""
    from pit.db import postgres_sql

    assert postgres_sql("SELECT a FROM t WHERE b = ? AND c LIKE '50%?' AND d = ?") == (
        "SELECT a FROM t WHERE b = %s AND c LIKE '50%%?' AND d = %s"
    )
    assert postgres_sql('SELECT "odd?name", x %% 2 FROM t WHERE j ?? ?') == (
        'SELECT "odd?name", x %%%% 2 FROM t WHERE j ? %s'
    )
    assert postgres_sql("SELECT 'it''s ?', ?") == "SELECT 'it''s ?', %s"
    # psycopg's own placeholders in a PostgreSQL-only statement stay; a quoted one is text.
    assert postgres_sql("SELECT * FROM unnest(%b::text[]) WHERE x <> '%s'") == (
        "SELECT * FROM unnest(%b::text[]) WHERE x <> '%%s'"
    )


def test_a_quoted_question_mark_and_a_percent_on_both_databases(db_url: str) -> None:
    """The same statement on SQLite and PostgreSQL: the quoted ``?`` and ``%`` are text, the
    placeholder a parameter."""
    from pit.db import Database

    db = Database(db_url)
    try:
        row = db.one("SELECT 'a?b%c', ? || '%'", ("x",))
        assert row == ("a?b%c", "x%")
    finally:
        db.close()
