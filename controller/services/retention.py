"""Retention in the running daemon: closed rounds older than ``[journal] retention_days`` are
archived (controller/journal/maintenance.py) at start and then once a day (docs/journal.md)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Protocol

import structlog

from controller.journal import Journal
from controller.journal.maintenance import archive_rounds
from controller.ports import TableView

log = structlog.get_logger(__name__)

DAY_S = 24 * 3600.0
#: Rounds per archive file in the daemon: each batch holds the journal only briefly.
BATCH = 200


class RetentionHost(TableView, Protocol):
    """What retention uses: the config, the clock, and the journal itself (archiving deletes
    the rows it archived: the one service given the write API)."""

    @property
    def journal(self) -> Journal: ...


class RetentionService:
    name = "retention"

    def __init__(self, *, interval: float = DAY_S) -> None:
        self.interval = interval
        self.runs = 0
        self.done = asyncio.Event()  # set after each run (tests)

    async def run(self, host: RetentionHost) -> None:
        config = host.config.journal
        while True:
            if config.retention_days > 0:
                before = host.clock() - timedelta(days=config.retention_days)
                try:
                    report = await asyncio.to_thread(
                        archive_rounds,
                        host.journal,
                        before=before,
                        directory=config.archive_directory,
                        batch=BATCH,
                    )
                except Exception as exc:  # the table deals on; the next run tries again
                    log.error(
                        "retention_failed",
                        error=f"{type(exc).__name__}: {exc}",
                        directory=str(config.archive_directory),
                    )
                else:
                    log.info(
                        "retention_archived",
                        rounds=report.rounds,
                        events=report.events,
                        files=[str(p) for p in report.files],
                        kept_pending=report.kept_pending,
                        retention_days=config.retention_days,
                    )
            self.runs += 1
            self.done.set()
            await asyncio.sleep(self.interval)
