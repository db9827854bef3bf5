"""Fail closed (docs/faults.md): a journal that refuses writes tilts the table, nothing unjournaled
is shown or sent, and the table recovers by itself when writes work again. Real faults: SQLite's
own "database or disk is full" (``PRAGMA max_page_count`` on the daemon's connection), real line
noise on a pty through the real serial driver, a real Mosquitto."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import aiohttp

from controller.display import DisplayService
from controller.journal import Journal
from controller.messages import StatusRequest, VoidRound
from controller.table import AlarmRaised, FaultCleared, RoundClosed, StatusChanged
from tests.harness import deal_until_fault, limit_pages, page_count, running_table


async def _until(condition, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


def _journaled(journal_path: Path) -> dict[str, tuple[str, str | None, str | None]]:
    """round id → (status, reason, shuffle id) as a separate reader sees the file."""
    with sqlite3.connect(journal_path) as conn:
        rows = conn.execute("SELECT round_id, status, reason, result FROM rounds").fetchall()
    return {r[0]: (r[1], r[2], json.loads(r[3]).get("shuffle_id") if r[3] else None) for r in rows}


async def test_a_full_journal_tilts_the_table_and_it_recovers_without_a_restart(
    tmp_path: Path,
) -> None:
    journal_path = tmp_path / "journal.sqlite3"
    async with running_table(tmp_path, seed=41) as t:
        first = await t.deal(rng_number=3)
        assert first.status == "settled"
        shown: list[RoundClosed] = []
        statuses: list[str] = []

        def listen(effect: object) -> None:
            if isinstance(effect, RoundClosed):
                shown.append(effect)
            elif isinstance(effect, StatusChanged):
                statuses.append(effect.payload.state)

        t.daemon.subscribe(listen)
        deals: list[str] = []
        limit_pages(t.journal, page_count(t.journal))
        await deal_until_fault(t, deals)
        # Two more deals on the line while the disk is full: not applied, tallied.
        for _ in range(2):
            await t.rng.press()
            deals.append((await t.shuffler.deal()).shuffle_id)
        await _until(lambda: t.daemon.table.fault is not None and t.daemon.table.fault.deals)

        status = t.daemon.table.status()
        assert status.state == "fault" and status.fault is not None
        assert "full" in status.fault.detail and status.fault.events_lost > 0
        assert "fault" in statuses
        assert t.daemon.healthy  # alive and saying so: no watchdog restart onto a full disk
        assert any(
            isinstance(e, AlarmRaised) and e.payload.code == "table_fault" for e in t.effects
        )
        # Commands change nothing and say why; a status request is still answered.
        refused = await t.daemon.submit(VoidRound(reason="test"))
        assert not refused.ok and "table fault" in (refused.error or "")
        answered = await t.daemon.submit(StatusRequest())
        assert answered.ok and answered.data is not None and answered.data["state"] == "fault"
        # Nothing heard by a listener while full was unjournaled: every round shown is on file.
        on_file = _journaled(journal_path)
        for effect in shown:
            p = effect.payload
            assert on_file[p.round_id][0] == p.status

        limit_pages(t.journal, None)  # space is back
        await _until(lambda: t.daemon.table.fault is None)
        assert t.daemon.healthy and statuses[-1] == "online"
        cleared = [e for e in t.effects if isinstance(e, FaultCleared)]
        assert len(cleared) == 1 and cleared[0].record["events_lost"] > 0
        # The table deals on.
        after = await t.deal(rng_number=5)
        while after.status != "settled":  # the voids of the recovery come first
            after = await t.next_closed()
        assert after.status == "settled"

    on_file = _journaled(journal_path)
    voided = {rid: v for rid, v in on_file.items() if v[1] == "journal_fault"}
    assert voided and all(v[0] == "void" for v in voided.values())
    # Every deal made is on file: settled (before the disk filled), or void with a reason.
    dealt_ids = {v[2] for v in on_file.values() if v[2]}
    assert set(deals) <= dealt_ids
    # Exactly the deals the table never applied became journal_fault rounds, with their ids.
    assert set(deals[-2:]) <= {v[2] for v in voided.values()}
    for status_, reason, _ in on_file.values():
        assert status_ != "open"
        assert status_ == "settled" or reason
    with sqlite3.connect(journal_path) as conn:
        [(record,)] = conn.execute("SELECT payload FROM events WHERE kind = 'journal_fault'")
    record = json.loads(record)
    assert record["since"] < record["until"] and "full" in record["detail"]
    assert set(record["rounds_voided"]) == set(voided)
    with Journal.open(journal_path, "PG-T1") as j:
        assert j.upkeep.integrity_check() == ["ok"]


async def test_line_noise_costs_a_bounded_journal_and_the_page_still_answers(
    tmp_path: Path,
) -> None:
    """200 KB of ``\\x02\\xff`` (a frame start and garbage, over and over) on the shuffler's
    line: one alarm per interval with the count, not one per frame, and the table deals on."""
    journal_path = tmp_path / "journal.sqlite3"
    display = DisplayService(port=0)
    async with running_table(tmp_path, services=[display], seed=47) as t:
        await asyncio.wait_for(display.started.wait(), 10)
        assert (await t.deal(rng_number=1)).status == "settled"
        size_before = _journal_bytes(journal_path)
        rows_before = _rows(journal_path)
        noise = b"\x02\xff" * 100_000
        for i in range(0, len(noise), 4096):
            assert await t.shuffler.port.write(noise[i : i + 4096])
        # The driver has read it all when a frame sent after it arrives: the next deal.
        after = await t.deal(rng_number=2)
        assert after.status == "settled"
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{display.url}/api/state", timeout=aiohttp.ClientTimeout(2)) as response,
        ):
            assert response.status == 200
        grown = _journal_bytes(journal_path) - size_before
        rows = _rows(journal_path) - rows_before
        frame_alarms = [
            e for e in t.effects if isinstance(e, AlarmRaised) and e.payload.code == "frame_error"
        ]
    assert grown < 1_000_000, f"the journal grew {grown} bytes"
    assert rows < 100, f"{rows} journal rows for one deal and the noise"
    assert 1 <= len(frame_alarms) <= 2
    held = t.daemon.limiter.holding()
    assert held > 1_000  # counted, for the interval's summary alarm


def _journal_bytes(journal_path: Path) -> int:
    wal = journal_path.with_name(journal_path.name + "-wal")
    return journal_path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def _rows(journal_path: Path) -> int:
    with sqlite3.connect(journal_path) as conn:
        return int(conn.execute("SELECT count(*) FROM events").fetchone()[0])


async def test_low_free_space_is_alarmed_long_before_the_disk_is_full(tmp_path: Path) -> None:
    # A threshold above any disk's free space here: the alarm must come at the first look.
    extra = "min_free_mb = 1000000\n"
    async with running_table(tmp_path, seed=53, journal_extra=extra) as t:
        t.daemon.disk_check_interval = 0.0

        def alarms(code: str) -> list[AlarmRaised]:
            return [e for e in t.effects if isinstance(e, AlarmRaised) and e.payload.code == code]

        await _until(lambda: bool(alarms("disk_space_low")))
        [low] = alarms("disk_space_low")
        assert low.payload.severity == "critical" and "1000000 MB" in low.payload.detail
        assert (await t.deal(rng_number=6)).status == "settled"  # a warning, not a stop
        assert len(alarms("disk_space_low")) == 1  # once per crossing, not per look
        t.daemon.disk.threshold_mb = 1  # as if [journal] min_free_mb were 1
        await _until(lambda: bool(alarms("disk_space_ok")))
    with sqlite3.connect(tmp_path / "journal.sqlite3") as conn:
        kinds = [k for (k,) in conn.execute("SELECT kind FROM events WHERE kind = 'disk_space'")]
    assert kinds == ["disk_space", "disk_space"]
