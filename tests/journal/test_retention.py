"""Retention in the running daemon (controller/services/retention.py): at start, closed rounds
older than ``retention_days`` go to the archive directory while the table deals on."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from controller.journal import Journal
from controller.journal.maintenance import verify_archive
from controller.services.retention import RetentionService
from tests.harness import running_table


async def test_the_daemon_archives_old_rounds_and_deals_on(tmp_path: Path) -> None:
    journal_path = tmp_path / "journal.sqlite3"
    long_ago = datetime.now(UTC) - timedelta(days=120)
    with Journal.open(journal_path, "PG-T1", clock=lambda: long_ago) as j:
        for n in range(1, 6):
            rid = f"PG-T1-OLD{n}"
            with j.transaction() as tx:
                tx.open_round(rid, n)
                tx.record_event("deal_started", {"n": n}, rid)
                tx.close_round(rid, "dead", "short_packet", {"n": n})
    archive = tmp_path / "archive"
    service = RetentionService(interval=3600)
    extra = f'retention_days = 90\narchive_dir = "{archive}"\n'
    async with running_table(
        tmp_path, services=[service], journal_extra=extra, journal_path=journal_path
    ) as t:
        await asyncio.wait_for(service.done.wait(), 10)
        assert [r.round_id for r in t.journal.history.recent_rounds(10)] == []
        fresh = await t.deal(rng_number=3)
        assert fresh.status == "settled" and fresh.round_seq == 6  # the numbering goes on
    [file] = sorted(archive.glob("*.jsonl.gz"))
    ok, line = verify_archive(file)
    assert ok and "5 rounds" in line
