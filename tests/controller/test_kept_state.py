"""What the journal keeps for a restart (latched alarms, game protection's state, the dealer)
may be damaged — an edit, a version that wrote it differently: the table still starts, says
so, and loses nothing silently (docs/audit.md, docs/protection.md)."""

from __future__ import annotations

from pathlib import Path

from controller.journal import Journal
from tests.harness import running_table


async def test_damaged_kept_state_neither_stops_the_start_nor_vanishes(tmp_path: Path) -> None:
    journal_path = tmp_path / "journal.sqlite3"
    with Journal.open(journal_path, "PG-T1") as journal, journal.transaction() as tx:
        tx.remember("latched_alarms", [{"code": 1}, "not an alarm"])
        tx.remember("protection_state", {"watch": {"version": 99}, "last_seq": "x"})
        tx.remember("dealer_signed_in", 42)
    async with running_table(tmp_path / "run", journal_path=journal_path) as t:
        latched = list(t.daemon.table.latched.values())
        # Each unreadable record stays latched as what it is, for a person to look at.
        assert [a.code for a in latched] == ["latched_alarm_unreadable"] * 2
        assert all(a.severity == "critical" and a.ack_required for a in latched)
        assert t.daemon.table.status().alarms_unacknowledged == latched
        assert t.daemon.table.dealer_id is None
        monitor = t.protection
        assert monitor is not None and monitor.watch.rounds == 0  # started afresh
        result = await t.deal(rng_number=3)
        await t.service("protection").observed()  # the statistics run after the publish
        assert result.status == "settled" and monitor.watch.rounds == 1


async def test_a_chain_broken_while_the_table_was_down_is_alarmed_at_every_start(
    tmp_path: Path,
) -> None:
    import sqlite3

    journal_path = tmp_path / "journal.sqlite3"
    async with running_table(tmp_path / "a", journal_path=journal_path) as t:
        assert (await t.deal(rng_number=2)).status == "settled"
        assert "journal_chain_broken" not in [a.code for a in t.daemon.table.latched.values()]
    async with running_table(tmp_path / "b", journal_path=journal_path, seed=2) as t:
        assert (await t.deal(rng_number=4)).status == "settled"
    with Journal.open(journal_path, "PG-T1") as journal:
        verified = journal.kept.remembered("chain_verified")
    assert isinstance(verified, list) and verified[0] > 10  # the next start checks from here
    with sqlite3.connect(journal_path) as conn:
        (row,) = conn.execute("SELECT max(id) FROM events WHERE kind = 'packet_dealt'").fetchone()
        conn.execute(
            "UPDATE events SET payload = replace(payload, 'packet', 'packet ') WHERE id = ?", (row,)
        )
    for run in ("c", "d"):  # found again at every start, until the journal is mended
        async with running_table(tmp_path / run, journal_path=journal_path, seed=3) as t:
            broken = [
                a for a in t.daemon.table.latched.values() if a.code == "journal_chain_broken"
            ]
            assert broken and broken[0].severity == "critical" and broken[0].ack_required
            assert f"event row {row}" in broken[0].detail


def _latched_codes(t: object) -> list[str]:
    return [a.code for a in t.daemon.table.latched.values()]  # type: ignore[attr-defined]


async def test_an_alarm_a_start_raises_survives_putting_meta_back(tmp_path: Path) -> None:
    """Attack (issue 32, K1): edit ``meta`` so a start raises kept_state_edited, then put
    ``meta`` back and restart. The alarm was journaled and latched on the chained record at the
    first start, so it is still there, and the journal holds its ``alarm`` event."""
    import json
    import sqlite3

    from controller.audit import verify_journal

    journal_path = tmp_path / "journal.sqlite3"
    async with running_table(tmp_path / "a", journal_path=journal_path) as t:
        assert (await t.deal(rng_number=2)).status == "settled"
    key = "house_way/PG-T1"
    with sqlite3.connect(journal_path) as conn:
        (honest,) = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", ('{"name":"x","digest":"0"}', key))
    async with running_table(tmp_path / "b", journal_path=journal_path, seed=2) as t:
        assert "kept_state_edited" in _latched_codes(t)
    with sqlite3.connect(journal_path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = ?", (honest, key))
    async with running_table(tmp_path / "c", journal_path=journal_path, seed=3) as t:
        assert "kept_state_edited" in _latched_codes(t)  # still latched, not raised again
        assert _latched_codes(t).count("kept_state_edited") == 1
    with sqlite3.connect(journal_path) as conn:
        alarms = [
            json.loads(p)["code"]
            for (p,) in conn.execute("SELECT payload FROM events WHERE kind = 'alarm'")
        ]
    assert alarms.count("kept_state_edited") == 1
    assert verify_journal(journal_path).ok  # meta agrees with the chain again


async def test_setting_the_verified_point_forward_in_meta_skips_nothing(tmp_path: Path) -> None:
    """Attack (issue 32, N11′): edit a row the last start did not verify yet, then set ``meta``'s
    chain_verified to the head so the next start would check nothing. The start goes by the
    chained record, checks the edited row and raises journal_chain_broken."""
    import sqlite3

    journal_path = tmp_path / "journal.sqlite3"
    async with running_table(tmp_path / "a", journal_path=journal_path) as t:
        assert (await t.deal(rng_number=2)).status == "settled"
    async with running_table(tmp_path / "b", journal_path=journal_path, seed=2) as t:
        assert (await t.deal(rng_number=4)).status == "settled"
    with sqlite3.connect(journal_path) as conn:
        (row,) = conn.execute("SELECT max(id) FROM events WHERE kind = 'packet_dealt'").fetchone()
        conn.execute(
            "UPDATE events SET payload = replace(payload, 'packet', 'packet ') WHERE id = ?", (row,)
        )
        head = conn.execute("SELECT id, chain FROM events ORDER BY id DESC LIMIT 1").fetchone()
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('chain_verified/PG-T1', ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (f'[{head[0]},"{head[1]}"]',),
        )
    async with running_table(tmp_path / "c", journal_path=journal_path, seed=3) as t:
        broken = [a for a in t.daemon.table.latched.values() if a.code == "journal_chain_broken"]
        assert broken and f"event row {row}" in broken[0].detail
