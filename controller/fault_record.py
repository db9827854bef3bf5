"""The record of a journal fault that survives the fault (docs/faults.md): the reserve kept
beside the journal is released when the journal cannot be written, so the fault is journaled
at once and every deal seen during it as it is seen; a kill or a restart during it loses none.
The table deals again only once the reserve can be made again."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from datetime import datetime

import structlog

from controller.clock import iso
from controller.journal import Journal, Transaction
from controller.journal.reserve import Reserve

log = structlog.get_logger(__name__)

#: Free space the reserve must leave when it is made again (as much as a start needs).
START_MARGIN = 4 * 2**20


class FaultRecord:
    def __init__(self, journal: Journal, reserve: Reserve | None, clock: Callable[[], datetime]):
        self.journal = journal
        self.reserve = reserve
        self.clock = clock
        self.on_file = False  # this fault's record is journaled: its deals go there too

    def free_mb(self) -> int | None:
        """The journal's filesystem's free space, or None (in memory, or unknown)."""
        if self.journal.path == ":memory:":
            return None
        try:
            return int(shutil.disk_usage(self.journal.path).free // 2**20)
        except OSError:
            return None

    def began(
        self, detail: str, since: datetime, also: Callable[[Transaction, int | None], None]
    ) -> bool:
        """Release the reserve and journal ``journal_fault_began`` (and what ``also`` writes,
        given the free MB, in the same transaction). False when even that fails (an I/O error,
        SQLite's own limit): the fault then lives in memory only, and the log says so."""
        freed = self.reserve.release() if self.reserve is not None else 0
        free_mb = self.free_mb()
        try:
            with self.journal.transaction() as tx:
                tx.record_event(
                    "journal_fault_began",
                    {
                        "since": iso(since, "microseconds"),
                        "detail": detail,
                        "reserve_released": freed,
                        "free_mb": free_mb,
                    },
                )
                also(tx, free_mb)
        except Exception as exc:
            log.error("journal_fault_not_recorded", error=str(exc), freed=freed)
            return False
        self.on_file = True
        log.warning("journal_fault_recorded", reserve_released=freed, free_mb=free_mb)
        return True

    def deal_seen(self, shuffle_id: str) -> None:
        """A deal seen on the line during the fault, on file at once (when the fault is)."""
        if not self.on_file:
            return
        try:
            with self.journal.transaction() as tx:
                tx.record_event(
                    "deal_seen_in_fault",
                    {"shuffle_id": shuffle_id, "seen_at": iso(self.clock(), "microseconds")},
                )
        except Exception as exc:
            log.error("deal_not_recorded_in_fault", error=str(exc))

    def room_to_recover(self) -> bool:
        """After a full disk, only once the reserve can be made again (so the next full disk is
        recorded too); other faults at once."""
        reserve = self.reserve
        if reserve is None or reserve.held >= reserve.size:
            return True
        free = self.free_mb()
        if free is not None and free * 2**20 < reserve.size - reserve.held + START_MARGIN:
            return False
        return reserve.ensure()

    def unfinished(self) -> tuple[datetime, str, list[str]] | None:
        """A fault the journal recorded but never saw end (a kill or a power cut during it):
        when it began, why, the deals seen meanwhile."""
        found = self.journal.unfinished_fault()
        self.on_file = found is not None
        return found
