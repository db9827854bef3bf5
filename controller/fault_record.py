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
from controller.table import AlarmRaised, DiskSpace, Table

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
        found = self.journal.kept.unfinished_fault()
        self.on_file = found is not None
        return found

    def resume(self, table: Table) -> None:
        """A fault the journal recorded but never saw end (a kill or a power cut during it):
        the table starts in it, with the deals seen meanwhile, and ends it as any fault,
        voiding them (its alarm is among the latched ones already)."""
        unfinished = self.unfinished()
        if unfinished is None:
            return
        since, detail, deals = unfinished
        effects = table.enter_fault(f"{detail} (before the restart)", since)
        for effect in effects:  # its alarm was journaled when it began
            if isinstance(effect, AlarmRaised):
                table.latched.pop(effect.payload.alarm_id, None)
        fault = table.fault
        if fault is not None:
            fault.deals.extend(deals)
            fault.events_lost += len(deals)
            fault.by_kind["deal_seen_in_fault"] += len(deals)
        log.warning("journal_fault_resumed", since=iso(since), deals=len(deals))


class DiskWatch:
    """Alarm when the journal's filesystem runs low, long before SQLite reports it full; back
    to normal only 10 % above the threshold, so it does not flap."""

    def __init__(self, record: FaultRecord, threshold_mb: int) -> None:
        self.record = record
        self.threshold_mb = threshold_mb
        self.low = False
        self.checked: datetime | None = None

    def check(self, now: datetime, interval: float) -> DiskSpace | None:
        """At a tick, every ``interval`` seconds: the change to tell the table, or None."""
        if self.record.journal.path == ":memory:":
            return None
        if self.checked is not None and (now - self.checked).total_seconds() < interval:
            return None
        self.checked = now
        free_mb = self.record.free_mb()
        if free_mb is None:
            log.warning("disk_space_unknown", path=self.record.journal.path)
            return None
        threshold = self.threshold_mb
        low = free_mb < threshold if not self.low else free_mb < threshold * 1.1
        if low == self.low:
            return None
        self.low = low
        return DiskSpace(free_mb=int(free_mb), threshold_mb=threshold, low=low)

    def record_low(self, tx: Transaction, free_mb: int | None) -> None:
        """In the fault's first record: the disk is low (``disk_space_ok`` is said when the
        space is back)."""
        if free_mb is not None and free_mb < self.threshold_mb and not self.low:
            self.low = True
            tx.record_event(
                "disk_space", {"free_mb": free_mb, "threshold_mb": self.threshold_mb, "low": True}
            )
